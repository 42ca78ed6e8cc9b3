//! `xlake sync --rebuild`: a table folder copied or moved keeps Iceberg metadata that
//! names the old place (every manifest list, manifest and data file by absolute location).
//! Every command that writes or cleans refuses it (a target error of kind
//! [`Relocated`](xlake_target::ErrorKind::Relocated)); a
//! rebuild mirrors the source's history afresh at the new place and only then sets the
//! old metadata aside.
//!
//! The order keeps a valid table at every step: the new history is written as the
//! versions after the old current one (`v(N+1)…`), each published by put-if-absent as any
//! commit is, while the old files stay where they are; once the current version is this
//! place's own, the old versions and the files they name are moved (never deleted) to
//! `metadata.relocated-<UTC time>/` beside `metadata/`. Interrupted before the first new
//! version, nothing changed; after it, the table is an ordinary mirror and a rerun of
//! `sync --rebuild` finishes setting the old files aside.
//!
//! The moving is the target's ([`xlake_target::TableTarget::set_aside_relocated`]).

use xlake_storage::TableStore;
pub use xlake_target::Rebuilt;

use crate::SyncError;

/// The current version is still the one written for `recorded`: nothing was mirrored
/// here, so the old history stays where it is.
pub(crate) fn not_rebuilt(store: &TableStore, recorded: &str) -> SyncError {
    SyncError::Rebuild {
        table: store.location().to_string(),
        reason: format!(
            "no source commit was mirrored here, so the metadata written for {recorded} was left as it is"
        ),
    }
}

/// `metadata/` is a symbolic link: the metadata it leads to lies in another folder (another
/// table's mirror, which records that table's place and so looks relocated here), and a
/// rebuild would move it aside and write this table's history there (hostile review
/// hr14). Nothing is changed.
pub(crate) fn linked_metadata(store: &TableStore) -> SyncError {
    // Called for a local root only (a link is a local disk's), whose location is its path.
    let link = std::path::Path::new(store.location()).join("metadata");
    let target =
        std::fs::read_link(link).map_or_else(|_| String::new(), |t| format!(" to {}", t.display()));
    SyncError::Rebuild {
        table: store.location().to_string(),
        reason: format!(
            "metadata/ is a symbolic link{target}: the metadata there belongs to that folder (another table's, perhaps), and a rebuild would move it; nothing was changed. Give this table a metadata/ folder of its own to rebuild it"
        ),
    }
}
