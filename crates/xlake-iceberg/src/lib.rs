//! # xlake-iceberg: the Iceberg target
//!
//! Turns neutral [`ChangeSet`](xlake_model::ChangeSet)s into Iceberg metadata in the table's
//! own `metadata/` folder, one snapshot per change set, referencing the source's data files
//! in place. It knows nothing of Hudi or Delta.
//!
//! A commit is planned, then published, the way iceberg-rust splits its
//! `SnapshotProducer`:
//!
//! | module | what it does |
//! |---|---|
//! | [`table`] | [`IcebergTable`]: load the current `vN.metadata.json`; commit change sets (plan each, publish once) |
//! | `plan` | the planner, one module per concern, run in order by `IcebergTable::stage`: |
//! | `plan::schema` | … schema ids, partition spec, table properties and name mapping |
//! | `plan::files` | … added files checked, measured (footers) and described with their stats |
//! | `plan::deletes` | … rows deleted from added files; removed files and the manifests that hold them |
//! | `plan::manifests` | … new, rewritten and merged manifests, and the manifest list |
//! | `plan::summary` | … operation, summary counters, `XTABLE_METADATA`, `xlake.degraded` |
//! | `publish` | the publisher: the commit point (put-if-absent of `vN.metadata.json`), `version-hint.text`, abandoning a failed commit's journal |
//! | [`layout`] | the names: `metadata/`, `version-hint.text`, `vN.metadata.json`, manifests, lists, delete files |
//! | [`history`] | a commit's load: the working snapshots parsed, the others' JSON carried as it is, their entries read from the snapshot index (else from their heads) |
//! | [`snapshot_index`] | table property `xlake.snapshot-index`: each snapshot's id, order, length and source commit, for the file it names and matches |
//! | `compact` | the parts of `vN.metadata.json` that grow with history (snapshot log, table properties, integers) read by hand in the compact shape Iceberg writes, serde_json as the fallback |
//! | `body` | a document written in parts: serialized buffers, and large runs of carried text as views of the bytes read |
//! | [`encode`] | the bytes of `vN.metadata.json`: snapshots in commit order, as Java writes them; carried snapshots written back as read |
//! | [`relocation`] | a copied or moved table: its old metadata files, set aside for a rebuild |
//! | [`path_index`] | `metadata/<uuid>-paths.bin`: which manifest holds which file, so that a removal reads only the manifests holding what it removes |
//! | [`schema`] | neutral schema to Iceberg schema with stable field ids; the name mapping, with reserved ids for file columns readers must skip |
//! | [`partition`] | partition specs and partition tuples |
//! | [`value`] | neutral values to Iceberg datums (bounds, partition values); bound truncation |
//! | [`expire`] | snapshot expiry in step with the source's cleaner or vacuum, plus count and age limits |
//! | [`deletes`] | the bytes of position-delete files for rows a source deleted (Delta deletion vectors) |
//! | [`fidelity`] | Parquet layouts some readers misread (two-level lists, millisecond timestamps, nested fields without ids); `xlake.degraded` |
//! | `puffin` | v3 deletion vectors: `deletion-vector-v1` blobs copied from the source, Puffin files |
//! | [`v3`] | which format version a commit writes, upgrades in place (the one upgrade path), a snapshot's vectors |
//! | [`footer`] | record counts and column stats from Parquet footers, when the source has none |
//! | [`summary`] | snapshot summary counters, `XTABLE_METADATA` ([`SyncMetadata`]) and `xlake.degraded` |
//! | [`orphans`] | metadata files no retained version references (for cleanup) |
//! | `merge` | merging small manifests, so manifest lists stay short as commits accumulate |
//! | `manifest` | manifests and manifest lists written (by `manifest_write` and `list_write`, or iceberg-rust's writers) and persisted through [`xlake_storage`]; read back whole, or of a data manifest only its live paths (`held`: what a removal or an expiry needs) |
//! | `list_read` | a manifest list read straight into its fields (serde_avro_fast), iceberg-rust's parse as the fallback |
//! | `list_write` | a manifest list encoded straight from its manifests (serde_avro_fast) under iceberg-rust's own schema (held as its text, `list_schema_v*.json`, checked by the tests), its writer as a fallback |
//! | `list_carry` | a list keeping every manifest of its parent's (an append): the parent's records carried as its Avro blocks, unread when nothing is removed |
//! | `list_shape` | what deciding on that carry needs of each record of a list this crate wrote, read by hand under its known schema |
//! | `manifest_read` | a manifest's entries read the same way, iceberg-rust's parse as the fallback |
//! | `container` | an uncompressed Avro container's records, its schema parsed once per process (a manifest's live files) |
//! | `manifest_record` | a manifest's Avro records, as iceberg-rust's own serde writes them: read by `manifest_read`, written by `manifest_write` |
//! | `manifest_write` | a manifest encoded straight from its entries (serde_avro_fast) under iceberg-rust's own header (its entry schema held as its text, `manifest_schema_v2.json`, checked by the tests), its writer as the fallback |
//! | [`target`] | [`IcebergTarget`]: this crate as the engine's `xlake_target::TableTarget` |
//! | [`error`] | [`IcebergError`]: every failure names the table, commit and file |
//!
//! Spec types and Avro writers are iceberg-rust's; all bytes go through one
//! [`TableStore`](xlake_storage::TableStore), so the commit point is its put-if-absent.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod error;
mod ops;
mod spec;

// The layers' modules, under the paths this crate has always exported.
#[cfg(feature = "testing")]
pub use ops::merge;
#[cfg(not(feature = "testing"))]
use ops::merge;
pub use ops::{expire, orphans, path_index, relocation, table, v3};
#[cfg(feature = "testing")]
pub use spec::puffin;
#[cfg(not(feature = "testing"))]
use spec::puffin;
pub use spec::{
    deletes, encode, fidelity, footer, history, layout, partition, schema, snapshot_index, summary,
    value,
};
// Old crate-internal paths, until each import names its layer.
use ops::{plan, publish};
use spec::manifest::{read as manifest_read, record as manifest_record, write as manifest_write};
use spec::manifest_list::{
    carry as list_carry, read as list_read, shape as list_shape, write as list_write,
};
use spec::{body, compact, container, manifest};
// The crate as the engine's target (`xlake_target::TableTarget`), over the API above.
pub mod target;

pub use error::{IcebergError, Result};
pub use expire::{Expired, Retention};
pub use publish::NextBase;
pub use summary::{SyncMetadata, XTABLE_METADATA};
pub use table::{Committed, IcebergTable, LoadedTable};
pub use target::IcebergTarget;
