//! The contract every catalog backend implements ([`Catalog`]) and the values it speaks
//! in. Backends import this module and `error`; only `uri` knows them all.

use async_trait::async_trait;

use crate::error::{CatalogError, Result};
use crate::ident::TableIdent;

/// Where a catalog entry points, with what the catalog needs to swap it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointer {
    /// The `metadata_location` the entry holds.
    pub location: String,
    /// A catalog-specific version token for optimistic concurrency (Glue's `VersionId`).
    pub token: Option<String>,
    /// The table metadata the catalog returned with the entry (REST), which a catalog that
    /// moves by commit is judged by.
    pub metadata: Option<serde_json::Value>,
}

/// Outcome of a conditional write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swap {
    /// The write happened.
    Done,
    /// Someone else got there first (the entry exists, or no longer points where expected).
    Lost,
}

/// One catalog: the three operations xlake needs.
#[async_trait]
pub trait Catalog: Send + Sync {
    /// The catalog as named in messages: its URI without credentials.
    fn describe(&self) -> String;
    /// Where the entry of `table` points, `None` if there is no such entry.
    async fn load_pointer(&self, table: &TableIdent) -> Result<Option<Pointer>>;
    /// Create the namespace if needed and the entry pointing at `location`, unless an entry
    /// exists already ([`Swap::Lost`]).
    async fn register(&self, table: &TableIdent, location: &str) -> Result<Swap>;
    /// Point the entry at `location` if it still points where `expected` says.
    async fn swap(&self, table: &TableIdent, expected: &Pointer, location: &str) -> Result<Swap>;
    /// Whether the entry moves by commit ([`Catalog::commit`]) rather than by
    /// [`Catalog::swap`]: the server writes its own metadata file, and the entry is judged
    /// by the metadata it returns (see [`commit`]).
    fn moves_by_commit(&self) -> bool {
        false
    }
    /// Commit to the entry what takes it from `expected` (its metadata) to `ours` (xlake's
    /// current table metadata), if it still is where `expected` says; the entry's new
    /// location when done.
    async fn commit(
        &self,
        table: &TableIdent,
        expected: &Pointer,
        ours: &serde_json::Value,
    ) -> Result<Committed> {
        let _ = (expected, ours);
        Err(CatalogError::request(
            &self.describe(),
            table,
            "this catalog kind does not move entries by commit",
        ))
    }
}

/// Outcome of [`Catalog::commit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// Committed: the entry now points at this (server-written) location.
    Done(String),
    /// Someone else got there first: a requirement failed.
    Lost,
}
