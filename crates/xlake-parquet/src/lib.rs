//! # xlake-parquet: a plain folder of Parquet files as a source
//!
//! The in-place migration of a Hive-style Parquet table (what Iceberg's `add_files` and
//! `migrate` procedures and XTable's Parquet source do): the folder keeps no history, so
//! each sync is one change set holding every live file (the target takes the difference
//! from what it mirrors), with a monotonic *listing generation* as its commit id and a
//! fingerprint of the listing and when its files last changed in its notes, by which the
//! next sync knows whether anything changed, and which files were rewritten in place. It
//! is only ever chosen explicitly (`--format parquet`): any folder may hold Parquet files.
//! It knows nothing of Iceberg.
//!
//! | module | what it does |
//! |---|---|
//! | [`error`] | [`error::ParquetError`]: why a file cannot be mirrored, its cause kept |
//! | [`listing`] | which files are data (not `_`/`.`-prefixed, not being written, not `metadata/`), the fingerprint |
//! | [`partition`] | Hive-style `key=value` path segments to typed partition values |
//! | [`rewrites`] | which files changed since the mirrored listing, by when each last changed |
//! | [`schema`] | a Parquet footer's schema to the neutral schema; files checked against it |
//! | [`source`] | [`ParquetSource`]: the contract ([`xlake_source::TableSource`]) and [`KIND`] |
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod error;
pub mod listing;
pub mod partition;
pub mod rewrites;
pub mod schema;
pub mod source;

pub use source::{ParquetSource, FORMAT, KIND};
