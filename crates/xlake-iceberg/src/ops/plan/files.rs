//! Files and stats: each added file checked (it exists, with the size the source
//! recorded), measured (row count and column stats from the source, else from its Parquet
//! footer), looked at for layouts some readers misread, and described as an Iceberg data
//! file with its partition tuple and bounds. A full-state change set becomes a difference
//! from the live files first.

use std::collections::{BTreeSet, HashMap, HashSet};

use futures::StreamExt;
use iceberg::spec::{
    DataContentType, DataFile as IcebergDataFile, DataFileBuilder, DataFileFormat, Datum,
    NameMapping, NestedFieldRef, PartitionSpec as IcebergSpec, PrimitiveType,
    Schema as IcebergSchema, StructType, TableMetadata, Type,
};
use xlake_model::{ChangeSet, ColumnStats, DataFile, FileFormat};

use super::schema::Bound;
use crate::error::{IcebergError, Result};
use crate::ops::table::{IcebergTable, FILE_CHECK_CONCURRENCY};
use crate::spec::error::CodecError;
use crate::spec::fidelity::{findings, Finding, Shape};
use crate::spec::footer::{footer_stats, read_footer};
use crate::spec::layout::{in_metadata_dir, METADATA_CLASH, METADATA_DIR};
use crate::spec::partition::partition_tuple;
use crate::spec::value::{to_datum, truncate_lower, truncate_upper};

/// A change set's added files in Iceberg's terms.
pub(super) struct AddedFiles {
    pub(super) data: Vec<IcebergDataFile>,
    /// Delete files of rows the source deleted from them (position deletes, or v3
    /// deletion vectors).
    pub(super) deletes: Vec<IcebergDataFile>,
    /// Layouts some readers misread, found in their footers.
    pub(super) found: BTreeSet<Finding>,
    /// `xlake.degraded` entries of deletion vectors gone from storage that `deletes`
    /// names where the source kept them (see `gone_vector`).
    pub(super) gone_vectors: BTreeSet<String>,
}

impl AddedFiles {
    /// Spark's vectorized reader fails on TIMESTAMP_MILLIS; its row reader does not. Set in
    /// the version that first references such a file; table properties stay set.
    pub(super) fn turns_off_vectorization(&self) -> bool {
        self.found.iter().any(|f| f.shape == Shape::TimestampMillis)
    }
}

/// One added file: the data file, the position-delete file of the rows the source deleted
/// from it, and its layouts some readers misread.
type AddedFile = (IcebergDataFile, Option<IcebergDataFile>, BTreeSet<Finding>);

/// The error of an added file that cannot be used as it is, from the reason.
pub(super) type Invalid<'a> = dyn Fn(String) -> IcebergError + 'a;

/// What is known of one file's contents: row count, column stats, layouts found.
type Measured = (u64, Vec<(String, ColumnStats)>, BTreeSet<Finding>);

impl IcebergTable {
    /// Iceberg data files (and delete files) for the change set's added files.
    pub(super) async fn added_files(
        &self,
        change: &ChangeSet,
        bound: &Bound,
        mapping: &NameMapping,
        v3: bool,
    ) -> Result<AddedFiles> {
        let (schema, spec) = (bound.schema.as_ref(), bound.spec.as_ref());
        let partition_type = spec
            .partition_type(schema)
            .map_err(self.spec_error("partition type"))?;
        // Footers are read for the layouts some readers misread only where the schema can
        // hold one: a list, a map or a timestamp.
        let inspect = may_degrade(schema.as_struct().fields()).then_some(mapping);
        // Every file is seen through before an error is returned: a delete file still being
        // written when the others were dropped would escape the journal.
        let results: Vec<Result<AddedFile>> = futures::stream::iter(change.added.iter())
            .map(|f| self.added_file(change, f, (schema, spec, &partition_type), inspect, v3))
            .buffered(FILE_CHECK_CONCURRENCY)
            .collect()
            .await;
        let mut added = AddedFiles {
            data: Vec::new(),
            deletes: Vec::new(),
            found: BTreeSet::new(),
            gone_vectors: BTreeSet::new(),
        };
        for (d, delete, f) in results.into_iter().collect::<Result<Vec<_>>>()? {
            added.data.push(d);
            added.deletes.extend(delete);
            added.found.extend(f);
        }
        if v3 {
            // Deletion vectors as they are, in one Puffin file (no position-delete files).
            added.deletes = self.vector_deletes(change, &added.data, spec).await?;
        }
        // Every delete file xlake writes is in `metadata/`: one elsewhere is a source's
        // vector that is gone.
        let metadata_dir = format!("{}/", self.store.absolute(METADATA_DIR));
        added.gone_vectors = added
            .deletes
            .iter()
            .filter(|d| !d.file_path().starts_with(&metadata_dir))
            .map(|d| {
                format!(
                    "{}: its deletion vector ({}) is gone from storage (vacuumed); this snapshot names it and cannot be read, as the source cannot read this commit either",
                    d.referenced_data_file().unwrap_or_default(),
                    d.file_path()
                )
            })
            .collect();
        Ok(added)
    }

