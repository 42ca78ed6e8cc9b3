//! Where the Iceberg side of a table lives, by name: the `metadata/` folder,
//! `version-hint.text`, `vN.metadata.json`, and the files a commit writes beside them
//! (manifests, manifest lists, delete files). Paths are relative to the table's root.
//! Everything else, in this crate and in `xlake-sync`, asks here instead of spelling them.

/// The folder of the Iceberg metadata, beside the source's own.
pub const METADATA_DIR: &str = "metadata";
/// The file naming the current version: `N` with no newline (what pyiceberg and DuckDB
/// read to find the table).
pub const VERSION_HINT: &str = "metadata/version-hint.text";

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
pub fn parse_hint(bytes: &[u8]) -> std::result::Result<Hint, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
