//! A local folder listed recursively as object_store's local backend lists it
//! ([`crate::TableStore::list_recursive`]), each file with its [`Change`] from the one
//! look the listing takes at it: for [`crate::TableStore::list_recursive_changes`], a
//! Parquet folder's listing at every sync. object_store looks at each file three times
//! (an `lstat`, then a `stat` for `is_file`, then one for its metadata) and a
//! [`crate::TableStore::changes`] after it a fourth (an `lstat`): 80,000 `statx` for a
//! no-op sync of a 20,000-file folder. Here one `lstat` a file, and a `stat` more for a
//! symbolic link (whose own change counts, [`Change::look_up`]).
//!
//! The files and their entries are object_store's (its walk, `walkdir` following links,
//! its time in ms and its tag): where it would fail (a name it cannot take as an object
//! path, a link loop, a folder it cannot read) the walk gives up, and the caller lists
//! through object_store for its error.

use std::io;
use std::path::Path;

use crate::{Change, Entry};

/// Every file below `folder` as object_store lists it, with its path relative to `root`
/// (which holds `folder`), its entry as object_store gives it and its change, in the
/// order of the walk. `None` where object_store's listing would fail.
pub(crate) fn walk(root: &Path, folder: &Path) -> Option<Vec<(Entry, Change)>> {
    let mut found = Vec::new();
    let walk = walkdir::WalkDir::new(folder)
        .min_depth(1)
        .follow_links(true);
    for entry in walk {
        let entry = match entry {
            Ok(entry) => entry,
            // Gone since its folder was read (a writer's temporary file renamed; a link
            // that leads nowhere): left out, as object_store leaves it out.
            Err(e)
                if e.io_error()
                    .is_some_and(|e| e.kind() == io::ErrorKind::NotFound) =>
            {
                continue
            }
            Err(_) => return None,
        };
        if entry.file_type().is_dir() {
            continue;
        }
        // A file object_store cannot look at is left out, as it leaves it out.
        let Ok((meta, change)) = Change::with_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let path = object_path(root, entry.path())?;
        let name = path.rsplit('/').next().unwrap_or_default();
        if crate::local_list::staged_upload(name) {
            continue;
        }
        found.push((listed(path, &meta)?, change));
    }
    Some(found)
}

/// `path` below `root` as object_store names it: its parts joined by `/`, each UTF-8 and
/// a valid object path part. `None` otherwise, where object_store fails the listing.
fn object_path(root: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(root).ok()?;
    let mut joined = String::with_capacity(relative.as_os_str().len());
    for part in relative.components() {
        let part = part.as_os_str().to_str()?;
        object_store::path::PathPart::parse(part).ok()?;
        if !joined.is_empty() {
            joined.push('/');
        }
        joined.push_str(part);
    }
    Some(joined)
}

/// A file's entry as object_store's local listing gives it: its size, its modification
/// time in ms (rounded down, as its `chrono` time gives it before 1970 too) and its tag
/// (inode, modification time in µs, size: `get_etag`). `None` without a modification
/// time, where object_store fails.
fn listed(path: String, meta: &std::fs::Metadata) -> Option<Entry> {
    let modified = meta.modified().ok()?;
    let (modified_ms, micros) = match modified.duration_since(std::time::UNIX_EPOCH) {
        Ok(after) => (i64::try_from(after.as_millis()).ok()?, after.as_micros()),
        Err(before) => {
            let ms = before.duration().as_nanos().div_ceil(1_000_000);
            (i64::try_from(ms).ok()?.checked_neg()?, 0)
        }
    };
    let size = meta.len();
    Some(Entry {
        path,
        size,
        modified_ms,
        e_tag: Some(format!("{:x}-{micros:x}-{size:x}", inode(meta))),
    })
}

#[cfg(unix)]
fn inode(meta: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(meta)
}

/// No inode off Unix: object_store's tag has 0 there.
#[cfg(not(unix))]
fn inode(_: &std::fs::Metadata) -> u64 {
    0
}
