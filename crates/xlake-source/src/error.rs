//! [`SourceError`]: one error for every source format, sorted by kind.

use xlake_storage::StorageError;

/// What kind of failure a source error is; the engine decides by kind, never by format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// Commits not yet mirrored are gone from the source (archived, truncated): the state
    /// at the oldest retained commit can still be mirrored as a whole.
    HistoryLost,
    /// The table, or a commit, uses something xlake does not mirror.
    Unsupported,
    /// A commit or a file of the source cannot be understood.
    Corrupt {
        /// The commit, where one is to blame.
        commit: Option<String>,
        /// The file, where one is to blame.
        file: Option<String>,
    },
    /// Reading storage failed.
    Storage,
    /// The location holds no table of the format asked for.
    NotATable,
}

/// Why a source table cannot be read. The message is the source's own, naming the table
/// and, where there is one, the commit and the file.
#[derive(Debug, thiserror::Error)]
#[error("{inner}")]
pub struct SourceError {
    /// What kind of failure it is.
    pub kind: ErrorKind,
    inner: Box<dyn std::error::Error + Send + Sync>,
}

impl SourceError {
    /// An error of `kind` carrying the source's own error.
    pub fn new(
        kind: ErrorKind,
        inner: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            kind,
            inner: inner.into(),
        }
    }

    /// Whether commits not yet mirrored are gone from the source.
    pub fn is_history_lost(&self) -> bool {
        self.kind == ErrorKind::HistoryLost
    }

    /// The source's own error, e.g. to downcast in tests.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.inner.as_ref()
    }
}

impl From<StorageError> for SourceError {
    fn from(e: StorageError) -> Self {
        Self::new(ErrorKind::Storage, e)
    }
}
