//! [`Change`]: when a listed file last changed in any way, and what tells it from another
//! written at its path, for a source that must see every rewrite of a file under its name
//! (a Parquet folder, whose files carry no history) and to which a false alarm costs
//! little (a footer read again).
//!
//! Unlike a [`crate::Stamp`] (which tells a commit file written anew, and must not move
//! without one: each false alarm there costs every sync a read until a new version is
//! mirrored), a change is told by what no one can set back: an object's modification time
//! (the store sets it on every write), a local file's status change time (`ctime`, moved
//! by every write and by setting the file's times, so by `cp -p` and `rsync -t` onto an
//! existing file, which keep its inode, size, creation and modification times; moved too
//! by a `chmod`, a `chown` or a hard link, which then count as a change).

use crate::Entry;

/// When a listed file last changed, and its tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// When the file last changed, ns since the epoch: on an object store its modification
    /// time as listed (S3 lists whole seconds); on a local disk (Unix) its status change
    /// time; elsewhere its modification time.
    pub at_ns: i64,
    /// What tells the file from another written at the same `at_ns`: an object store's
    /// `ETag` from the listing (S3 and GCS: the content's MD5 for a single-part upload;
    /// `None` where the listing gives none); on a local disk (Unix) the file's inode, size
    /// and the nanoseconds of its modification and status change times; elsewhere `None`.
    pub tag: Option<String>,
}

impl Change {
    /// A listed object's change, from its listing alone (an object store's: no request).
    pub fn listed(entry: &Entry) -> Self {
        Change {
            at_ns: entry.modified_ms.saturating_mul(1_000_000),
            tag: entry.e_tag.clone(),
        }
    }

    /// A local file's change, from its metadata (links followed).
    #[cfg(unix)]
    pub(crate) fn local(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let at_ns = meta
            .ctime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.ctime_nsec());
        let tag = format!(
            "{:x}-{:x}-{:x}.{:x}-{:x}.{:x}",
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec()
        );
        Change {
            at_ns,
            tag: Some(tag),
        }
    }

    /// The change of a local file at `path`: its own, and where `path` is a symbolic link,
    /// the link's too (the newer time, both tags): a link pointed at another file of the
    /// same size and modification time (a rollback to an older copy) changes only the
    /// link (hostile review hr11: such a file kept its old rows and bounds, exit 0). One
    /// `lstat`, and a `stat` more for a link.
    pub(crate) fn look_up(path: &std::path::Path) -> std::io::Result<Self> {
        Ok(Change::with_metadata(path)?.1)
    }

    /// [`Self::look_up`], with the metadata of the file `path` leads to (links followed):
    /// what a listing that looks each file up once needs besides (`local_tree`).
    pub(crate) fn with_metadata(
        path: &std::path::Path,
    ) -> std::io::Result<(std::fs::Metadata, Self)> {
        let own = std::fs::symlink_metadata(path)?;
        if !own.file_type().is_symlink() {
            let change = Change::local(&own);
            return Ok((own, change));
        }
        let target = std::fs::metadata(path)?;
        let (link, file) = (Change::local(&own), Change::local(&target));
        let tag = match (link.tag, file.tag) {
            (Some(l), Some(t)) => Some(format!("{l}>{t}")),
            (l, t) => t.or(l),
        };
        let change = Change {
            at_ns: link.at_ns.max(file.at_ns),
            tag,
        };
        Ok((target, change))
    }

    /// See the Unix version: no status change time here, the modification time stands in.
    #[cfg(not(unix))]
    pub(crate) fn local(meta: &std::fs::Metadata) -> Self {
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        Change {
            at_ns: modified,
            tag: None,
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn a_copy_keeping_times_onto_a_file_moves_its_change() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let old = SystemTime::now() - Duration::from_secs(3600);
        for (path, text) in [(&a, "one"), (&b, "two")] {
            std::fs::write(path, text).unwrap();
            std::fs::File::options()
                .write(true)
                .open(path)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        let before = Change::local(&std::fs::metadata(&a).unwrap());
        std::thread::sleep(Duration::from_millis(20));
        // `cp -p b a`: a's inode kept, its bytes replaced, its time set back.
        std::fs::write(&a, std::fs::read(&b).unwrap()).unwrap();
        let file = std::fs::File::options().write(true).open(&a).unwrap();
        file.set_modified(old).unwrap();
        let after = Change::local(&std::fs::metadata(&a).unwrap());
        assert!(after.at_ns > before.at_ns, "{before:?} {after:?}");
        assert_ne!(after.tag, before.tag);
        let again = Change::local(&std::fs::metadata(&a).unwrap());
        assert_eq!(again, after, "a look without a change sees none");
    }

    /// A symbolic link pointed back at an older copy of the same size and times: the
    /// file it leads to changed before the link's first look (hostile review hr11), the
    /// link itself after.
    #[test]
    fn a_link_pointed_at_an_older_file_has_changed() {
        let dir = tempfile::tempdir().unwrap();
        let (v1, v2, link) = (
            dir.path().join("v1"),
            dir.path().join("v2"),
            dir.path().join("l"),
        );
        let old = SystemTime::now() - Duration::from_secs(3600);
        for (path, text) in [(&v1, "one"), (&v2, "two")] {
            std::fs::write(path, text).unwrap();
            let file = std::fs::File::options().write(true).open(path).unwrap();
            file.set_modified(old).unwrap();
        }
        std::os::unix::fs::symlink(&v2, &link).unwrap();
        let before = Change::look_up(&link).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&v1, &link).unwrap();
        let after = Change::look_up(&link).unwrap();
        assert!(after.at_ns > before.at_ns, "{before:?} {after:?}");
        assert_eq!(
            Change::look_up(&link).unwrap(),
            after,
            "no change, none seen"
        );
        let plain = Change::local(&std::fs::metadata(&v1).unwrap());
        assert_eq!(
            Change::look_up(&v1).unwrap(),
            plain,
            "a file: its own change"
        );
    }
}
