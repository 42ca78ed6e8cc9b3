//! [`TargetError`]: one error for every target format, sorted by kind.

use xlake_storage::StorageError;

/// What kind of failure a target error is; the engine decides by kind, never by format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Another writer published the version this one meant to (put-if-absent lost): the
    /// engine re-plans from the target's state.
    Conflict,
    /// The target's metadata was written for another location (the table was copied or
    /// moved); a rebuild mirrors it afresh.
    Relocated,
    /// Reading or writing storage failed.
    Storage,
    /// The target's place holds metadata another writer wrote (a Delta log, Iceberg
    /// metadata xlake did not write): xlake refuses to write into, expire or clean it.
    Foreign,
    /// Anything else: a change set the target cannot represent, corrupt metadata, a
    /// refused option. The message names table, commit and file.
    Other,
}

/// Why a target could not do what the engine asked. The message is the target's own (it
/// names the table, the commit and the file); its cause stays reachable through
/// [`std::error::Error::source`] and [`TargetError::inner`].
#[derive(Debug)]
pub struct TargetError {
    /// What kind of failure it is.
    pub kind: ErrorKind,
    inner: Box<dyn std::error::Error + Send + Sync>,
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl std::error::Error for TargetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source()
    }
}

impl TargetError {
    /// An error of `kind` carrying the target's own error.
    pub fn new(
        kind: ErrorKind,
        inner: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            kind,
            inner: inner.into(),
        }
    }

    /// Whether another writer won the commit point.
    pub fn is_conflict(&self) -> bool {
        self.kind == ErrorKind::Conflict
    }

    /// The target's own error, e.g. to downcast in tests.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.inner.as_ref()
    }
}

impl From<StorageError> for TargetError {
    fn from(e: StorageError) -> Self {
        Self::new(ErrorKind::Storage, e)
    }
}
