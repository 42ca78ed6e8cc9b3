//! [`ParquetSource`]: the folder's current files as one full-state change set per sync.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use parquet::file::metadata::ParquetMetaData;
use xlake_model::{
    ChangeSet, CommitListing, DataFile, DataType, Field, ListedCommit, PartitionField,
    PartitionSpec, PrimitiveType, Schema, SourceCommit, SourceFormat,
};
use xlake_source::{
    numeric_order, CommitState, ErrorKind, MirrorState, OpenFuture, Replay, SourceError,
    SourceHealth, SourceKind, SourceOptions, TableSource, VecReplay,
};
use xlake_storage::footer::read_footer;
use xlake_storage::{Change, Entry, TableStore};

use crate::error::{InFile, ParquetError};
use crate::listing::{fingerprint, is_data_file};
use crate::partition::{infer_type, segments, typed};
use crate::rewrites::Recorded;
use crate::schema::{file_schema, fits};

/// The format's name in `XTABLE_METADATA`.
pub const FORMAT: SourceFormat = SourceFormat::new("PARQUET");

/// The Parquet-folder format, for the engine's registry: chosen explicitly, never detected.
pub const KIND: SourceKind = SourceKind {
    name: "parquet",
    title: "Parquet folder",
    format: FORMAT,
    marker: "Parquet files",
    detectable: false,
    detect: |_| Box::pin(async { Ok(false) }),
    open,
    open_after: None,
    open_at_tip: None,
    late_completions: false,
    recorded: &[],
};

/// The note holding the listing's fingerprint.
pub const LISTING_NOTE: &str = "xlake.parquet.listing";

/// The note holding the listing's newest modification time (ms): a file modified after it
/// was rewritten since that listing (or is new).
pub const MODIFIED_NOTE: &str = "xlake.parquet.modified";

/// Footers read at once.
const FOOTER_READS: usize = 16;

fn open(store: TableStore, _: SourceOptions) -> OpenFuture {
    Box::pin(async move {
        // The data files, sorted by path, each with its change from the listing's own
        // look at it (on a local folder, no system call more per file).
        let listed = store.list_recursive_changes("", is_data_file).await?;
        let (files, changes) = listed.into_iter().unzip();
        let source = ParquetSource {
            store,
            files,
            changes,
        };
        Ok(Some(Box::new(source) as Box<dyn TableSource>))
    })
}

/// A folder of Parquet files opened for reading: its data files as listed at open, and
/// when each last changed (in the same order).
#[derive(Debug)]
pub struct ParquetSource {
    store: TableStore,
    files: Vec<Entry>,
    changes: Vec<Change>,
}

impl ParquetSource {
    fn error(&self, file: Option<&Entry>, reason: impl Into<ParquetError>) -> SourceError {
        let reason = reason.into();
        let kind = ErrorKind::Corrupt {
            commit: None,
            file: file.map(|f| self.store.absolute(&f.path)),
        };
        match file {
            Some(f) => {
                let file = self.store.absolute(&f.path);
                SourceError::new(
                    kind,
                    InFile {
                        file,
                        source: reason,
                    },
                )
            }
            None => SourceError::new(kind, reason),
        }
    }

    /// The generation the current listing is: the newest mirrored one if the listing is
    /// the one it recorded and no file changed since (as far as it recorded changes),
    /// else the next.
    fn generation(&self, mirrored: &MirrorState) -> u64 {
        let Some((id, notes)) = &mirrored.newest else {
            return 1;
        };
        let newest = id.parse::<u64>().unwrap_or(0);
        let same = notes.get(LISTING_NOTE) == Some(&fingerprint(&self.files))
            && !self.changed_since(notes).contains(&true);
        if same {
            newest
        } else {
            newest + 1
        }
    }

    /// For each file, whether it changed since the listing `notes` record; none for a
    /// mirror written before changes were recorded.
    fn changed_since(&self, notes: &BTreeMap<String, String>) -> Vec<bool> {
        match Recorded::from_notes(notes) {
            Some(recorded) => recorded.changed_since(&self.files, &self.changes),
            None => vec![false; self.files.len()],
        }
    }

    fn newest_modified(&self) -> i64 {
        self.files.iter().map(|f| f.modified_ms).max().unwrap_or(0)
    }

    async fn footer(&self, f: &Entry) -> Result<ParquetMetaData, SourceError> {
        read_footer(&self.store, &f.path, f.size)
            .await
            .map_err(|e| self.error(Some(f), ParquetError::Footer(e)))
    }

    async fn footers(&self) -> Result<Vec<ParquetMetaData>, SourceError> {
        let reads: Vec<_> = self.files.iter().map(|f| self.footer(f)).collect();
        futures::stream::iter(reads)
            .buffered(FOOTER_READS)
            .try_collect()
            .await
    }

    /// The table's schema (the newest file's columns, then partition columns the files do
    /// not hold) and partition spec; every file must read through it.
    fn schema(&self, footers: &[ParquetMetaData]) -> Result<(Schema, PartitionSpec), SourceError> {
        let schemas = footers
            .iter()
            .zip(&self.files)
            .map(|(m, f)| file_schema(m).map_err(|e| self.error(Some(f), e)))
            .collect::<Result<Vec<_>, _>>()?;
        let newest = (0..self.files.len()).max_by_key(|&i| (self.files[i].modified_ms, i));
        let mut schema = newest.map(|i| schemas[i].clone()).unwrap_or_default();
        for (s, f) in schemas.iter().zip(&self.files) {
            fits(&s.fields, &schema.fields).map_err(|e| self.error(Some(f), e))?;
        }
        let keys = self.partition_keys()?;
        for key in &keys {
            if schema.field(key).is_none() {
                let values = self.files.iter().flat_map(|f| {
                    segments(&f.path)
                        .into_iter()
                        .filter(|(k, _)| k == key)
                        .map(|(_, v)| v)
                        .collect::<Vec<_>>()
                });
                let values: Vec<Option<String>> = values.collect();
                let ty = infer_type(values.iter().map(Option::as_deref));
                schema.fields.push(Field::optional(key.clone(), ty));
            }
        }
        let spec = PartitionSpec::new(keys.iter().map(PartitionField::identity).collect());
        Ok((schema, spec))
    }

