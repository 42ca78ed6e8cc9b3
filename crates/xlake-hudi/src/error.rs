//! The one error type of the Hudi source.

use xlake_storage::StorageError;

/// Why a Hudi table cannot be read. Each variant names, where there is one,
/// the instant and the file; the engine prefixes the table ([`xlake_source::SourceError`]).
#[derive(Debug, thiserror::Error)]
pub enum HudiError {
    /// Commits not yet mirrored are gone from the source.
    #[error(transparent)]
    HistoryLost(#[from] HistoryLost),
    /// Reading storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// `.hoodie/hoodie.properties` is missing or unusable.
    #[error(".hoodie/hoodie.properties: {reason}")]
    Properties {
        /// What is wrong.
        #[source]
        reason: Reason,
    },
    /// An instant file cannot be understood.
    #[error("instant {instant} ({file}): {reason}")]
    Instant {
        /// Requested instant time.
        instant: String,
        /// The timeline file.
        file: String,
        /// What is wrong.
        #[source]
        reason: Reason,
    },
    /// The table or an instant uses something xlake does not mirror.
    #[error("{what}")]
    Unsupported {
        /// What, and what to do about it.
        what: String,
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
pub type Result<T, E = HudiError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use std::error::Error;

    #[test]
    fn a_corrupt_instant_reads_as_before_and_keeps_the_parser_error() {
        let e = crate::timeline::decode(b"{").unwrap_err();
        assert!(e.to_string().starts_with("corrupt JSON: "), "{e}");
        assert!(e.source().is_some_and(|s| s.is::<serde_json::Error>()));
    }
}
