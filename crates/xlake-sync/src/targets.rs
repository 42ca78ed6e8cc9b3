//! The registry of targets: the one module of the engine that names a concrete target
//! crate (`grep -rn xlake_iceberg crates/xlake-sync/src` finds this file alone).
//! Everything else holds a [`TableTarget`] and asks it.

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
}

impl std::fmt::Debug for TargetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetKind")
            .field("name", &self.name)
            .finish()
    }
}

/// Every target, the one a table is mirrored to first.
pub const KINDS: &[TargetKind] = &[TargetKind {
    name: "iceberg",
    title: "Iceberg",
    open: open_iceberg,
    version_problem: |n| xlake_iceberg::v3::format_version(n).err(),
}];

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
    open_with(store, &target_options(options))
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
