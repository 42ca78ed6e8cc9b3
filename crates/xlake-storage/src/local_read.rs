//! A whole local file read for [`crate::TableStore::get`] and
//! [`crate::TableStore::get_written_once`] on a table opened by path (issue 16).
//!
//! A file is read with one read of its size (object_store's local read doubles the size
//! of each read, 8 KiB to 512 KiB). A large file that is never rewritten in place once it
//! exists (every Iceberg metadata file xlake writes: each version is a put-if-absent of
//! a new name, each list and manifest a put of a new unique name, which object_store
//! writes to a staged file and renames) is mapped instead, on a local disk's file system:
//! its pages are the page cache's, not a fresh buffer's, so a commit on a 1.2 MB
//! `vN.metadata.json` saves the copy and ~300 page faults (~0.8 ms, benches/README.md).
//! Where mapping is refused or not safe, the file is read.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use bytes::Bytes;

use crate::Stamp;

/// The smallest file mapped rather than read: below it, the mapping's own system calls
/// cost about what the copy saves.
pub(crate) const MAP_MIN: u64 = 256 * 1024;

/// How a whole file is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Whole {
    /// One read into a buffer of the file's size.
    Read,
    /// [`Self::Read`] on the calling thread: a file known to be a few bytes (a pointer
    /// file), whose read costs less than a hand-off to a blocking thread and back.
    Small,
    /// Mapped when at least [`MAP_MIN`] bytes on a local disk's file system; the caller
    /// vouches that no writer truncates or rewrites the file in place (see [`map`]).
    MapWrittenOnce,
}

/// The whole of `file`. A folder fails as `std::fs::read` fails on it (`IsADirectory`);
/// a FIFO, socket or device fails at once (a FIFO's open would wait for a writer).
#[cfg(test)]
pub(crate) fn read(file: &Path, how: Whole) -> std::io::Result<Bytes> {
    read_timed(file, how).map(|(bytes, _)| bytes)
}

/// [`read`], with the file's modification time and tag (as a listing gives them) from
/// the `fstat` the read makes anyway: no second system call for them.
pub(crate) fn read_timed(file: &Path, how: Whole) -> std::io::Result<(Bytes, Stamp)> {
    let mut f = open_without_waiting(file)?;
    let meta = f.metadata()?;
    let modified = crate::local_list::stamp(&meta);
    if !meta.is_file() && !meta.is_dir() {
        return Err(not_a_file());
    }
    if how == Whole::MapWrittenOnce && meta.is_file() && meta.len() >= MAP_MIN && on_local_disk(&f)
    {
        if let Ok(mapped) = map(&f) {
            return Ok((mapped, modified));
        }
    }
    // As `std::fs::read` does: a size that cannot be allocated is an error, not an abort.
    let mut buf = Vec::new();
    let len = usize::try_from(meta.len()).unwrap_or(usize::MAX);
    buf.try_reserve_exact(len)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
    // Through `Read::by_ref`: `File`'s own `read_to_end` would look up the size and the
    // position again (a `statx` and an `lseek` per file) to size a buffer that is sized.
    Read::by_ref(&mut f).take(u64::MAX).read_to_end(&mut buf)?;
    Ok((Bytes::from(buf), modified))
}

/// Why `file` cannot be read by a range (a FIFO, socket or device, whose open would wait);
/// `None` for a regular file, a folder or a path that cannot be looked at (the read then
/// fails as it fails).
pub(crate) fn not_readable(file: &Path) -> Option<std::io::Error> {
    let meta = std::fs::metadata(file).ok()?;
    (!meta.is_file() && !meta.is_dir()).then(not_a_file)
}

fn not_a_file() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "not a regular file (a FIFO, socket or device)",
    )
}

/// `file` opened for reading without blocking on a FIFO (no writer) or a device: the
/// flag changes nothing for the reads of a regular file.
#[cfg(unix)]
fn open_without_waiting(file: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(file)
}

#[cfg(not(unix))]
fn open_without_waiting(file: &Path) -> std::io::Result<File> {
    File::open(file)
}

/// `f`'s pages, mapped read-only, owned by the returned bytes (unmapped when the last
/// slice of them is dropped).
#[allow(unsafe_code)]
fn map(f: &File) -> std::io::Result<Bytes> {
    // SAFETY: memmap2's contract is that the file is not changed while mapped. Callers
    // map only files that are never rewritten in place: Iceberg metadata files, each
    // created whole under a new name. On a local disk's file system (`on_local_disk`)
    // deleting one (expire, cleanup) leaves the mapping valid; a truncation in place
    // (no writer of the formats does it; a tool such as `rsync --inplace` could) or a
    // failing disk would stop the process with SIGBUS (docs/reliability.md).
    let map = unsafe { memmap2::Mmap::map(f)? };
    Ok(Bytes::from_owner(map))
}

/// Whether `f` is on a local disk's or memory's file system, whose mapped pages stay
/// readable after the file is deleted. On a network or FUSE file system a page read
/// after another host deleted the file, or a read that fails, ends the process (SIGBUS)
/// instead of failing the read: such files are read.
#[cfg(target_os = "linux")]
fn on_local_disk(f: &File) -> bool {
    // ext2/3/4, xfs, btrfs, tmpfs, overlayfs (containers), f2fs, zfs.
    const LOCAL: [u64; 7] = [
        0xEF53,
        0x5846_5342,
        0x9123_683E,
        0x0102_1994,
        0x794C_7630,
        0xF2F5_2010,
        0x2FC1_2FC1,
    ];
    // (`f_type` is 32 bits on some targets: compared as its low 32 bits.)
    rustix::fs::fstatfs(f).is_ok_and(|s| LOCAL.contains(&u64::from(s.f_type as u32)))
}

/// Elsewhere files are always read.
#[cfg(not(target_os = "linux"))]
fn on_local_disk(_: &File) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_file_reads_as_the_read_one() {
        let dir = tempfile::tempdir().unwrap();
        for len in [
            0,
            10,
            MAP_MIN as usize - 1,
            MAP_MIN as usize,
            3 * MAP_MIN as usize + 7,
        ] {
            let path = dir.path().join(format!("f{len}"));
            let text: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            std::fs::write(&path, &text).unwrap();
            for how in [Whole::Read, Whole::MapWrittenOnce] {
                let bytes = read(&path, how).unwrap();
                assert_eq!(bytes.as_ref(), text.as_slice(), "{len} {how:?}");
                // A slice outlives the handle it came from.
                let tail = bytes.slice(len / 2..);
                drop(bytes);
                assert_eq!(tail.as_ref(), &text[len / 2..]);
            }
        }
        for how in [Whole::Read, Whole::MapWrittenOnce] {
            let e = read(dir.path(), how).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::IsADirectory);
            let e = read(&dir.path().join("none"), how).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        }
    }

    /// A FIFO named like a file xlake reads fails at once, in every mode: its open would
    /// wait for a writer forever (hostile review, 2026-12-05: a local sync hung).
    #[cfg(unix)]
    #[test]
    fn a_fifo_fails_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("x-paths.bin");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::RUSR).unwrap();
        for how in [Whole::Read, Whole::Small, Whole::MapWrittenOnce] {
            let e = read(&fifo, how).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{how:?}");
        }
        assert!(not_readable(&fifo).is_some());
        assert!(not_readable(dir.path()).is_none());
    }
}
