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

/// Why a source table cannot be read. The message is the source's own, naming the commit
/// and the file where there are ones; the engine attaches the table once
/// ([`SourceError::in_table`]), shown before it as `<table>: <message>`. A storage error
/// names its own object (the full path), so no table is shown before it.
#[derive(Debug)]
pub struct SourceError {
    /// What kind of failure it is.
    pub kind: ErrorKind,
    table: Option<String>,
    inner: Box<dyn std::error::Error + Send + Sync>,
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.table {
            Some(table) if self.kind != ErrorKind::Storage => write!(f, "{table}: {}", self.inner),
            _ => write!(f, "{}", self.inner),
        }
    }
}

impl std::error::Error for SourceError {}

impl SourceError {
    /// An error of `kind` carrying the source's own error.
    pub fn new(
        kind: ErrorKind,
        inner: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            kind,
            table: None,
            inner: inner.into(),
        }
    }

    /// The error of the table at `table` (its location); a table already set stays.
    pub fn in_table(mut self, table: &str) -> Self {
        self.table.get_or_insert_with(|| table.to_string());
        self
    }

    /// The table the error is of, once the engine attached it.
    pub fn table(&self) -> Option<&str> {
        self.table.as_deref()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_shown_once_before_the_message_but_a_storage_error_names_its_object() {
        let corrupt = ErrorKind::Corrupt {
            commit: Some("3".into()),
            file: None,
        };
        let e = SourceError::new(corrupt, "version 3: bad").in_table("s3://b/t");
        assert_eq!(e.to_string(), "s3://b/t: version 3: bad");
        let e = e.in_table("s3://b/other");
        assert_eq!(e.to_string(), "s3://b/t: version 3: bad");
        assert_eq!(e.table(), Some("s3://b/t"));
        let storage =
            SourceError::new(ErrorKind::Storage, "s3://b/t/x: denied").in_table("s3://b/t");
        assert_eq!(storage.to_string(), "s3://b/t/x: denied");
        let bare = SourceError::new(ErrorKind::Unsupported, "deletion vectors");
        assert_eq!(bare.to_string(), "deletion vectors");
    }
}
