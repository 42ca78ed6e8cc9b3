//! [`SyncError`]: the engine's one error, by what failed; each keeps its cause.

use xlake_catalog::CatalogError;
use xlake_source::SourceError;
use xlake_storage::{StorageError, TableStore};
use xlake_target::TargetError;

/// Errors of a sync; the target's metadata is left at its last good version.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Storage access failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The source failed; the table is attached where the error enters the engine
    /// ([`InTable::in_table`]).
    #[error(transparent)]
    Source(SourceError),
    /// The target failed (its kind says how: a lost race, a relocated table, storage).
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The catalog failed or refused the entry.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The location holds no table of a format xlake reads.
    #[error("{table}: not a {formats} table (looked for {markers})")]
    NotATable {
        /// Table location.
        table: String,
        /// The formats tried (`Hudi or Delta`).
        formats: String,
        /// What marks a table of each (`.hoodie/hoodie.properties, _delta_log/`).
        markers: String,
    },
    /// The format asked for (or detected) is not the table's: its markers or its mirror
    /// say another. Refused before anything is written.
    #[error("{table}: read as {asked}, but {found}; refusing to mirror it (nothing written)")]
    FormatMismatch {
        /// Table location.
        table: String,
        /// The format the source would be read as (`PARQUET`).
        asked: String,
        /// What says otherwise, naming that format.
        found: String,
    },
    /// The format asked for is not one xlake reads.
    #[error("unknown table format {format:?} (known: {known})")]
    UnknownFormat {
        /// The format asked for.
        format: String,
        /// The formats xlake reads.
        known: String,
    },
    /// The target format asked for is not one xlake writes.
    #[error("unknown target {target:?} (known: {known})")]
    UnknownTarget {
        /// The target asked for.
        target: String,
        /// The targets xlake writes.
        known: String,
    },
    /// The source and the target are the same format.
    #[error("{table}: the source is {format} and the target is {format} too: xlake mirrors a table into another format, never into its own (nothing written)")]
    SameFormat {
        /// Table location.
        table: String,
        /// The format.
        format: String,
    },
    /// A command the chosen target does not support.
    #[error("{table}: {what}")]
    NotForTarget {
        /// Table location.
        table: String,
        /// What, and why.
        what: String,
    },
    /// The location holds no table at all: no source and no mirror.
    #[error("{table}: not a table: no {formats} table ({markers}) and no mirror found")]
    NoTable {
        /// Table location.
        table: String,
        /// The formats looked for (`Hudi or Delta`).
        formats: String,
        /// What marks a table of each.
        markers: String,
    },
    /// `--rebuild` could not write a history at the table's new location.
    #[error("{table}: rebuild: {reason}")]
    Rebuild {
        /// Table location.
        table: String,
        /// Why.
        reason: String,
    },
    /// In-commit mode: the named commit is not (or cannot be) mirrored.
    #[error("{table}: source commit {commit} is not mirrored: {reason}")]
    NotMirrored {
        /// Table location.
        table: String,
        /// The commit asked for.
        commit: String,
        /// Why.
        reason: String,
    },
    /// Commits the mirror still owed are gone from the source, maybe completed
    /// unmirrored ([`xlake_model::CommitListing::gone_unmirrored`]): nothing written.
    #[error("{table}: {}; refusing to sync past it (no snapshot written): `xlake check --deep` shows whether rows are missing, docs/hudi.md (\"Archived before mirrored\") how to mirror the table afresh", .gone.join("; "))]
    GoneUnmirrored {
        /// Table location.
        table: String,
        /// Each such commit, with why it may have completed unmirrored.
        gone: Vec<String>,
    },
    /// The service cannot start or run as configured.
    #[error("serve: {0}")]
    Service(String),
}

impl SyncError {
    /// Whether the command was refused before it could start, for what it was asked
    /// (a format or target that does not apply to the table, a target place another
    /// writer holds): the CLI's exit 2.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::FormatMismatch { .. }
                | Self::UnknownFormat { .. }
                | Self::UnknownTarget { .. }
                | Self::SameFormat { .. }
                | Self::NotForTarget { .. }
                | Self::NotATable { .. }
                | Self::NoTable { .. }
        ) || matches!(self, Self::Target(e) if e.kind == xlake_target::ErrorKind::Foreign)
    }
}

/// A source's result entering the engine: its error gets the table, once, here. No
/// `From<SourceError>` exists, so no source error reaches the engine without its table.
pub(crate) trait InTable<T> {
    /// The result, its error of the table at `store`.
    fn in_table(self, store: &TableStore) -> Result<T, SyncError>;
}

impl<T> InTable<T> for Result<T, SourceError> {
    fn in_table(self, store: &TableStore) -> Result<T, SyncError> {
        self.map_err(|e| SyncError::Source(e.in_table(store.location())))
    }
}

/// What kind of configuration [`ConfigError`] refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigKind {
    /// A duration or interval (`30s`, `7d`).
    Duration,
    /// A job file (`tables.toml`) or one of its entries.
    Job,
    /// The service's access settings: the callback key, allowed locations.
    Access,
    /// A catalog named by options or a job entry.
    Catalog,
}

/// A configuration the engine refuses, by kind; the message is written for the operator
/// (the CLI prints it as it is), and the cause, where there is one, is kept as its
/// [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    /// What is refused.
    pub kind: ConfigKind,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ConfigError {
    /// A refusal of `kind` with `message`.
    pub fn new(kind: ConfigKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// A refusal of `kind` caused by `cause`, its message `message`.
    pub fn caused(
        kind: ConfigKind,
        message: impl Into<String>,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            kind,
            message: message.into(),
            source: Some(cause.into()),
        }
    }

    /// The same refusal, its message prefixed (`<table>: `).
    pub fn context(mut self, prefix: impl std::fmt::Display) -> Self {
        self.message = format!("{prefix}: {}", self.message);
        self
    }

    pub(crate) fn access(message: String) -> Self {
        Self::new(ConfigKind::Access, message)
    }

    pub(crate) fn job(message: String) -> Self {
        Self::new(ConfigKind::Job, message)
    }
}
