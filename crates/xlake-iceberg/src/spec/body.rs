//! A document written in parts (issue 16): what this process serializes goes into
//! buffers, and text carried from the file it was read from (old snapshots, the
//! snapshot log's older entries; see [`crate::history`]) goes out as views of that
//! file's bytes where the runs are large, so a commit on a long history does not copy
//! ~900 KiB into a fresh buffer to write it. The bytes are those of the whole document
//! written in one buffer; [`crate::encode`] decides what goes where.

use bytes::Bytes;

/// Bytes written in order, as pieces: `buf` for what is serialized here, and for text
/// carried from `source` (the file it was read from) a run of that text, which grows
/// while carried pieces follow each other there with only a comma between, as they are
/// written. Invariant: `buf` holds only what was written after the pending run.
/// [`Body::finish`] makes the parts: a run of at least [`VIEW_MIN`] bytes goes out as a
/// view of the source; everything between is copied into one buffer (so a file whose
/// carried snapshots do not join, e.g. one with whitespace between them, is written
/// from one buffer as before, not from thousands of small parts).
pub(crate) struct Body {
    source: Option<Bytes>,
    pieces: Vec<Piece>,
    /// What is being serialized now (after the pending run).
    pub(crate) buf: Vec<u8>,
    run: Option<std::ops::Range<usize>>,
}

/// A piece of the body: bytes serialized here, a range of the source, or carried text
/// that is not a view of the source.
enum Piece {
    Written(Vec<u8>),
    Read(std::ops::Range<usize>),
    Other(Bytes),
}

/// The smallest run of carried text written as a view rather than copied.
const VIEW_MIN: usize = 64 * 1024;

impl Body {
    pub(crate) fn new(source: Option<&Bytes>) -> Self {
        Self {
            source: source.cloned(),
            pieces: Vec::new(),
            buf: Vec::with_capacity(64 * 1024),
            run: None,
        }
    }

    /// Append `text`, carried as read.
    pub(crate) fn carried(&mut self, text: &Bytes) {
        let Some(at) = self.offset_in_source(text) else {
            self.flush();
            self.pieces.push(Piece::Other(text.clone()));
            return;
        };
        let end = at + text.len();
        let joins = |run: &std::ops::Range<usize>, source: &Bytes| {
            run.end + 1 == at && source.get(run.end) == Some(&b',')
        };
        match (&mut self.run, &self.source) {
            (Some(run), Some(source)) if self.buf == b"," && joins(run, source) => {
                run.end = end;
                self.buf.clear();
            }
            _ => {
                self.flush();
                self.run = Some(at..end);
            }
        }
    }

    /// Where `text` starts in the source, if it is a view of it.
    fn offset_in_source(&self, text: &Bytes) -> Option<usize> {
        let source = self.source.as_ref()?;
        let at = (text.as_ptr() as usize).checked_sub(source.as_ptr() as usize)?;
        (at + text.len() <= source.len()).then_some(at)
    }

    /// The pending run, then what was written after it, as pieces.
    fn flush(&mut self) {
        if let Some(run) = self.run.take() {
            self.pieces.push(Piece::Read(run));
        }
        if !self.buf.is_empty() {
            self.pieces
                .push(Piece::Written(std::mem::take(&mut self.buf)));
        }
    }

    /// The parts, in order: large runs as views, the rest copied between them.
    pub(crate) fn finish(mut self) -> Vec<Bytes> {
        self.flush();
        let (mut parts, mut copied) = (Vec::new(), Vec::new());
        for piece in self.pieces {
            let view = match piece {
                Piece::Read(run) => match &self.source {
                    Some(source) => source.slice(run),
                    None => continue,
                },
                Piece::Other(bytes) => bytes,
                Piece::Written(written) if copied.is_empty() => {
                    copied = written;
                    continue;
                }
                Piece::Written(written) => {
                    copied.extend_from_slice(&written);
                    continue;
                }
            };
            if view.len() < VIEW_MIN {
                copied.extend_from_slice(&view);
                continue;
            }
            if !copied.is_empty() {
                parts.push(Bytes::from(std::mem::take(&mut copied)));
            }
            parts.push(view);
        }
        if !copied.is_empty() {
            parts.push(Bytes::from(copied));
        }
        parts
    }
}
