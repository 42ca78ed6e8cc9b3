//! # xlake-model: the neutral change set
//!
//! Everything xlake moves between formats passes through the types of this crate, and
//! none of them names Hudi, Delta or Iceberg concepts. A source reads its log and emits
//! one [`ChangeSet`] per completed commit; the target turns each into one snapshot.
//!
//! | module | noun |
//! |---|---|
//! | [`schema`] | [`Schema`], [`Field`], [`DataType`], [`PrimitiveType`]: columns, nesting, nullability |
//! | [`partition`] | [`PartitionSpec`], [`PartitionField`], [`Transform`]: how files are grouped |
//! | [`value`] | [`Value`]: one typed scalar (partition values, column bounds) |
//! | [`file`] | [`DataFile`] (with its deletion vector, and deleted row positions), [`ColumnStats`]: what a commit adds or removes |
//! | [`removed_later`] | [`RemovedLater`]: which added files later commits remove, from a first pass over removals |
//! | [`keys`] | [`PathKeySet`]: the path keys of a table's live files, compact enough for millions |
//! | [`deletion`] | [`DeletionVector`]: a deleted-rows bitmap where the source stores it |
//! | [`commit`] | [`SourceCommit`], [`ChangeSet`]: source commits and their effect; [`DeclaredTable`]: a table before its first commit |
//!
//! The model holds data only; it does no I/O.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod commit;
pub mod deletion;
pub mod file;
pub mod keys;
pub mod partition;
pub mod removed_later;
pub mod schema;
pub mod value;

pub use commit::{
    ChangeSet, CommitListing, DeclaredTable, ListedCommit, SourceCommit, SourceFormat,
};
pub use deletion::{DeletionVector, VectorBytes};
pub use file::{path_key, short_path_key, ColumnStats, DataFile, FileFormat};
pub use keys::PathKeySet;
pub use partition::{PartitionField, PartitionSpec, Transform};
pub use removed_later::RemovedLater;
pub use schema::{DataType, Field, PrimitiveType, Schema, TimeUnit};
pub use value::Value;
