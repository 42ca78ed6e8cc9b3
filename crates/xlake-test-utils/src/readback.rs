//! What xlake wrote, read back with iceberg-rust's own parsers: independent of
//! xlake-iceberg, so that a test proves the metadata rather than re-running the writer.

use std::path::Path;

/// The live data files (relative to the table root) of every snapshot, keyed by the source
/// commit it mirrors, read straight from the manifests with iceberg-rust's parsers.
pub fn live_files_by_commit(
    root: &Path,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    use iceberg::spec::{FormatVersion, Manifest, ManifestList, TableMetadata};
    let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
    let metadata: TableMetadata = serde_json::from_slice(
        &std::fs::read(root.join(format!("metadata/v{hint}.metadata.json"))).unwrap(),
    )
    .unwrap();
    let prefix = format!("{}/", std::path::absolute(root).unwrap().to_str().unwrap());
    metadata
        .snapshots()
        .map(|s| {
            let meta: serde_json::Value =
                serde_json::from_str(&s.summary().additional_properties["XTABLE_METADATA"])
                    .unwrap();
            let list = ManifestList::parse_with_version(
                &std::fs::read(s.manifest_list()).unwrap(),
                FormatVersion::V2,
            )
            .unwrap();
            let files = list
                .entries()
                .iter()
                .flat_map(|m| {
                    let manifest =
                        Manifest::parse_avro(&std::fs::read(&m.manifest_path).unwrap()).unwrap();
                    manifest
                        .entries()
                        .iter()
                        .filter(|e| e.is_alive())
                        .map(|e| e.file_path().strip_prefix(&prefix).unwrap().to_string())
                        .collect::<Vec<_>>()
                })
                .collect();
            (
                meta["sourceIdentifier"].as_str().unwrap().to_string(),
                files,
            )
        })
        .collect()
}
