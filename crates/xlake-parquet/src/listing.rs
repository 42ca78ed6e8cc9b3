//! Which files of the folder are data, and a fingerprint of them.

use xlake_storage::Entry;

/// The folder xlake writes into the table root.
const METADATA_DIR: &str = "metadata";

/// How the folders a rebuild sets old histories aside in begin:
/// `metadata.relocated-<time>/` beside `metadata/`.
const ASIDE_PREFIX: &str = "metadata.relocated-";

/// Whether a listed file is a data file of the table: not in xlake's own folders
/// (`metadata/`, `metadata.relocated-*/`; a folder of the table's own named
/// `metadata.<other>/` is data, hostile review hr17: its files went unmirrored, exit 0),
/// no path segment starting with `.`, or with `_` and holding no `=` (`_temporary/` of a
/// job still writing, `_SUCCESS`, hidden files; a partition folder `_day=1/` is data, as
/// Spark's file index keeps it: hostile review hr17), and not empty (a file being written).
pub fn is_data_file(entry: &Entry) -> bool {
    let top = entry.path.split('/').next().unwrap_or_default();
    let own = entry.path.contains('/') && (top == METADATA_DIR || top.starts_with(ASIDE_PREFIX));
    let hidden = |s: &str| s.starts_with('.') || (s.starts_with('_') && !s.contains('='));
    !own && entry.size > 0 && !entry.path.split('/').any(hidden)
}

/// The data files of a listing, sorted by path.
pub fn data_files(entries: Vec<Entry>) -> Vec<Entry> {
    let mut files: Vec<Entry> = entries.into_iter().filter(is_data_file).collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

/// A fingerprint of the listing (paths, sizes, modification times): equal fingerprints
/// mean nothing was added or removed, nor rewritten with another size or a new time (see
/// [`crate::rewrites`] for the rest). FNV-1a, stable across builds.
pub fn fingerprint(files: &[Entry]) -> String {
    let mut hash = Fnv::new();
    for f in files {
        hash.eat(f.path.as_bytes());
        hash.eat(&[0]);
        hash.eat(&f.size.to_le_bytes());
        hash.eat(&f.modified_ms.to_le_bytes());
    }
    format!("{}-{}", hash.hex(), files.len())
}

/// A 64-bit FNV-1a hash, stable across builds (what the notes record).
pub(crate) struct Fnv(u64);

impl Fnv {
    pub(crate) fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn eat(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// The hash as 16 hex digits.
    pub(crate) fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, size: u64) -> Entry {
        Entry {
            path: path.into(),
            size,
            modified_ms: 1,
            e_tag: None,
        }
    }

    #[test]
    fn skips_metadata_hidden_temporary_and_empty_files() {
        let files = data_files(vec![
            entry("b=1/part-0.parquet", 10),
            entry("metadata/v1.metadata.json", 10),
            entry("metadata.relocated-20261201T120000Z/v1.metadata.json", 10),
            entry("_temporary/0/part-1.parquet", 10),
            entry("b=1/_SUCCESS", 0),
            entry("b=1/.part-2.parquet.crc", 10),
            entry("b=2/part-3.parquet", 0),
            entry("a.parquet", 10),
            entry("metadata.v2/c.parquet", 10),
            entry("_day=1/d.parquet", 10),
            entry("_delta_log/00000000000000000000.json", 10),
        ]);
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "_day=1/d.parquet",
                "a.parquet",
                "b=1/part-0.parquet",
                "metadata.v2/c.parquet"
            ]
        );
    }

    #[test]
    fn fingerprint_changes_with_any_file() {
        let a = vec![entry("a", 1), entry("b", 2)];
        let b = vec![entry("a", 1), entry("b", 3)];
        assert_eq!(fingerprint(&a), fingerprint(&a.clone()));
        assert_ne!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&a[..1]));
    }
}
