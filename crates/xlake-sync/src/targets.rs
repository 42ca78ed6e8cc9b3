//! The registry of targets: the one module of the engine that names a concrete target
//! crate (`grep -rn xlake_iceberg crates/xlake-sync/src` finds this file alone).
//! Everything else holds a [`TableTarget`] and asks it. The operator chooses one with
//! `--target` ([`SyncOptions::target`]); Iceberg when not chosen.

use xlake_storage::TableStore;
use xlake_target::{TableTarget, TargetError, TargetOptions};

use crate::{SyncError, SyncOptions};

/// How a target kind opens the table at a store's root, written as the options say.
pub type OpenTarget = fn(TableStore, &TargetOptions) -> Result<Box<dyn TableTarget>, TargetError>;

/// A target format: its name and how to open a table of it.
#[derive(Clone, Copy)]
pub struct TargetKind {
    /// Lower-case name (`iceberg`).
    pub name: &'static str,
    /// The name in prose (`Iceberg`).
    pub title: &'static str,
    /// Open the target at the store's root, written as the options say.
    pub open: OpenTarget,
    /// Whether the target writes format version `n`; why not, if it does not.
    pub version_problem: fn(u8) -> Option<String>,
    /// The source format whose marker this target writes into the table folder (Delta's
    /// `_delta_log/`), and whether what is there is this target's own mirror: a folder is
    /// never read as a source of the format it is mirrored to.
    pub writes_marker_of: Option<(&'static str, MarkerOwner)>,
}

/// Whether the marker in the store's folder was written by this target.
pub type MarkerOwner =
    fn(TableStore) -> futures::future::BoxFuture<'static, Result<bool, TargetError>>;

impl std::fmt::Debug for TargetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetKind")
            .field("name", &self.name)
            .finish()
    }
}

/// Every target, the default first.
pub const KINDS: &[TargetKind] = &[
    TargetKind {
        name: "iceberg",
        title: "Iceberg",
        open: open_iceberg,
        version_problem: |n| {
            xlake_iceberg::v3::format_version(n)
                .err()
                .map(|e| e.to_string())
        },
        writes_marker_of: Some(("ICEBERG", iceberg_metadata_is_ours)),
    },
    TargetKind {
        name: "delta",
        title: "Delta",
        open: open_delta,
        version_problem: |n| {
            Some(format!("format_version {n} is an Iceberg format version; a Delta target writes the lowest protocol its features need"))
        },
        writes_marker_of: Some(("DELTA", delta_log_is_ours)),
    },
];

/// Under this age a cleanup may delete the files of a commit a running writer has written
/// but not yet published (the target's own figure).
pub const SAFE_AGE: std::time::Duration = xlake_iceberg::orphans::SAFE_AGE;

fn open_iceberg(
    store: TableStore,
    options: &TargetOptions,
) -> Result<Box<dyn TableTarget>, TargetError> {
    Ok(Box::new(xlake_iceberg::IcebergTarget::open(
        store, options,
    )?))
}

fn open_delta(
    store: TableStore,
    options: &TargetOptions,
) -> Result<Box<dyn TableTarget>, TargetError> {
    Ok(Box::new(xlake_delta::target::DeltaTarget::open(
        store, options,
    )?))
}

/// Whether `metadata/` holds a mirror (its snapshots record `XTABLE_METADATA`), not an
/// Iceberg table of its own.
fn iceberg_metadata_is_ours(
    store: TableStore,
) -> futures::future::BoxFuture<'static, Result<bool, TargetError>> {
    Box::pin(async move {
        xlake_iceberg::source::metadata_is_a_mirror(&store)
            .await
            .map_err(|e| TargetError::new(xlake_target::ErrorKind::Other, e))
    })
}

fn delta_log_is_ours(
    store: TableStore,
) -> futures::future::BoxFuture<'static, Result<bool, TargetError>> {
    Box::pin(async move { Ok(xlake_delta::target::DeltaTarget::written_by_xlake(&store).await?) })
}

/// Whether `kind` is the default target (Iceberg), the one that keeps catalog entries and
/// rebuilds a relocated history.
pub fn is_default(kind: &TargetKind) -> bool {
    kind.name == KINDS[0].name
}

/// The target kind `name` names (`iceberg`, `delta`, case-insensitive); Iceberg when `None`.
pub fn kind(name: Option<&str>) -> Result<&'static TargetKind, SyncError> {
    let Some(name) = name else {
        return Ok(&KINDS[0]);
    };
    KINDS
        .iter()
        .find(|k| k.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| SyncError::UnknownTarget {
            target: name.to_string(),
            known: KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", "),
        })
}

/// Whether the folder's marker of source format `format` (`DELTA`) is a mirror some
/// target wrote there, not a source table.
pub async fn marker_is_a_mirror(store: &TableStore, format: &str) -> Result<bool, SyncError> {
    for k in KINDS {
        if let Some((of, owned)) = k.writes_marker_of {
            if of == format && owned(store.clone()).await? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The target options `options` ask for.
pub fn target_options(options: &SyncOptions) -> TargetOptions {
    TargetOptions {
        properties: options.properties.clone(),
        verify_files: !options.skip_file_check,
        format_version: options.format_version,
    }
}

/// The table's target at the store's root, written as `options` say.
pub fn open(store: &TableStore, options: &SyncOptions) -> Result<Box<dyn TableTarget>, SyncError> {
    let k = kind(options.target.as_deref())?;
    Ok((k.open)(store.clone(), &target_options(options))?)
}

/// The table's target of the kind `options` choose, for reading (default target options).
pub fn open_chosen(
    store: &TableStore,
    options: &SyncOptions,
) -> Result<Box<dyn TableTarget>, SyncError> {
    let k = kind(options.target.as_deref())?;
    Ok((k.open)(store.clone(), &TargetOptions::default())?)
}

/// The table's target at the store's root, written as `options` say.
pub fn open_with(
    store: &TableStore,
    options: &TargetOptions,
) -> Result<Box<dyn TableTarget>, SyncError> {
    Ok((KINDS[0].open)(store.clone(), options)?)
}

/// The table's target at the store's root, for reading (default options).
pub fn open_default(store: &TableStore) -> Result<Box<dyn TableTarget>, SyncError> {
    open_with(store, &TargetOptions::default())
}

/// Why the table's target cannot write format version `n`, if it cannot.
pub fn version_problem(n: u8) -> Option<String> {
    (KINDS[0].version_problem)(n)
}
