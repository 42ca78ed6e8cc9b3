//! # xlake-iceberg: the Iceberg target
//!
//! Turns neutral [`ChangeSet`](xlake_model::ChangeSet)s into Iceberg metadata in the table's
//! own `metadata/` folder, one snapshot per change set, referencing the source's data files
//! in place. It knows nothing of Hudi or Delta.
//!
//! Two layers, the way iceberg-rust keeps its file formats in `spec/` beneath the
//! operations in `transaction/`. No module of `spec` imports one of `ops`, and no module
//! imports another that imports it back (`cargo modules dependencies --acyclic`).
//!
//! **`spec/`: codecs**, one file per noun of the specification:
//!
//! | module | what it reads or writes |
//! |---|---|
//! | [`layout`] | the names: `metadata/`, `version-hint.text`, `vN.metadata.json`, manifests, lists, delete files |
//! | `spec::decode` | a `vN.metadata.json` read back whole ([`table::parse_metadata`]) |
//! | [`history`] | a commit's load: the working snapshots parsed, the others' JSON carried as it is, their entries read from the snapshot index (else from their heads) |
//! | `spec::compact` | the parts of `vN.metadata.json` that grow with history (snapshot log, table properties, integers) read by hand in the compact shape Iceberg writes, serde_json as the fallback |
//! | [`snapshot_index`] | table property `xlake.snapshot-index`: each snapshot's id, order, length and source commit, for the file it names and matches |
//! | [`encode`] | the bytes of `vN.metadata.json`: snapshots in commit order, as Java writes them; carried snapshots written back as read |
//! | `spec::body` | a document written in parts: serialized buffers, and large runs of carried text as views of the bytes read |
//! | `spec::manifest` | manifests written and read back whole, or of a data manifest only its live paths (`held`) |
//! | `spec::manifest::{read, write, record}` | a manifest's entries read and encoded straight (serde_avro_fast) under iceberg-rust's own schema (`manifest_schema_v2.json`), iceberg-rust's parse and writer as the fallbacks |
//! | `spec::container` | an uncompressed Avro container's records, its schema parsed once per process |
//! | `spec::manifest_list` | manifest lists read (`ListFile`) and written (row ids, sequence numbers assigned), with `read`, `write` (`list_schema_v*.json`), `carry` (a parent's records carried as Avro blocks), `shape` and `merging` (the small-manifest rule a carry asks first) |
//! | `spec::written` | files iceberg-rust's writers left in memory, copied into the store |
//! | [`relocation`] | a copied or moved table: its old metadata files, set aside for a rebuild |
//! | [`path_index`] | `metadata/<uuid>-paths.bin`: which manifest holds which file, a chain of small segments, so that a removal reads only the manifests holding what it removes and writes only what it changed |
//! | [`schema`] | neutral schema to Iceberg schema with stable field ids; the name mapping, with reserved ids for file columns readers must skip |
//! | [`partition`] | partition specs and partition tuples |
//! | [`value`] | neutral values to Iceberg datums (bounds, partition values); bound truncation |
//! | [`deletes`] | the bytes of position-delete files for rows a source deleted (Delta deletion vectors) |
//! | `puffin` | v3 deletion vectors: `deletion-vector-v1` blobs copied from the source, Puffin files |
//! | [`footer`] | record counts and column stats from Parquet footers, when the source has none |
//! | [`summary`] | snapshot summary counters, `XTABLE_METADATA` ([`SyncMetadata`]) and `xlake.degraded` |
//! | [`fidelity`] | Parquet layouts some readers misread (two-level lists, millisecond timestamps, nested fields without ids); `xlake.degraded` |
//!
//! **`ops/`: operations** on an [`IcebergTable`], each returning a named result:
//!
//! | module | what it does |
//! |---|---|
//! | [`table`] | [`IcebergTable`] and [`LoadedTable`]: load the current `vN.metadata.json` (whole, or for a commit), its live files |
//! | `ops::commit` | commit change sets: plan each on a draft, publish once ([`Batch`], [`Committed`]) |
//! | `ops::plan` | the planner, one module per concern, run in order by `IcebergTable::stage` (a `Staged` each): `schema`, `files`, `deletes` (`rehome`), `manifests`, `summary` |
//! | `ops::publish` | the publisher: the commit point (put-if-absent of `vN.metadata.json`), `version-hint.text`, abandoning a failed commit's journal, [`NextBase`]; an empty table created |
//! | `merge` | merging small manifests, so manifest lists stay short as commits accumulate |
//! | `ops::live_paths` | per process, the paths each manifest's live entries are about |
//! | [`v3`] | which format version a commit writes, upgrades in place (the one upgrade path), a snapshot's vectors |
//! | [`expire`] | snapshot expiry in step with the source's cleaner or vacuum, plus count and age limits |
//! | [`relocation`] | a copied or moved table: its old metadata files, set aside for a rebuild |
//! | [`orphans`] | metadata files no retained version references (for cleanup) |
//! | [`target`] | [`IcebergTarget`]: this crate as the engine's `xlake_target::TableTarget` |
//!
//! **`source/`: this crate as a source** ([`IcebergSource`], [`source::KIND`]): a table
//! Iceberg writers wrote, each snapshot of its main branch one change set, read with the
//! codecs of `spec/` (none of its own).
//!
//! [`error`]: [`IcebergError`], every failure names the table, commit and file.
//!
//! Spec types and Avro writers are iceberg-rust's; all bytes go through one
//! [`TableStore`](xlake_storage::TableStore), so the commit point is its put-if-absent.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod error;
mod ops;
pub mod source;
mod spec;

// The layers' modules, under the paths this crate has always exported.
pub use error::{IcebergError, Result};
pub use expire::{Expired, Retention};
#[cfg(feature = "testing")]
pub use ops::merge;
pub use ops::publish::{Batch, Committed, NextBase};
pub use ops::{expire, orphans, path_index, relocation, table, v3};
pub use spec::error::CodecError;
#[cfg(feature = "testing")]
pub use spec::puffin;
pub use spec::{
    deletes, encode, fidelity, footer, history, layout, partition, schema, snapshot_index, summary,
    value,
};
pub use summary::{SyncMetadata, XTABLE_METADATA};
pub use table::{IcebergTable, LoadedTable};
// The crate as the engine's target (`xlake_target::TableTarget`), over the API above.
pub mod target;
pub use source::IcebergSource;
pub use target::IcebergTarget;
