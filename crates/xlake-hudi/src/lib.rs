//! # xlake-hudi: the Hudi source
//!
//! Reads a Hudi table's timeline (table versions 6, 8 and 9) and turns every completed
//! commit, delta commit, replace commit and rollback into one neutral
//! [`ChangeSet`](xlake_model::ChangeSet), streamed one at a time. It knows nothing of
//! Iceberg.
//!
//! | module | Hudi noun |
//! |---|---|
//! | [`properties`] | `hoodie.properties`: version, table type, key generator, partition fields |
//! | [`instant`] | an instant: requested time, completion time, action, state |
//! | [`timeline`] | listing instants (both layouts) and decoding their JSON or Avro files |
//! | [`commit_metadata`] | write stats, replaced file groups, rollback metadata |
//! | [`file_group`] | live base file per file group; each instant's effect (for rollbacks) |
//! | [`partition_path`] | partition paths to typed partition values |
//! | [`schema`] | Avro schemas to the neutral schema, `_hoodie_*` columns included |
//! | [`source`] | [`HudiSource`]: open a table, its listing and declared schema |
//! | [`replay`] | [`HudiReplay`](replay::HudiReplay): its timeline streamed as change sets (memory bounded by its live file groups) |
//! | [`resume`] | the instant time the next sync lists the timeline from, saved with each change set |
//! | `gone` | instants the saved state names pending that the timeline no longer holds (archived unmirrored, or rolled back) |
//! | `partial` | a timeline listed from that instant time, and when it gives way to the whole one |
//! | `incremental` | where a replay starts after the newest mirrored instant, from the mirror's live files, or without them when the new instants start file groups or build on groups whose base file the instant they build on names |
//! | `start` | where an incremental replay starts (the first instant, the live base files, the schema) |
//! | [`table_source`] | the engine's contract ([`xlake_source::TableSource`]) and the format's [`KIND`] |
//!
//! Only completed instants count; requested and inflight ones are pending. The metadata
//! table (`.hoodie/metadata/`) is never read: files come from the commit metadata.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod clock;
pub mod commit_metadata;
pub mod error;
pub mod file_group;
mod gone;
mod incremental;
pub mod instant;
mod partial;
pub mod partition_path;
pub mod properties;
pub mod replay;
pub mod resume;
pub mod schema;
pub mod source;
mod start;
pub mod table_source;
pub mod timeline;

pub use error::{HudiError, Reason, Result};
pub use source::{HudiOptions, HudiSource, READ_OPTIMIZED, VIEW_NOTE};
pub use table_source::KIND;

/// The format's name in `XTABLE_METADATA`.
pub const FORMAT: xlake_model::SourceFormat = xlake_model::SourceFormat::new("HUDI");
