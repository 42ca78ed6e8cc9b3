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

/// What is wrong with a file of the table, in the words the operator reads; the error of
/// the library beneath (Avro, JSON, a date parser), where there is one, stays reachable
/// as its [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Reason {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Reason {
    /// The library error `e`, its message as it reads.
    pub fn library(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self {
            message: e.to_string(),
            source: Some(Box::new(e)),
        }
    }

    /// A mapper to the library error `e` read as `<context>: <e>`.
    pub fn within<E: std::error::Error + Send + Sync + 'static>(
        context: impl std::fmt::Display,
    ) -> impl FnOnce(E) -> Self {
        move |e| Self::library(e).context(context)
    }

    /// The same reason, its message prefixed (`<context>: <message>`); the cause stays.
    pub fn context(mut self, context: impl std::fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl From<String> for Reason {
    fn from(message: String) -> Self {
        Self {
            message,
            source: None,
        }
    }
}

impl From<&str> for Reason {
    fn from(message: &str) -> Self {
        message.to_string().into()
    }
}

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