    async fn added_file(
        &self,
        change: &ChangeSet,
        file: &DataFile,
        (schema, spec, partition_type): (&IcebergSchema, &IcebergSpec, &StructType),
        inspect: Option<&NameMapping>,
        v3: bool,
    ) -> Result<AddedFile> {
        let invalid = &self.invalid_file(change, file);
        // A source's file in the mirror's own folder: cleanup would take it for metadata.
        let absolute = self.store.absolute(&file.path);
        if self.store.relative(&absolute).is_some_and(in_metadata_dir) {
            return Err(invalid(METADATA_CLASH.into()));
        }
        let gone = self.is_gone(file, invalid).await?;
        let (record_count, stats, found) = self
            .measure(change, file, gone, (schema, inspect), invalid)
            .await?;
        let partition = partition_tuple(
            &file.partition,
            &change.partition_spec,
            &change.schema,
            partition_type,
        )
        .map_err(|e| invalid(e.to_string()))?;
        let metrics = metrics(change, schema, stats);
        let data = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(self.store.absolute(&file.path))
            .file_format(match file.format {
                FileFormat::Parquet => DataFileFormat::Parquet,
                FileFormat::Orc => DataFileFormat::Orc,
                FileFormat::Avro => DataFileFormat::Avro,
            })
            .partition(partition)
            .partition_spec_id(spec.spec_id())
            .record_count(record_count)
            .file_size_in_bytes(file.size_bytes)
            .value_counts(metrics.value_counts)
            .null_value_counts(metrics.null_counts)
            .nan_value_counts(metrics.nan_counts)
            .lower_bounds(metrics.lower_bounds)
            .upper_bounds(metrics.upper_bounds)
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        let deletes = self
            .position_deletes(file, (&data, spec.spec_id()), v3, invalid)
            .await?;
        Ok((data, deletes, found))
    }

