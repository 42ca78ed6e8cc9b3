//! The one error type of the Iceberg target.

use xlake_storage::StorageError;

use crate::spec::error::CodecError;

/// Why a commit (or a read of the Iceberg metadata) failed. Each variant names the table
/// and, where there is one, the source commit and the file, so that an operator can act.
/// Whenever one is returned, the table's current `vN.metadata.json` is unchanged.
#[derive(Debug, thiserror::Error)]
pub enum IcebergError {
    /// Reading or writing storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// iceberg-rust refused something (a spec rule was broken).
    #[error("{table}: {context}: {source}")]
    Spec {
        /// Table location.
        table: String,
        /// What was being done.
        context: String,
        /// The library's error.
        #[source]
        source: Box<iceberg::Error>,
    },
    /// `metadata/` holds Iceberg metadata that xlake did not write.
    #[error("{table}: {file} was not written by xlake or XTable (no XTABLE_METADATA in its current snapshot): it is not an Iceberg mirror, and xlake neither changes nor checks it as one (as a source it mirrors into Delta: `--target delta`)")]
    ForeignMetadata {
        /// Table location.
        table: String,
        /// The metadata file found.
        file: String,
    },
    /// Another Iceberg writer committed in this table's `metadata/` (a metadata file not
    /// named `vN.metadata.json`, as catalogs name theirs): the files it names are named as
    /// xlake names its own, so cleanup cannot tell them from orphans.
    #[error("{table}: {file} is another Iceberg writer's metadata (not a vN.metadata.json xlake writes): that writer committed to this table, and the manifests it names are named as xlake names its own, so cleanup deletes nothing while it is there (drop that writer's table and remove its metadata files first)")]
    ForeignCommit {
        /// Table location.
        table: String,
        /// The other writer's metadata file.
        file: String,
    },
    /// A metadata file exists but cannot be understood.
    #[error("{table}: {file}: {reason}")]
    CorruptMetadata {
        /// Table location.
        table: String,
        /// The file.
        file: String,
        /// What is wrong, with the library's error beneath where there is one.
        #[source]
        reason: CodecError,
    },
    /// The Iceberg format version asked for cannot be written: not one xlake writes, or
    /// older than the table's (versions are never downgraded).
    #[error("{table}: Iceberg format version {asked}: {reason}")]
    FormatVersion {
        /// Table location.
        table: String,
        /// The version asked for.
        asked: u8,
        /// Why it cannot be written.
        reason: String,
    },
    /// Writing a manifest or manifest list failed; the current version is unchanged.
    #[error("{table}: writing {file}: {reason}")]
    WriteFailed {
        /// Table location.
        table: String,
        /// The file being written.
        file: String,
        /// What went wrong, with the library's error beneath where there is one.
        #[source]
        reason: CodecError,
    },
    /// The change set removes a file the current snapshot does not have.
    #[error("{table}: source commit {commit}: removes {path}, which the current Iceberg snapshot does not contain")]
    RemovedFileNotFound {
        /// Table location.
        table: String,
        /// Source commit id.
        commit: String,
        /// The file's location.
        path: String,
    },
    /// The schema (or a schema change) has no Iceberg form.
    #[error("{table}: source commit {commit}: column {column}: {reason}")]
    SchemaNotRepresentable {
        /// Table location.
        table: String,
        /// Source commit id.
        commit: String,
        /// Dotted column path.
        column: String,
        /// Why.
        reason: String,
    },
    /// A data file cannot be referenced as described.
    #[error("{table}: source commit {commit}: data file {path}: {reason}")]
    InvalidDataFile {
        /// Table location.
        table: String,
        /// Source commit id.
        commit: String,
        /// The file's location.
        path: String,
        /// What is wrong, with the library's error beneath where there is one.
        #[source]
        reason: CodecError,
    },
    /// The current metadata was written for another location: the table folder was copied
    /// or moved, and its manifests and data file paths still point at the old place.
    #[error("{table}: {file} was written for the table at {recorded}, not at {table}: the table folder was copied or moved, and its Iceberg metadata still points at the old place. Nothing was changed; run `xlake sync --rebuild {table}` to mirror the table afresh here (the old metadata is set aside, not deleted)")]
    Relocated {
        /// Table location (where the table is now).
        table: String,
        /// The `vN.metadata.json` read.
        file: String,
        /// The location that metadata records.
        recorded: String,
    },
    /// `metadata/` holds a file xlake does not write before the table's first version:
    /// the source keeps files in the folder the mirror is written to.
    #[error("{table}: {file} {}", crate::spec::layout::METADATA_CLASH)]
    MetadataFolderTaken {
        /// Table location.
        table: String,
        /// The first such file found.
        file: String,
    },
    /// A file the new version would carry over from the current one is gone (deleted while
    /// the commit was planned); nothing was published.
    #[error("{table}: {file}, which metadata/v{version}.metadata.json uses and the next version would carry over, is gone (deleted after it was read: a `cleanup --no-writer-running` beside a running writer, or by hand). Nothing was published; the current version names it too: restore the file, or move metadata/ aside and sync again to mirror the table afresh")]
    CarriedFileMissing {
        /// Table location.
        table: String,
        /// The version the commit builds on.
        version: u64,
        /// The missing manifest list or manifest.
        file: String,
    },
    /// A folder, or a link to nothing, stands where a `vN.metadata.json` belongs (on a
    /// local disk): that version can be neither read nor written, and was not.
    #[error("{table}: {file} is {what} where a metadata file belongs (xlake never writes one there): version {version} of the mirror can be neither read nor written. Nothing was changed; remove or rename it")]
    NotAMetadataFile {
        /// Table location.
        table: String,
        /// The version whose file it is.
        version: u64,
        /// The folder or link.
        file: String,
        /// What stands there: "a folder", "a link to nothing".
        what: &'static str,
    },
    /// Another writer committed this version first; nothing was overwritten. Re-plan.
    #[error("{table}: another writer committed metadata/v{version}.metadata.json first; nothing was overwritten, re-plan and retry")]
    CommitConflict {
        /// Table location.
        table: String,
        /// The version that was taken.
        version: u64,
    },
}

/// Result alias of this crate.
pub type Result<T, E = IcebergError> = std::result::Result<T, E>;
