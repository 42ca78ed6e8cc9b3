//! A local folder listed for [`crate::TableStore::list_dir`] and
//! [`crate::TableStore::list_names`] on a table opened by path (issue 16): the files in
//! it as object_store's local backend lists them, read directly.
//!
//! [`entries`] reads each file's size, time and tag ([`stamp`]) with one `fstatat`
//! (object_store makes two full-path `statx` calls). [`names`] reads names only: on Linux with `getdents64`
//! into one buffer (rustix's `RawDir`), the names kept copied into one more ([`Names`]),
//! where `std::fs::read_dir` allocates twice for every entry; a Hudi timeline's folder
//! holds thousands, listed on every sync.

use std::io;
use std::path::Path;

use crate::{Names, Stamp};

/// A listed file's size and [`Stamp`] (zero and untagged when not looked up).
pub(crate) type Stat = (u64, Stamp);

/// The files in `folder` with their size, time in ms and tag (see [`listed`]).
pub(crate) fn entries(folder: &Path) -> io::Result<Vec<(String, Stat)>> {
    listed(folder, true)
}

/// The names of the files in `folder`, in the order the folder gives them: those
/// [`entries`] lists.
#[cfg(target_os = "linux")]
pub(crate) fn names(folder: &Path) -> io::Result<Names> {
    use rustix::fs::{FileType, Mode, OFlags, RawDir};
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let dir = rustix::fs::open(folder, flags, Mode::empty())?;
    let mut buf = Vec::with_capacity(32 * 1024);
    let mut read = RawDir::new(&dir, buf.spare_capacity_mut());
    // The names kept, one after another, UTF-8 each: made text once at the end. Room for
    // about what the folder's own size holds (on ext4 an entry takes a few bytes more
    // than its name; other file systems report less, and the buffer grows as before), so
    // that a long timeline's names are not copied as the buffer grows.
    let size = rustix::fs::fstat(&dir).map_or(0, |st| st.st_size);
    let room = usize::try_from(size).unwrap_or(0).clamp(4096, 1 << 20);
    let (mut text, mut ends) = (Vec::with_capacity(room), Vec::with_capacity(room / 32));
    while let Some(entry) = read.next() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if !listable_bytes(name) {
            continue;
        }
        let is_file = match entry.file_type() {
            FileType::RegularFile => true,
            // A link is followed, and one that leads nowhere (or cannot be followed) left
            // out, as `listed` does; what the folder does not record is looked up.
            FileType::Symlink => leads_to_file(&folder.join(OsStr::from_bytes(name))),
            FileType::Unknown => untyped_is_file(&folder.join(OsStr::from_bytes(name)))?,
            _ => false,
        };
        if is_file {
            text.extend_from_slice(name);
            ends.push(text.len());
        }
    }
    let text = String::from_utf8(text).map_err(io::Error::other)?;
    Ok(Names::from_parts(text, ends))
}

/// See the Linux version.
#[cfg(not(target_os = "linux"))]
pub(crate) fn names(folder: &Path) -> io::Result<Names> {
    let listed = listed(folder, false)?;
    Ok(listed.iter().map(|(name, _)| name.as_str()).collect())
}

