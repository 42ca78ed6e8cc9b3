//! The one error type of the Hudi source.

use xlake_storage::StorageError;

/// Why a Hudi table cannot be read. Each variant names the table and, where there is one,
/// the instant and the file.
#[derive(Debug, thiserror::Error)]
pub enum HudiError {
    /// Reading storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// `.hoodie/hoodie.properties` is missing or unusable.
    #[error("{table}: .hoodie/hoodie.properties: {reason}")]
    Properties {
        /// Table location.
        table: String,
        /// What is wrong.
        reason: String,
    },
    /// An instant file cannot be understood.
    #[error("{table}: instant {instant} ({file}): {reason}")]
    Instant {
        /// Table location.
        table: String,
        /// Requested instant time.
        instant: String,
        /// The timeline file.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// The table or an instant uses something xlake does not mirror.
    #[error("{table}: {what}")]
    Unsupported {
        /// Table location.
        table: String,
        /// What, and what to do about it.
        what: String,
    },
}

/// Result alias of this crate.
pub type Result<T, E = HudiError> = std::result::Result<T, E>;
