//! The one error type of the Delta source.

use xlake_storage::StorageError;

/// Why a Delta table cannot be read. Each variant names, where there is one,
/// the version and the file; the engine prefixes the table ([`xlake_source::SourceError`]).
#[derive(Debug, thiserror::Error)]
pub enum DeltaError {
    /// Commits not yet mirrored are gone from the source.
    #[error(transparent)]
    HistoryLost(#[from] HistoryLost),
    /// Reading storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A log file cannot be understood.
    #[error("version {version} ({file}): {reason}")]
    Log {
        /// Delta version.
        version: u64,
        /// The log file.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// The log is incomplete: versions are missing with no checkpoint covering them.
    #[error("_delta_log: {reason}")]
    Incomplete {
        /// What is missing.
        reason: String,
    },
    /// The table uses something xlake does not mirror.
    #[error("version {version}: {what}")]
    Unsupported {
        /// Delta version.
        version: u64,
        /// What.
        what: String,
    },
    /// deltalake-core failed reading a checkpoint.
    #[error("checkpoint at version {version}: {reason}")]
    Checkpoint {
        /// Checkpoint version.
        version: u64,
        /// The library's message.
        reason: String,
    },
}

/// Commits after the last mirrored one are gone from the source (archived, truncated)
/// before they were mirrored: they can no longer be mirrored one by one.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct HistoryLost {
    /// What is gone.
    pub what: String,
}

/// Result alias of this crate.
pub type Result<T, E = DeltaError> = std::result::Result<T, E>;
