//! # xlake-delta: the Delta source
//!
//! Reads `_delta_log/` and turns every version into one neutral
//! [`ChangeSet`](xlake_model::ChangeSet), streamed one at a time: each commit file is read
//! in full once (after a first pass over its `remove` lines); when early commits
//! are gone, deltalake-core reads the oldest usable checkpoint (classic, multi-part or V2
//! with sidecars) and its state becomes the first change set. It knows nothing of Iceberg.
//!
//! | module | Delta noun |
//! |---|---|
//! | [`log`] | the log folder: commit files, checkpoints, where a replay starts |
//! | [`checkpoint`] | a checkpoint's metaData and protocol, read without its file list |
//! | [`action`] | add, remove, metaData, protocol and commitInfo actions of a commit |
//! | [`schema`] | `schemaString` to the neutral schema, column mapping ids and physical names |
//! | [`values`] | partition values and JSON statistics to typed values |
//! | [`vector_bytes`] | where a deletion vector's bytes are, for a target that copies them |
//! | [`source`] | [`DeltaSource`]: an opened table, its listing, schema states and files |
//! | [`replay`] | [`DeltaReplay`](replay::DeltaReplay): its versions streamed as change sets, removals read first |
//! | `resume` | the state a sync leaves for the next (`metaData`, `protocol`), so an incremental one need not read them again |
//! | `same_table` | whether the log is still the one the mirror was made from (table id, commit file time) |
//! | [`table_source`] | the engine's contract ([`xlake_source::TableSource`]) and the format's [`KIND`] |
//!
//! Deletion vectors are decoded into deleted row positions (Iceberg v2), or left as they
//! are for a target that copies their bytes (v3); never dropped.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod action;
pub mod checkpoint;
pub mod deletion_vector;
pub mod error;
pub mod log;
pub mod replay;
mod resume;
mod same_table;
pub mod schema;
pub mod source;
pub mod table_source;
pub mod target;
pub mod values;
pub mod vector_bytes;

pub use error::{DeltaError, Reason, Result};
pub use source::DeltaSource;
pub use table_source::KIND;

/// The format's name in `XTABLE_METADATA`.
pub const FORMAT: xlake_model::SourceFormat = xlake_model::SourceFormat::new("DELTA");
