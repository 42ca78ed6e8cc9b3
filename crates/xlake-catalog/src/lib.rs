//! # xlake-catalog: the catalog pointer
//!
//! Engines that find Iceberg tables by name (Trino, Spark with a catalog, pyiceberg, Athena)
//! read a catalog entry that points at a `vN.metadata.json`. xlake keeps its state in the
//! table's own `metadata/` folder; a catalog entry is only a pointer to xlake's current
//! version, registered on the first sync and moved forward by compare-and-swap after each
//! publish (after `version-hint.text`).
//!
//! | item | what it does |
//! |---|---|
//! | [`Catalog`] | one catalog kind: `load_pointer`, `register`, `swap(expected, new)` |
//! | [`CatalogTarget`] | what the operator asked for: URI, catalog name, `namespace.table` |
//! | [`uri`] | parses a catalog URI and opens the matching [`Catalog`] |
//! | [`TableIdent`] | a table name in a namespace |
//! | [`commit`] | the rules where the entry moves by commit (REST): judged by snapshots, moved by requirements and updates |
//! | [`pointer`] | the rules: refuse foreign entries, register, move only forward (past versions the table's [`History`] holds) |
//! | [`sql`] | the JDBC-catalog layout (Iceberg Java `JdbcCatalog`, pyiceberg `SqlCatalog`) over SQLite and, with `postgres`, PostgreSQL |
//! | `rest` | an Iceberg REST catalog (feature `rest`) |
//! | `glue` | the AWS Glue Data Catalog (feature `glue`) |
//! | `hms` | the Hive Metastore over Thrift (feature `hms`) |
//! | [`CatalogError`] | errors, each naming the catalog and the table |
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod commit;
#[cfg(feature = "glue")]
pub mod glue;
#[cfg(feature = "hms")]
pub mod hms;
pub mod pointer;
#[cfg(feature = "rest")]
pub mod rest;
pub mod sql;
pub mod uri;

pub use pointer::{advance, precheck, Advanced, History, TableRoot};
pub use uri::{open, CatalogTarget};

use async_trait::async_trait;

/// Errors of a catalog; each names the catalog (its URI without credentials) and the table.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The URI or the table name cannot be used.
    #[error("catalog {catalog}: {reason}")]
    Config {
        /// The catalog URI as given (credentials removed).
        catalog: String,
        /// Why.
        reason: String,
    },
    /// The catalog could not be reached or refused a request.
    #[error("catalog {catalog}, table {table}: {reason}")]
    Request {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// What failed.
        reason: String,
    },
    /// The entry under this name points at another table's metadata.
    #[error("catalog {catalog}, table {table}: the entry points at {found}, which is not this table's metadata folder {expected}; refusing to move it (drop or rename the entry, or choose another --catalog-table)")]
    Foreign {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// Where the entry points.
        found: String,
        /// This table's `metadata/` folder.
        expected: String,
    },
    /// The entry under this name points at a metadata file in this table's own `metadata/`
    /// folder that xlake did not write (another writer committed to the table).
    #[error("catalog {catalog}, table {table}: the entry points at {found}, a metadata file in this table's metadata folder {folder} that xlake did not write (another writer committed to the table); refusing to move it (stop the other writer and drop the entry, or choose another --catalog-table)")]
    OtherWriter {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// Where the entry points.
        found: String,
        /// This table's `metadata/` folder.
        folder: String,
    },
    /// The table's own metadata, read to judge where the entry points, could not be read.
    #[error(
        "catalog {catalog}, table {table}: reading the file the entry names ({location}): {source}"
    )]
    Table {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// Where the entry points.
        location: String,
        /// Why the table's storage failed.
        source: pointer::TableError,
    },
    /// The entry is this table's, but another writer committed to it (or it is another
    /// table at this location): moving it would undo that writer's work.
    #[error("catalog {catalog}, table {table}: the entry points at {found}, {reason}; this table's metadata is {expected}; refusing to move it (xlake never overwrites another writer's commit: undo that commit, or drop the entry so that the next sync registers it)")]
    Diverged {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// Where the entry points.
        found: String,
        /// This table's current `vN.metadata.json` (its `metadata/` folder before the first).
        expected: String,
        /// What the entry holds that xlake did not write.
        reason: String,
    },
    /// Other writers kept moving the pointer while this one tried to.
    #[error("catalog {catalog}, table {table}: the pointer kept changing under us ({attempts} attempts); the next sync moves it")]
    Contended {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// Attempts made.
        attempts: usize,
    },
}

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, CatalogError>;

/// A table name inside a (possibly nested) namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableIdent {
    /// Namespace levels, outermost first.
    pub namespace: Vec<String>,
    /// The table's name.
    pub name: String,
}

/// A `--catalog-table` that is not `namespace.table`.
#[derive(Debug, thiserror::Error)]
#[error("--catalog-table {text:?}: expected <namespace>.<name>, e.g. analytics.trips")]
pub struct TableIdentError {
    /// The name as given.
    pub text: String,
}

impl TableIdent {
    /// Parse `namespace.table` (the last dot separates the name; nested namespaces use
    /// more dots, as in `a.b.table`).
    pub fn parse(text: &str) -> std::result::Result<Self, TableIdentError> {
        let parts: Vec<&str> = text.split('.').collect();
        if parts.len() < 2 || parts.iter().any(|p| p.trim().is_empty()) {
            return Err(TableIdentError {
                text: text.to_string(),
            });
        }
        let (name, namespace) = parts.split_last().unwrap_or((&"", &[]));
        Ok(Self {
            namespace: namespace.iter().map(|s| s.to_string()).collect(),
            name: name.to_string(),
        })
    }

    /// The namespace joined with dots (how the JDBC layout stores it).
    pub fn namespace_text(&self) -> String {
        self.namespace.join(".")
    }
}

impl std::fmt::Display for TableIdent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.namespace_text(), self.name)
    }
}

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
        Err(CatalogError::Request {
            catalog: self.describe(),
            table: table.to_string(),
            reason: "this catalog kind does not move entries by commit".into(),
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_need_a_namespace() {
        let t = TableIdent::parse("a.b.trips").unwrap();
        assert_eq!(t.namespace, ["a", "b"]);
        assert_eq!(t.name, "trips");
        assert_eq!(t.to_string(), "a.b.trips");
        assert!(TableIdent::parse("trips").is_err());
        assert!(TableIdent::parse("a..trips").is_err());
        assert!(TableIdent::parse(".trips").is_err());
    }
}
