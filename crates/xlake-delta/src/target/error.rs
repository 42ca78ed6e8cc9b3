//! [`TargetFault`]: why the Delta target cannot load or publish, sorted into the engine's
//! kinds by [`From`].

use xlake_storage::StorageError;
use xlake_target::{ErrorKind, TargetError};

use crate::error::Reason;

/// Why the Delta target failed. Each variant names the file or the commit.
#[derive(Debug, thiserror::Error)]
pub enum TargetFault {
    /// Another writer published the version first (put-if-absent lost).
    #[error("{file} was written by another writer first; the sync re-plans from it")]
    Conflict {
        /// The commit file.
        file: String,
    },
    /// The log holds a version xlake did not write.
    #[error("{file} was not written by xlake ({why}): the folder holds another writer's Delta table, and xlake never writes into it")]
    Foreign {
        /// The file.
        file: String,
        /// What shows it.
        why: String,
    },
    /// A commit file is missing from the log xlake wrote (its newest commit is xlake's).
    #[error("{log}: a gap in the log xlake wrote: version {missing} is missing ({why}); readers cannot replay the table past it (restore {missing:020}.json, or mirror afresh into an empty _delta_log/)")]
    Gap {
        /// The log folder.
        log: String,
        /// The newest missing version.
        missing: u64,
        /// What needs it.
        why: String,
    },
    /// The log was written for another location.
    #[error("{file} was written by xlake for {recorded}, not for this location: the folder was copied or moved (mirror it afresh into an empty _delta_log/)")]
    Relocated {
        /// The version's commit file.
        file: String,
        /// The location it records.
        recorded: String,
    },
    /// A log file cannot be read.
    #[error("{file}: {reason}")]
    Unreadable {
        /// The file.
        file: String,
        /// What is wrong, the library's error beneath where there is one.
        #[source]
        reason: Reason,
    },
    /// A change set the Delta target cannot hold.
    #[error("table {table}, source commit {commit}: {what}")]
    Unsupported {
        /// The table.
        table: String,
        /// The source commit.
        commit: String,
        /// What, naming the file or column.
        #[source]
        what: Reason,
    },
    /// A command this target does not do (yet).
    #[error("{0}")]
    Refused(String),
    /// Reading or writing storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl From<TargetFault> for TargetError {
    fn from(e: TargetFault) -> Self {
        let kind = match &e {
            TargetFault::Conflict { .. } => ErrorKind::Conflict,
            TargetFault::Relocated { .. } => ErrorKind::Relocated,
            TargetFault::Foreign { .. } => ErrorKind::Foreign,
            TargetFault::Storage(_) => ErrorKind::Storage,
            _ => ErrorKind::Other,
        };
        TargetError::new(kind, e)
    }
}
