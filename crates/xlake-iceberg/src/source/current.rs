//! Which metadata file is the table's current one, and whether the table is xlake's (or
//! XTable's) own mirror rather than an Iceberg table of its own.
//!
//! The current metadata file is the newest `*.metadata.json` in `metadata/` by the number
//! its name starts with: `vN.metadata.json` (Java's `HadoopTables`, xlake) or
//! `NNNNN-<uuid>.metadata.json` (catalogs: pyiceberg's `SqlCatalog`, Java's `JdbcCatalog`,
//! which write no `version-hint.text`). `version-hint.text` is not trusted over the
//! listing: Java's `HadoopTableOperations` also looks past the hint for newer versions,
//! and a stale hint is a known failure (docs/sources.md). A hint naming a version that is
//! missing is refused ([`check_hint`]), as Java refuses it: the table's current metadata
//! is gone, and an older one is not the table.

use iceberg::spec::TableMetadata;
use xlake_source::{ErrorKind, SourceError};
use xlake_storage::{StorageError, TableStore};

use crate::spec::layout::{
    is_metadata_json, metadata_file, parse_hint, METADATA_DIR, VERSION_HINT,
};
use crate::spec::snapshot_index::SNAPSHOT_INDEX;
use crate::spec::summary::XTABLE_METADATA;

/// The order of a metadata file among the table's: the number its name starts with
/// (`v12.metadata.json`, `00012-<uuid>.metadata.json`); `None` for a name of neither form.
pub(crate) fn metadata_number(name: &str) -> Option<u64> {
    let name = name.rsplit('/').next()?;
    let stem = name.strip_suffix(".metadata.json")?;
    let digits = match stem.strip_prefix('v') {
        Some(n) => n,
        None => stem.split('-').next()?,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The table-relative path of the newest metadata file in `metadata/`, if any.
pub(crate) async fn newest_metadata(store: &TableStore) -> Result<Option<String>, SourceError> {
    let entries = store.list_dir(METADATA_DIR).await?;
    let mut numbered: Vec<(u64, &str)> = entries
        .iter()
        .filter(|e| is_metadata_json(&e.path))
        .filter_map(|e| Some((metadata_number(&e.path)?, e.path.as_str())))
        .collect();
    numbered.sort_unstable();
    let newest = numbered.last().copied();
    // Two files of one number (a catalog commit whose outcome was unknown leaves one
    // behind): which is current cannot be told from names, so neither is chosen.
    if let [.., (a, first), (b, second)] = numbered.as_slice() {
        if a == b {
            return Err(SourceError::new(
                ErrorKind::Corrupt {
                    commit: None,
                    file: Some(store.absolute(second)),
                },
                format!(
                    "{} and {}: two metadata files of version {a}; which one is current cannot be told from their names (point a catalog at one, or move the other away)",
                    store.absolute(first),
                    store.absolute(second)
                ),
            ));
        }
    }
    Ok(newest.map(|(_, path)| {
        let name = path.rsplit('/').next().unwrap_or(path);
        format!("{METADATA_DIR}/{name}")
    }))
}

/// Refuse a table whose `version-hint.text` names a `vN.metadata.json` that is missing, as
/// Java's `HadoopTableOperations.refresh` does ("Metadata file for version N is missing")
/// rather than read an older version; `current` is the newest listed file. No hint, or one
/// that names no number (Java then lists the folder, as xlake does), passes.
pub(crate) async fn check_hint(store: &TableStore, current: &str) -> Result<(), SourceError> {
    let bytes = match store.get_small(VERSION_HINT).await {
        Ok(bytes) => bytes,
        Err(StorageError::NotFound { .. }) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let Ok(hint) = parse_hint(&bytes) else {
        return Ok(());
    };
    let named = metadata_file(hint.version);
    if named == current || store.size(&named).await?.is_some() {
        return Ok(());
    }
    let missing = store.absolute(&named);
    Err(SourceError::new(
        ErrorKind::Corrupt {
            commit: None,
            file: Some(missing.clone()),
        },
        format!(
            "{} names version {}, but {missing} is missing (the newest listed is {}): Iceberg's Java reader refuses such a table (\"Metadata file for version {} is missing\") rather than read another version, and so does xlake. Restore {missing}, or, if the newest listed is the current version, write its number into version-hint.text",
            store.absolute(VERSION_HINT),
            hint.version,
            store.absolute(current),
            hint.version
        ),
    ))
}

/// The metadata file at `path`, parsed.
pub(crate) async fn read_metadata(
    store: &TableStore,
    path: &str,
) -> Result<TableMetadata, SourceError> {
    let bytes = store.get(path).await?;
    crate::spec::decode::parse_metadata(&bytes).map_err(|e| {
        let file = store.absolute(path);
        SourceError::new(
            ErrorKind::Corrupt {
                commit: None,
                file: Some(file.clone()),
            },
            format!("{file}: not Iceberg table metadata: {e}"),
        )
    })
}

/// Whether the metadata is a mirror of another format's table, written by xlake or XTable:
/// a snapshot records `XTABLE_METADATA`, or the table carries xlake's snapshot index.
/// Such a folder's source is the other format, never Iceberg.
pub(crate) fn is_mirror(metadata: &TableMetadata) -> bool {
    metadata.properties().contains_key(SNAPSHOT_INDEX)
        || metadata.snapshots().any(|s| {
            s.summary()
                .additional_properties
                .contains_key(XTABLE_METADATA)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_naming_schemes_are_ordered_by_their_number() {
        assert_eq!(metadata_number("metadata/v12.metadata.json"), Some(12));
        assert_eq!(
            metadata_number("00003-6a1c2f0e-0000-4000-8000-000000000000.metadata.json"),
            Some(3)
        );
        assert_eq!(metadata_number("metadata/foo.metadata.json"), None);
        assert_eq!(metadata_number("metadata/v1.gz.metadata.json"), None);
        assert_eq!(metadata_number("metadata/snap-1.avro"), None);
    }
}
