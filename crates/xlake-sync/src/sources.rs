//! The registry of source formats: the one module of the engine that names the concrete
//! source crates. Everything else holds a [`TableSource`] and asks it.

use xlake_source::{MirrorState, SourceKind, TableSource};
use xlake_storage::TableStore;
use xlake_target::{Loaded, Read, TableTarget};

use crate::{InTable, SyncError, SyncOptions};

/// Every source format, in the order a folder is tried against them: Hudi and Delta before
/// Iceberg, so that a Hudi or Delta table with an Iceberg mirror in `metadata/` is read as
/// Hudi or Delta (the Iceberg kind also declines a `metadata/` that is a mirror).
pub const KINDS: &[SourceKind] = &[
    xlake_hudi::KIND,
    xlake_delta::KIND,
    xlake_iceberg::source::KIND,
    xlake_parquet::KIND,
];

/// The format named `name` (`hudi`, `delta`, `parquet`), case-insensitive.
pub fn kind(name: &str) -> Option<&'static SourceKind> {
    KINDS.iter().find(|k| k.name.eq_ignore_ascii_case(name))
}

/// The source options `options` ask for, with the name of the target in use (the
/// default, Iceberg, when none is chosen or the name is unknown): a source names it where
/// it says what the mirror's readers cannot read (Hudi's log files).
pub(crate) fn source_options(options: &SyncOptions) -> xlake_source::SourceOptions {
    xlake_source::SourceOptions {
        target_title: crate::targets::kind(options.target.as_deref())
            .ok()
            .map(|k| k.title),
        ..options.source
    }
}

/// Open the table at the store's root: as the format `options.format` names; else as the
/// first detectable format that recognises it; else as the format its mirror records
/// (a format never detected, once chosen for the first sync, stays chosen).
pub async fn open(
    store: &TableStore,
    options: &SyncOptions,
) -> Result<Box<dyn TableSource>, SyncError> {
    let candidates: Vec<&SourceKind> = match options.format.as_deref() {
        Some(name) => vec![chosen(store, name).await?],
        None => KINDS.iter().filter(|k| k.detectable).collect(),
    };
    let source = open_among(store, options, &candidates).await?;
    let target = crate::targets::kind(options.target.as_deref())?;
    if let Some((format, _)) = target.writes_marker_of {
        if source.format().as_str() == format {
            return Err(SyncError::SameFormat {
                table: store.location().to_string(),
                format: target.title.to_string(),
            });
        }
    }
    Ok(source)
}

/// The first of `candidates` that opens the table (a folder's marker that is a mirror
/// skipped), else the format its mirror records.
async fn open_among(
    store: &TableStore,
    options: &SyncOptions,
    candidates: &[&'static SourceKind],
) -> Result<Box<dyn TableSource>, SyncError> {
    // A marker that is a mirror xlake wrote (its own `_delta_log/` beside an Iceberg
    // table) never makes the folder a table of that format, whatever the target.
    for k in candidates {
        if options.format.is_none()
            && crate::targets::marker_is_a_mirror(store, k.format.as_str()).await?
        {
            continue;
        }
        if let Some(source) = (k.open)(store.clone(), source_options(options))
            .await
            .in_table(store)?
        {
            return Ok(source);
        }
    }
    if options.format.is_none() {
        if let Some(k) = recorded(store).await? {
            if let Some(source) = (k.open)(store.clone(), source_options(options))
                .await
                .in_table(store)?
            {
                return Ok(source);
            }
        }
    }
    Err(not_a_table(store, candidates))
}

/// [`open`], for a table whose mirror was just `loaded`: with no format named, the format
/// the mirror records is opened first, without probing the others' markers (a sync of a
/// mirrored Delta table on an object store then makes no request for `.hoodie/`). A
/// format never detected (a Parquet folder) is still opened only after detection, as
/// [`open`] does, so that a folder that has become a Delta table is refused, not read as
/// Parquet. A table marked as both Hudi and Delta is read as its mirror records.
///
/// With `state`, what the mirror holds, a format that can (Delta) reads its log from the
/// newest mirrored commit on, not whole (`SourceKind::open_after`).
pub async fn open_as_recorded(
    store: &TableStore,
    options: &SyncOptions,
    loaded: Option<&Loaded>,
    state: Option<&MirrorState>,
) -> Result<Box<dyn TableSource>, SyncError> {
    let recorded = loaded
        .and_then(|l| l.source_format.as_deref())
        .and_then(|f| {
            KINDS
                .iter()
                .find(|k| k.detectable && k.format.as_str() == f)
        })
        .filter(|_| options.format.is_none());
    if let Some(k) = recorded {
        let opened = match (k.open_after, state.filter(|s| !s.commits.is_empty())) {
            (Some(after), Some(state)) => after(store.clone(), source_options(options), state),
            _ => (k.open)(store.clone(), source_options(options)),
        };
        if let Some(source) = opened.await.in_table(store)? {
            return Ok(source);
        }
    }
    open(store, options).await
}

/// The format of the table at the store's root, from names alone: the one `format` names,
/// else the first detectable one found, else the one its mirror records.
pub async fn detect(
    store: &TableStore,
    format: Option<&str>,
) -> Result<Option<&'static SourceKind>, SyncError> {
    if let Some(name) = format {
        return Ok(Some(chosen(store, name).await?));
    }
    for k in KINDS.iter().filter(|k| k.detectable) {
        if (k.detect)(store.clone()).await.in_table(store)?
            && !crate::targets::marker_is_a_mirror(store, k.format.as_str()).await?
        {
            return Ok(Some(k));
        }
    }
    recorded(store).await
}