/// Whether the entry at `path`, whose type its folder does not record, is a file or a
/// link to one (`lstat`, as std's listing does): not when it is gone.
#[cfg(target_os = "linux")]
fn untyped_is_file(path: &Path) -> io::Result<bool> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Ok(leads_to_file(path)),
        Ok(m) => Ok(m.is_file()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether the link at `path` leads to a file (one that leads nowhere, or cannot be
/// followed, does not).
#[cfg(target_os = "linux")]
fn leads_to_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Whether object_store lists a file named `name` (UTF-8, checked before): a valid path
/// part (`PathPart::parse`: not `.` or `..`, no ASCII control character or `/`; a byte
/// of a multi-byte character is neither), and not a staged upload.
fn listable(name: &str) -> bool {
    listable_bytes(name.as_bytes())
}

/// Whether object_store lists a file named `name`: UTF-8, and [`listable`].
fn listable_bytes(name: &[u8]) -> bool {
    // One pass with no early exit, which the compiler vectorizes: names are short and
    // nearly all listable, and a Hudi timeline has thousands. An ASCII name is UTF-8;
    // only another is checked.
    let (bad, hash) = name.iter().fold((false, false), |(bad, hash), b| {
        (
            bad | b.is_ascii_control() | (*b == b'/'),
            hash | (*b == b'#'),
        )
    });
    let wide = !name.is_ascii();
    if bad || name == b"." || name == b".." {
        return false;
    }
    if !(wide || hash) {
        return true;
    }
    std::str::from_utf8(name).is_ok_and(|name| !(hash && staged_upload(name)))
}

/// The files (not folders) in a local folder as object_store lists them: symbolic links
/// followed, names that are not valid object names (a staged upload's `#n` suffix,
/// non-UTF-8) left out; with `meta`, each one's size, time in ms and tag (a link's
/// target's).
/// A file that is gone by the time it is looked at (a writer's temporary file renamed)
/// is left out, not an error: the folder itself is there.
fn listed(folder: &Path, meta: bool) -> io::Result<Vec<(String, Stat)>> {
    let gone = |e: &io::Error| e.kind() == io::ErrorKind::NotFound;
    let mut found = Vec::new();
    for entry in std::fs::read_dir(folder)? {
        let entry = entry?;
        let kind = match entry.file_type() {
            Ok(kind) => kind,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        };
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !listable(&name) {
            continue;
        }
        let metadata = match (kind.is_symlink(), meta) {
            // A dangling link is not listed.
            (true, _) => match std::fs::metadata(entry.path()) {
                Ok(m) => Some(m),
                Err(_) => continue,
            },
            (false, true) => match entry.metadata() {
                Ok(m) => Some(m),
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(e),
            },
            (false, false) => None,
        };
        let is_file = metadata.as_ref().map_or(kind.is_file(), |m| m.is_file());
        if !is_file {
            continue;
        }
        let stats = match metadata.filter(|_| meta) {
            Some(m) => (m.len(), stamp(&m)),
            None => (0, Stamp::default()),
        };
        found.push((name, stats));
    }
    Ok(found)
}

/// [`walk_into`] a subfolder, which is set apart whole, as a linked folder is, when it
/// cannot be walked (unreadable: `chmod 000`; a path past the system's limit): what it
/// holds is not looked at, and the rest of the walk goes on. xlake writes no subfolder
/// of `metadata/`, so nothing of its own is missed.
fn walk_sub(folder: &Path, prefix: &str, walked: &mut Walked) {
    let mut found = Walked::default();
    match walk_into(folder, prefix, &mut found) {
        Ok(()) => {
            walked.0.append(&mut found.0);
            walked.1.append(&mut found.1);
        }
        Err(e) => {
            let shown = prefix.trim_end_matches('/').to_string();
            tracing::warn!(folder = %folder.display(), error = %e, "a subfolder that cannot be walked is left alone, unread");
            walked.1.push(shown);
        }
    }
}

/// What [`walk`] finds under a folder: the files object_store would list, as (path
/// relative to the folder, (size, time in ms and tag)), and the names it cannot list (not UTF-8,
/// a control character), relative and escaped (`new\nline`, a byte that is not UTF-8 as
/// `\u{fffd}`).
pub(crate) type Walked = (Vec<(String, Stat)>, Vec<String>);

/// Every file below `folder`, as object_store's local listing gives them (links to files
/// followed), and its staged uploads (`<name>#<n>`, which it hides: what a killed write
/// left), with the names it would fail on set apart instead of ending the listing there. A linked folder is not entered (a link may lead out of the
/// table, or round in a loop): it is set apart with the unnamed.
pub(crate) fn walk(folder: &Path) -> io::Result<Walked> {
    let mut walked = Walked::default();
    walk_into(folder, "", &mut walked)?;
    Ok(walked)
}

fn walk_into(folder: &Path, prefix: &str, walked: &mut Walked) -> io::Result<()> {
    let gone = |e: &io::Error| e.kind() == io::ErrorKind::NotFound;
    // A failure below the folder listed names the subfolder or file it failed at.
    let at = |e: io::Error, what: &str| match what.is_empty() {
        true => e,
        false => io::Error::new(e.kind(), format!("{what}: {e}")),
    };
    let shown_prefix = prefix.trim_end_matches('/');
    for entry in std::fs::read_dir(folder).map_err(|e| at(e, shown_prefix))? {
        let entry = entry.map_err(|e| at(e, shown_prefix))?;
        let raw = entry.file_name();
        let shown = format!("{prefix}{}", raw.to_string_lossy().escape_debug());
        let name = match raw.into_string() {
            Ok(name) if listable(&name) || staged_of_listable(&name) => name,
            _ => {
                walked.1.push(shown);
                continue;
            }
        };
        let linked = entry.file_type().is_ok_and(|t| t.is_symlink());
        let meta = match std::fs::metadata(entry.path()) {
            Ok(m) => m,
            // A link that leads nowhere or cannot be followed (a loop): set apart, as a
            // linked folder is, not the end of the listing.
            Err(_) if linked => {
                walked.1.push(shown);
                continue;
            }
            // A writer's temporary file renamed: not listed.
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(at(e, &shown)),
        };
        match (meta.is_dir(), linked) {
            (true, false) => walk_sub(&entry.path(), &format!("{prefix}{name}/"), walked),
            (true, true) => walked.1.push(shown),
            (false, _) if meta.is_file() => walked
                .0
                .push((format!("{prefix}{name}"), (meta.len(), stamp(&meta)))),
            (false, _) => {}
        }
    }
    Ok(())
}

/// A file's modification time and tag ([`e_tag`]).
pub(crate) fn stamp(metadata: &std::fs::Metadata) -> Stamp {
    Stamp {
        modified_ms: modified_ms(metadata),
        e_tag: e_tag(metadata),
    }
}

/// What tells a file from another written at the same path with the same modification
/// time (a table written anew within the same clock tick, a copy with its times kept:
/// `cp -p`, `rsync -t`): its inode, size, and the nanoseconds of its modification and
/// creation times. object_store's local tag has no creation time: a file copied with its
/// times kept onto a freed inode, as a file system hands out again at once, would keep
/// that tag if of the same size. The creation (birth) time, which no one can set, rather
/// than the status change time: that one moves with a `chmod`, a `chown`, a hard link a
/// backup tool makes, and a changed tag costs each sync a read of the table's id until
/// a new version is mirrored (hostile review hr7). Where the file system keeps no
/// creation time, the status change time stands in (marked `c`). `None` off Unix.
#[cfg(unix)]
fn e_tag(metadata: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = metadata;
    let born = m
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    let (mark, secs, nanos) = match born {
        Some(d) => ("b", d.as_secs() as i64, i64::from(d.subsec_nanos())),
        None => ("c", m.ctime(), m.ctime_nsec()),
    };
    Some(format!(
        "{:x}-{:x}-{:x}.{:x}-{mark}{:x}.{:x}",
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        secs,
        nanos
    ))
}

/// See the Unix version: no tag elsewhere (the time alone tells).
#[cfg(not(unix))]
fn e_tag(_: &std::fs::Metadata) -> Option<String> {
    None
}

/// A file's modification time in ms since the epoch, as object_store reports it.
fn modified_ms(metadata: &std::fs::Metadata) -> i64 {
    let Ok(time) = metadata.modified() else {
        return 0;
    };
    match time.duration_since(std::time::UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// Whether `name` is a staged upload of a file object_store lists.
fn staged_of_listable(name: &str) -> bool {
    staged_upload(name)
        && name
            .rsplit_once('#')
            .is_some_and(|(file, _)| listable(file))
}

/// object_store's local backend names a staged upload `<name>#<n>` and does not list it.
pub(crate) fn staged_upload(name: &str) -> bool {
    name.split_once('#')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    /// Names alone are the names `listed` gives: files and links to files, not folders,
    /// links to folders, dangling links, staged uploads or names that are not UTF-8.
    #[test]
    fn names_are_those_listed_with_their_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        for name in [
            "2.commit",
            "1.commit",
            "up#1",
            "a#b",
            ".hidden",
            "é.commit",
            "é#2",
        ] {
            std::fs::write(at(name), b"x").unwrap();
        }
        std::fs::create_dir(at("sub")).unwrap();
        std::os::unix::fs::symlink(at("1.commit"), at("3.link")).unwrap();
        std::os::unix::fs::symlink(at("sub"), at("dirlink")).unwrap();
        std::os::unix::fs::symlink(at("gone"), at("dangling")).unwrap();
        let not_utf8 = std::ffi::OsStr::from_bytes(b"bad\xff.commit");
        std::fs::write(dir.path().join(not_utf8), b"x").unwrap();
        let sorted = |mut names: Vec<String>| {
            names.sort();
            names
        };
        let found = sorted(
            names(dir.path())
                .unwrap()
                .iter()
                .map(String::from)
                .collect(),
        );
        let expected = [
            ".hidden",
            "1.commit",
            "2.commit",
            "3.link",
            "a#b",
            "é.commit",
        ];
        assert_eq!(found, expected);
        let with_sizes = listed(dir.path(), false).unwrap();
        assert_eq!(
            sorted(with_sizes.into_iter().map(|(n, _)| n).collect()),
            found
        );
        let missing = names_of_missing(&at("missing"));
        assert_eq!(missing, io::ErrorKind::NotFound);
        assert!(names(&at("1.commit")).is_err(), "a file is not a folder");
    }

    #[test]
    fn a_name_is_listed_as_object_store_lists_it() {
        let names = [
            "",
            ".",
            "..",
            "...",
            ".hoodie",
            "a.b",
            "a/b",
            "/",
            "a\tb",
            "a\u{7f}",
            "a\u{80}",
            "é",
            "日本語.commit",
            "x\u{1b}y",
            "a b",
            "v1.json#12",
            "v1.json#",
            "a#1#2",
            "#3",
        ];
        for name in names {
            let part = object_store::path::PathPart::parse(name).is_ok();
            assert_eq!(listable(name), part && !staged_upload(name), "{name:?}");
        }
    }

    fn names_of_missing(path: &Path) -> io::ErrorKind {
        match names(path) {
            Err(e) => e.kind(),
            Ok(found) => panic!("listed {found:?}"),
        }
    }
}
