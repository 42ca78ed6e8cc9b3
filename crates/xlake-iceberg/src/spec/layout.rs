//! Where the Iceberg side of a table lives, by name: the `metadata/` folder,
//! `version-hint.text`, `vN.metadata.json`, and the files a commit writes beside them
//! (manifests, manifest lists, delete files). Paths are relative to the table's root.
//! Everything else, in this crate and in `xlake-sync`, asks here instead of spelling them.

use crate::spec::error::CodecError;

/// The folder of the Iceberg metadata, beside the source's own.
pub const METADATA_DIR: &str = "metadata";
/// The file naming the current version: `N` with no newline (what pyiceberg and DuckDB
/// read to find the table).
pub const VERSION_HINT: &str = "metadata/version-hint.text";

/// xlake's record of the last sync that left nothing pending, beside the hint (see
/// [`xlake_target::Settled`]): a cache for the scheduled job's no-op shortcut, which no
/// reader of the table looks at. Deleted before every commit point, so that it never
/// outlives the version it was written for; never an orphan (cleanup leaves it).
pub const SETTLED: &str = "metadata/xlake-settled.json";

/// Relative path of `vN.metadata.json`.
pub fn metadata_file(version: u64) -> String {
    format!("{METADATA_DIR}/{}", metadata_file_name(version))
}

/// The name of `vN.metadata.json` in `metadata/`.
pub fn metadata_file_name(version: u64) -> String {
    format!("v{version}.metadata.json")
}

/// N of a path (relative or absolute) naming a `vN.metadata.json`; `None` for any other
/// file, including metadata files other writers name their own way.
pub fn version_of(path: &str) -> Option<u64> {
    let digits = path
        .rsplit('/')
        .next()?
        .strip_prefix('v')?
        .strip_suffix(".metadata.json")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether a path names a table metadata file of any writer (`*.metadata.json`).
pub fn is_metadata_json(path: &str) -> bool {
    path.ends_with(".metadata.json")
}

/// The contents of `version-hint.text` for `version`: the number, no newline.
pub fn hint_text(version: u64) -> String {
    version.to_string()
}

/// What `version-hint.text` holds: the version it names, and whether it names it exactly
/// as [`hint_text`] writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hint {
    /// The version named, read as Java's `HadoopTableOperations` reads it (surrounding
    /// whitespace and leading zeros allowed).
    pub version: u64,
    /// The text is exactly [`hint_text`] of `version`. pyiceberg and DuckDB read the hint
    /// verbatim: for them `"2\n"`, `" 2"` or `"02"` names no metadata file at all.
    pub exact: bool,
}

impl Hint {
    /// Whether every reader, including those that take the text verbatim, finds `version`
    /// through this hint.
    pub fn names_exactly(&self, version: u64) -> bool {
        self.exact && self.version == version
    }
}

/// Read `version-hint.text`: every reader of the hint in xlake goes through here. Text that
/// names no version at all is an error.
pub fn parse_hint(bytes: &[u8]) -> std::result::Result<Hint, CodecError> {
    let text = String::from_utf8_lossy(bytes);
    let version = text
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("expected a version number, found {text:?}"))?;
    Ok(Hint {
        version,
        exact: text == hint_text(version),
    })
}

/// The `n`-th manifest a commit writes (`commit` is the commit's UUID).
pub(crate) fn manifest_file(commit: &uuid::Uuid, n: usize) -> String {
    format!("{METADATA_DIR}/{commit}-m{n}.avro")
}

/// The manifest list of a snapshot, as Java names it.
pub(crate) fn manifest_list_file(snapshot_id: i64, commit: &uuid::Uuid) -> String {
    format!("{METADATA_DIR}/snap-{snapshot_id}-1-{commit}.avro")
}

/// A fresh position-delete file (format version 2).
pub(crate) fn position_delete_file() -> String {
    format!("{METADATA_DIR}/{}-deletes.parquet", uuid::Uuid::new_v4())
}

/// A fresh Puffin file of deletion vectors (format version 3).
pub(crate) fn puffin_file() -> String {
    format!("{METADATA_DIR}/{}-dv.puffin", uuid::Uuid::new_v4())
}

/// Why a source file in `metadata/` is refused (after its path).
pub const METADATA_CLASH: &str = "lies in metadata/, the folder the Iceberg mirror is written to: the source keeps files there (a partition or folder named `metadata`?), which cleanup and readers of the mirror would take for Iceberg metadata. Refusing to mirror this table";