    /// The partition keys, the same in every file's path.
    fn partition_keys(&self) -> Result<Vec<String>, SourceError> {
        let mut keys: Option<Vec<String>> = None;
        for f in &self.files {
            let these: Vec<String> = segments(&f.path).into_iter().map(|(k, _)| k).collect();
            match &keys {
                None => keys = Some(these),
                Some(k) if *k == these => {}
                Some(k) => {
                    return Err(self.error(
                        Some(f),
                        format!("partition folders {these:?} differ from {k:?} of other files"),
                    ))
                }
            }
        }
        Ok(keys.unwrap_or_default())
    }

    fn data_file(
        &self,
        f: &Entry,
        meta: &ParquetMetaData,
        schema: &Schema,
        spec: &PartitionSpec,
    ) -> Result<DataFile, SourceError> {
        let values: BTreeMap<String, Option<String>> = segments(&f.path).into_iter().collect();
        let partition = spec
            .fields
            .iter()
            .map(|p| {
                let ty = match schema.field(&p.source).map(|c| &c.data_type) {
                    Some(DataType::Primitive(t)) => t.clone(),
                    _ => PrimitiveType::String,
                };
                typed(values.get(&p.source).cloned().flatten().as_deref(), &ty)
                    .map_err(|e| self.error(Some(f), e))
            })
            .collect::<Result<_, _>>()?;
        let rows = u64::try_from(meta.file_metadata().num_rows()).unwrap_or(0);
        Ok(DataFile::parquet(f.path.clone(), f.size, Some(rows)).with_partition(partition))
    }
}

#[async_trait::async_trait]
impl TableSource for ParquetSource {
    fn format(&self) -> SourceFormat {
        FORMAT
    }

    /// The folder keeps no history: its one commit is the current listing's generation;
    /// earlier generations are gone, as archived commits are.
    fn listing(&self, mirrored: &MirrorState) -> Result<CommitListing, SourceError> {
        let id = self.generation(mirrored).to_string();
        Ok(CommitListing {
            commits: vec![ListedCommit {
                id: id.clone(),
                time_ms: self.newest_modified(),
            }],
            retained_from: Some(id),
            strictly_ordered: true,
            completed_late: Default::default(),
            gone_unmirrored: Default::default(),
        })
    }

    fn commit_state(&self, _: &str) -> CommitState {
        CommitState::Unknown
    }

    fn order(&self, a: &str, b: &str) -> Ordering {
        numeric_order(a, b)
    }

    async fn health(&self) -> Result<SourceHealth, SourceError> {
        let bytes: u64 = self.files.iter().map(|f| f.size).sum();
        let keys = self.partition_keys()?;
        Ok(SourceHealth {
            line: format!(
                "{} data files, {bytes} bytes; partitioned by [{}]",
                self.files.len(),
                keys.join(", ")
            ),
            json: serde_json::json!({
                "data_files": self.files.len(),
                "bytes": bytes,
                "partition_keys": keys,
                "fingerprint": fingerprint(&self.files),
            }),
            degraded: Vec::new(),
        })
    }

    /// One full-state change set (the folder as listed), or none when it is mirrored.
    async fn replay<'a>(&'a self, mirrored: &MirrorState) -> Result<Replay<'a>, SourceError> {
        let generation = self.generation(mirrored).to_string();
        if mirrored.commits.contains(&generation) {
            return Ok(Box::new(VecReplay::new(Vec::new(), Vec::new(), None)));
        }
        let footers = self.footers().await?;
        let (schema, spec) = self.schema(&footers)?;
        let commit = SourceCommit {
            format: FORMAT,
            id: generation,
            action: "listing".into(),
            requested_ms: None,
            commit_time_ms: self.newest_modified(),
        };
        let mut change = ChangeSet::new(commit, schema, spec);
        change.full_state = true;
        change
            .notes
            .insert(LISTING_NOTE.into(), fingerprint(&self.files));
        change
            .notes
            .insert(MODIFIED_NOTE.into(), self.newest_modified().to_string());
        change
            .notes
            .extend(Recorded::of(&self.files, &self.changes).notes());
        // A file modified or changed since the last listing replaces its entry (the target
        // also replaces one whose size differs; a mirror written before these notes by
        // size, or by size and modification time, until this change set records them).
        let notes = mirrored.newest.as_ref().map(|(_, n)| n);
        let listed = notes.and_then(|n| n.get(MODIFIED_NOTE));
        let listed: Option<i64> = listed.and_then(|t| t.parse().ok());
        let changed = notes.map(|n| self.changed_since(n)).unwrap_or_default();
        for (i, (f, meta)) in self.files.iter().zip(&footers).enumerate() {
            let mut file = self.data_file(f, meta, &change.schema, &change.partition_spec)?;
            let modified = listed.is_some_and(|t| f.modified_ms > t);
            file.rewritten = modified || changed.get(i).copied().unwrap_or(false);
            change.added.push(file);
        }
        Ok(Box::new(VecReplay::new(vec![change], Vec::new(), None)))
    }
}
