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
//! | [`contract`] | the [`Catalog`] trait every backend implements, and its values ([`Pointer`], [`Swap`]) |
//! | [`target`] | [`CatalogTarget`], and how messages name a catalog (`redact`) |
//! | [`uri`] | parses a catalog URI and opens the matching [`Catalog`]: the one module that knows every backend |
//! | [`ident`] | [`TableIdent`]: a table name in a namespace |
//! | [`commit`] | the rules where the entry moves by commit (REST): judged by snapshots, moved by requirements and updates |
//! | [`pointer`] | the rules: refuse foreign entries, register, move only forward (past versions the table's [`History`] holds) |
//! | [`sql`] | the JDBC-catalog layout (Iceberg Java `JdbcCatalog`, pyiceberg `SqlCatalog`) over SQLite and, with `postgres`, PostgreSQL |
//! | `rest` | an Iceberg REST catalog (feature `rest`) |
//! | `glue` | the AWS Glue Data Catalog (feature `glue`) |
//! | `hms` | the Hive Metastore over Thrift (feature `hms`) |
//! | [`error`] | [`CatalogError`]: errors, each naming the catalog and the table |
//!
//! Dependencies point one way: backends (`sql`, `rest`, `glue`, `hms`) import `contract`,
//! `error`, `ident`, `target` (and the HTTP helpers), never `uri`; `uri` imports the backends.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod commit;
pub mod contract;
pub mod error;
#[cfg(feature = "glue")]
pub mod glue;
#[cfg(feature = "hms")]
pub mod hms;
mod http;
pub mod ident;
pub mod pointer;
#[cfg(feature = "rest")]
pub mod rest;
pub mod sql;
pub mod target;
pub mod uri;

pub use contract::{Catalog, Committed, Pointer, Swap};
pub use error::{CatalogError, Result};
pub use ident::{TableIdent, TableIdentError};
pub use pointer::{advance, precheck, Advanced, History, TableRoot};
pub use target::CatalogTarget;
pub use uri::open;
