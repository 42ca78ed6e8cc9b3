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
        #[source]
        reason: Reason,
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
        #[source]
        what: Reason,
    },
    /// deltalake-core failed reading a checkpoint.
    #[error("checkpoint at version {version}: {reason}")]
    Checkpoint {
        /// Checkpoint version.
        version: u64,
        /// The library's message, its error beneath.
        #[source]
        reason: Reason,
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

pub use xlake_source::Reason;

/// Result alias of this crate.
pub type Result<T, E = DeltaError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    #[test]
    fn a_log_error_reads_as_before_and_keeps_the_parser_error_beneath() {
        let json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let e = DeltaError::Log {
            version: 3,
            file: "/t/_delta_log/00000000000000000003.json".into(),
            reason: crate::action::parse_commit("{").unwrap_err(),
        };
        assert_eq!(
            e.to_string(),
            format!(
                "version 3 (/t/_delta_log/00000000000000000003.json): line 1: corrupt JSON: {json}"
            )
        );
        let beneath = e.source().and_then(Error::source);
        assert!(beneath.is_some_and(|s| s.is::<serde_json::Error>()));
        let own = Reason::from("no metaData action before this version");
        assert!(own.source().is_none());
    }
}