/// The format `name` names, chosen for the table at the store's root; refused when the
/// table's own markers say it is of another format (`--format parquet` on a folder with
/// `_delta_log/`), naming both. A table marked as both (XTable writes Delta logs beside
/// Hudi tables) may be read as either.
async fn chosen(store: &TableStore, name: &str) -> Result<&'static SourceKind, SyncError> {
    let asked = kind(name).ok_or_else(|| SyncError::UnknownFormat {
        format: name.to_string(),
        known: KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", "),
    })?;
    let mirror = crate::targets::marker_is_a_mirror(store, asked.format.as_str()).await?;
    if asked.detectable && !mirror && (asked.detect)(store.clone()).await.in_table(store)? {
        return Ok(asked);
    }
    for other in KINDS
        .iter()
        .filter(|k| k.detectable && k.name != asked.name)
    {
        if (other.detect)(store.clone()).await.in_table(store)?
            && !crate::targets::marker_is_a_mirror(store, other.format.as_str()).await?
        {
            return Err(SyncError::FormatMismatch {
                table: store.location().to_string(),
                asked: asked.format.as_str().into(),
                found: format!(
                    "the table's format is {} ({} is there)",
                    other.title, other.marker
                ),
            });
        }
    }
    if mirror {
        // xlake's own mirror in that format (`--format delta` beside a Delta target's
        // `_delta_log/`) is never a source.
        return Err(SyncError::FormatMismatch {
            table: store.location().to_string(),
            asked: asked.format.as_str().into(),
            found: format!("its {} is xlake's own mirror, not a source", asked.marker),
        });
    }
    Ok(asked)
}

/// Refuse a source of another format than the one the table's mirror (`loaded`) records:
/// its commits would be mixed into the other format's snapshots (a Parquet listing of a
/// Delta table brings back every file Delta removed).
pub(crate) fn same_as_recorded(
    store: &TableStore,
    source: &dyn TableSource,
    loaded: Option<&Loaded>,
) -> Result<(), SyncError> {
    let asked = source.format().as_str();
    let Some(recorded) = loaded.and_then(|l| l.source_format.as_deref()) else {
        return Ok(());
    };
    if recorded == asked {
        return Ok(());
    }
    Err(SyncError::FormatMismatch {
        table: store.location().to_string(),
        asked: asked.into(),
        found: format!("its Iceberg mirror records sourceTableFormat {recorded}, and one mirror holds one format's commits"),
    })
}

/// "Not a table" for the store's root, naming the formats looked for.
pub fn not_a_table(store: &TableStore, looked_for: &[&SourceKind]) -> SyncError {
    let (formats, markers) = describe(looked_for);
    SyncError::NotATable {
        table: store.location().to_string(),
        formats,
        markers,
    }
}

/// The formats (`Hudi, Delta or Iceberg`) and what marks a table of each
/// (`.hoodie/hoodie.properties, _delta_log/`), for messages.
pub fn describe(kinds: &[&SourceKind]) -> (String, String) {
    let names = |f: fn(&SourceKind) -> &'static str| kinds.iter().map(|k| f(k)).collect::<Vec<_>>();
    let titles = names(|k| k.title);
    // `Hudi`, `Hudi or Delta`, `Hudi, Delta or Iceberg`.
    let formats = match titles.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => titles.join(""),
    };
    (formats, names(|k| k.marker).join(", "))
}

/// The detectable formats, for "not a table" messages.
pub fn detectable() -> Vec<&'static SourceKind> {
    KINDS.iter().filter(|k| k.detectable).collect()
}

/// The format the newest snapshot of the table's mirror records (of the first target
/// with a mirror there), if any.
async fn recorded(store: &TableStore) -> Result<Option<&'static SourceKind>, SyncError> {
    for kind in crate::targets::KINDS {
        let mut target = (kind.open)(store.clone(), &Default::default())?;
        if !target.exists().await? {
            continue;
        }
        let Some(loaded) = target.load(Read::AsFound).await? else {
            continue;
        };
        let format = loaded.source_format;
        return Ok(format.and_then(|f| KINDS.iter().find(|k| k.format.as_str() == f)));
    }
    Ok(None)
}

/// `options`, with every operator choice a format records in its snapshots' notes (a
/// merge-on-read table mirrored as its read-optimized view) that the loaded `target`'s
/// snapshots record: the operator chose it when syncing, and commands that read the table
/// need not be told again.
pub(crate) fn with_recorded_choices(
    options: &SyncOptions,
    target: &dyn TableTarget,
) -> SyncOptions {
    let mut options = options.clone();
    for choice in KINDS.iter().flat_map(|k| k.recorded) {
        if target.records_note(choice.note, choice.value) {
            (choice.choose)(&mut options.source);
        }
    }
    options
}