/// Whether a table-relative path lies in `metadata/` (at any depth).
pub fn in_metadata_dir(path: &str) -> bool {
    path.strip_prefix(METADATA_DIR)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// The table property naming the current path index (table-relative).
pub const PATH_INDEX: &str = "xlake.path-index";

/// A fresh path index file's table-relative path (`metadata/<uuid>-paths.bin`).
pub(crate) fn path_index_file() -> String {
    format!("{METADATA_DIR}/{}-paths.bin", uuid::Uuid::new_v4())
}

/// Whether a table-relative path is the staging file of one xlake writes in `metadata/`
/// ([`is_written_by_xlake`]): object_store's local backend writes `<name>#<n>` and renames
/// it into place, so a write killed between the two leaves it behind. Never read, never
/// named by a version: an orphan once older than any write in progress.
pub fn staged_by_xlake(path: &str) -> bool {
    path.rsplit_once('#').is_some_and(|(name, n)| {
        !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && is_written_by_xlake(name)
    })
}

/// Whether a table-relative path names a file xlake writes in `metadata/`, by the exact
/// patterns above: `vN.metadata.json`, `version-hint.text`, `xlake-settled.json`, `<uuid>-m<N>.avro`,
/// `snap-<id>-1-<uuid>.avro`, `<uuid>-deletes.parquet`, `<uuid>-dv.puffin`,
/// `<uuid>-paths.bin` (the path index, [`crate::path_index`]), and the
/// put-if-absent probe `.xlake-probe-<uuid>` (deleted after use). Directly in `metadata/`
/// only: xlake writes no subfolder there. Anything else there (a source's own files, a
/// file another tool put there) is not xlake's to delete.
pub fn is_written_by_xlake(path: &str) -> bool {
    let Some(name) = path
        .strip_prefix(METADATA_DIR)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|name| !name.contains('/'))
    else {
        return false;
    };
    let uuid = |s: &str| s.len() == 36 && uuid::Uuid::try_parse(s).is_ok();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if version_of(name).is_some() || path == VERSION_HINT || path == SETTLED {
        return true;
    }
    if let Some(id) = name.strip_prefix(".xlake-probe-") {
        return uuid(id);
    }
    if let Some(rest) = name
        .strip_prefix("snap-")
        .and_then(|r| r.strip_suffix(".avro"))
    {
        // The snapshot id may be negative in other writers' files; xlake's are positive.
        return rest
            .split_once("-1-")
            .is_some_and(|(id, commit)| digits(id) && uuid(commit));
    }
    if let Some((commit, n)) = name.strip_suffix(".avro").and_then(|r| r.rsplit_once("-m")) {
        return uuid(commit) && digits(n);
    }
    ["-deletes.parquet", "-dv.puffin", "-paths.bin"]
        .iter()
        .any(|suffix| name.strip_suffix(suffix).is_some_and(uuid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_files_are_xlake_s_only_for_names_xlake_writes() {
        let m0 = "metadata/00000000-dead-beef-0000-000000000000-m0.avro";
        assert!(staged_by_xlake(&format!("{m0}#1")));
        assert!(staged_by_xlake("metadata/v3.metadata.json#12"));
        assert!(staged_by_xlake("metadata/version-hint.text#0"));
        for not in [
            m0,
            "metadata/stray.avro#1",
            "metadata/v3.metadata.json#",
            "metadata/v3.metadata.json#1x",
            "data/v3.metadata.json#1",
        ] {
            assert!(!staged_by_xlake(not), "{not}");
        }
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(metadata_file(12), "metadata/v12.metadata.json");
        assert_eq!(version_of(&metadata_file(12)), Some(12));
        assert_eq!(version_of("s3://b/t/metadata/v3.metadata.json"), Some(3));
        assert_eq!(version_of("metadata/v.metadata.json"), None);
        assert_eq!(version_of("metadata/v+1.metadata.json"), None);
        assert_eq!(version_of("metadata/00001-abc.metadata.json"), None);
        assert!(is_metadata_json("metadata/00001-abc.metadata.json"));
        let exact = parse_hint(hint_text(7).as_bytes()).unwrap();
        assert!(exact.names_exactly(7) && !exact.names_exactly(8));
        for loose in [&b" 7\n"[..], b"7\n", b" 7", b"07", b"+7"] {
            let hint = parse_hint(loose).unwrap();
            assert_eq!(hint.version, 7, "{loose:?}");
            assert!(!hint.names_exactly(7), "{loose:?}");
        }
        assert!(parse_hint(b"x").is_err());
        assert!(parse_hint(b"").is_err());
    }

    #[test]
    fn only_the_names_xlake_writes_are_its_own() {
        let commit = uuid::Uuid::new_v4();
        for ours in [
            format!("metadata/{commit}-paths.bin"),
            metadata_file(3),
            VERSION_HINT.to_string(),
            SETTLED.to_string(),
            manifest_file(&commit, 0),
            manifest_file(&commit, 12),
            manifest_list_file(4_611_686_018_427_387_904, &commit),
            position_delete_file(),
            puffin_file(),
            format!("metadata/.xlake-probe-{commit}"),
        ] {
            assert!(is_written_by_xlake(&ours), "{ours}");
        }
        for theirs in [
            // A Hudi partition named `metadata` (non-hive-style paths).
            "metadata/.hoodie_partition_metadata",
            "metadata/8c9b5e5f-0b5a-4c1e-9f1a-2c3d4e5f6a7b-0_0-21-22_20240101010101010.parquet",
            "metadata/.8c9b5e5f-0b5a-4c1e-9f1a-2c3d4e5f6a7b-0_20240101010101010.log.1_0-21-22",
            // Files of a Parquet folder, or anything else put there.
            "metadata/part-0.parquet",
            "metadata/stray.avro",
            // A catalog server's own metadata file (a REST commit), never cleaned up.
            "metadata/00000-9f1a2c3d-4e5f-4a7b-8c9b-5e5f0b5a4c1e.metadata.json",
            &format!("metadata/sub/{commit}-m0.avro"),
            &format!("metadata/{commit}-mx.avro"),
            &format!("metadata/{commit}-m.avro"),
            &format!("metadata/snap--1-1-{commit}.avro"),
            &format!("metadata/x{commit}-deletes.parquet"),
            &format!("other/{commit}-m0.avro"),
            "metadata/.xlake-probe-x",
            "metadata/sub/xlake-settled.json",
        ] {
            assert!(!is_written_by_xlake(theirs), "{theirs}");
        }
    }
}