    /// The error of an added file that cannot be used as it is.
    pub(super) fn invalid_file<'a, E: Into<CodecError>>(
        &'a self,
        change: &'a ChangeSet,
        file: &DataFile,
    ) -> impl Fn(E) -> IcebergError + 'a {
        let location = self.store.absolute(&file.path);
        move |reason| IcebergError::InvalidDataFile {
            table: self.table(),
            commit: change.commit.id.clone(),
            path: location.clone(),
            reason: reason.into(),
        }
    }

    /// Whether `file` is gone from storage, which only a file a later source commit removes
    /// may be (cleaned, vacuumed: it is only history, described by what the source
    /// recorded). Checked when files are verified and the source does not prove that the
    /// file exists ([`DataFile::proven`]); otherwise the source is trusted.
    async fn is_gone(&self, file: &DataFile, invalid: &Invalid<'_>) -> Result<bool> {
        if (!self.verify_files || file.proven) && !file.removed_later {
            return Ok(false);
        }
        match self.store.size(&file.path).await? {
            None if file.removed_later => Ok(true),
            None => Err(invalid("does not exist".into())),
            Some(n) if n != file.size_bytes => Err(invalid(format!(
                "the source records {} bytes, storage has {n}",
                file.size_bytes
            ))),
            Some(_) => Ok(false),
        }
    }

    /// The row count and column stats of `file`: the source's, else its footer's (which
    /// must agree with the source's row count); and the layouts its footer shows. Layouts
    /// are looked for where files are checked (`--skip-file-check` trusts the source and
    /// reads no file it does not need).
    async fn measure(
        &self,
        change: &ChangeSet,
        file: &DataFile,
        gone: bool,
        (schema, inspect): (&IcebergSchema, Option<&NameMapping>),
        invalid: &Invalid<'_>,
    ) -> Result<Measured> {
        let mut record_count = file.record_count;
        let mut column_stats = file.column_stats.clone();
        if gone && record_count.is_none() {
            return Err(invalid("is gone from storage (removed by a later source commit and cleaned) and the source records no row count for it".into()));
        }
        let mut found = BTreeSet::new();
        let needs_stats = record_count.is_none() || column_stats.is_empty();
        if !gone
            && file.format == FileFormat::Parquet
            && (needs_stats || (inspect.is_some() && self.verify_files))
        {
            let meta = read_footer(&self.store, &file.path, file.size_bytes)
                .await
                .map_err(|e| invalid(e.to_string()))?;
            if let Some(mapping) = inspect {
                found = findings(&meta, schema, mapping);
            }
            let footer = footer_stats(&meta, &change.schema);
            if let Some(n) = record_count.filter(|n| *n != footer.record_count) {
                return Err(invalid(format!(
                    "the source records {n} rows, the footer {}",
                    footer.record_count
                )));
            }
            record_count = Some(footer.record_count);
            if column_stats.is_empty() {
                column_stats = footer.columns.into_iter().collect();
            }
        }
        match record_count {
            Some(n) => Ok((n, column_stats, found)),
            None => Err(invalid(
                "no record count, and only Parquet footers can be read".into(),
            )),
        }
    }

    /// A full-state change set as the difference from the current snapshot's live files.
    /// A file live on both sides is added again (its entry stays, see `plan_removals`;
    /// its delete files are replaced) when its deleted rows may differ: it has some in
    /// the source, or the table has delete files. Its vector may have changed while the
    /// commits between were lost. One whose size differs from its entry's, or that the
    /// source says was rewritten, is other content under the same path: its entry is
    /// replaced (removed, and added with the new size and statistics).
    pub(super) async fn as_difference(
        &self,
        change: &ChangeSet,
        current: Option<&TableMetadata>,
    ) -> Result<ChangeSet> {
        let (live, deletes) = self.live_files_and_deletes(current).await?;
        let wanted: HashSet<String> = change
            .added
            .iter()
            .map(|f| self.store.absolute(&f.path))
            .collect();
        let mut diff = change.clone();
        diff.full_state = false;
        let mut again = Vec::new();
        diff.added.retain(|f| {
            let Some(&size) = live.get(&self.store.absolute(&f.path)) else {
                return true;
            };
            let vector = !f.deleted_rows.is_empty() || f.deletion_vector.is_some();
            let rewritten = f.rewritten || size != f.size_bytes;
            if deletes || vector || rewritten {
                again.push(f.path.clone());
            }
            deletes || vector || rewritten
        });
        diff.removed = live.into_keys().filter(|p| !wanted.contains(p)).collect();
        diff.removed.extend(again);
        diff.removed.sort();
        Ok(diff)
    }
}

/// Column metrics of a data file, by field id.
#[derive(Default)]
struct Metrics {
    value_counts: HashMap<i32, u64>,
    null_counts: HashMap<i32, u64>,
    nan_counts: HashMap<i32, u64>,
    lower_bounds: HashMap<i32, Datum>,
    upper_bounds: HashMap<i32, Datum>,
}

/// The source's column stats (by column path) as Iceberg metrics of `schema`'s fields;
/// bounds truncated, and kept only in pairs.
fn metrics(
    change: &ChangeSet,
    schema: &IcebergSchema,
    stats: Vec<(String, ColumnStats)>,
) -> Metrics {
    let mut m = Metrics::default();
    for (path, stats) in stats {
        let (Some(field), Some(source_type)) = (
            schema.field_by_name(&path),
            change.schema.primitive_at(&path),
        ) else {
            continue;
        };
        let Type::Primitive(target) = field.field_type.as_ref() else {
            continue;
        };
        let id = field.id;
        stats.value_count.map(|v| m.value_counts.insert(id, v));
        stats.null_count.map(|v| m.null_counts.insert(id, v));
        stats.nan_count.map(|v| m.nan_counts.insert(id, v));
        let lower = stats
            .lower
            .map(truncate_lower)
            .and_then(|v| to_datum(&v, source_type, target).ok());
        let upper = stats
            .upper
            .and_then(truncate_upper)
            .and_then(|v| to_datum(&v, source_type, target).ok());
        if let (Some(lower), Some(upper)) = (lower, upper) {
            m.lower_bounds.insert(id, lower);
            m.upper_bounds.insert(id, upper);
        }
    }
    m
}

/// Whether fields hold a list, a map or a timestamp, whose files may be laid out in a way
/// some readers misread (see [`crate::spec::fidelity`]).
fn may_degrade(fields: &[NestedFieldRef]) -> bool {
    fields.iter().any(|f| match f.field_type.as_ref() {
        Type::List(_) | Type::Map(_) => true,
        Type::Struct(s) => may_degrade(s.fields()),
        Type::Primitive(p) => matches!(p, PrimitiveType::Timestamp | PrimitiveType::Timestamptz),
    })
}
