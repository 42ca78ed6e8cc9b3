//! Format version 3: which version a commit writes (new tables, upgrades in place), and
//! the deletion vectors of a snapshot as one Puffin file (see [`crate::spec::puffin`]).
//!
//! A table stays at the version it has unless the operator asks for a higher one, which
//! upgrades it in the next snapshot (never silently: the upgrade is logged, and the sync
//! engine reports it); a lower one is refused. Position-delete files already in a table
//! stay valid for the snapshots that hold them; a v3 table gets no new ones.

use std::collections::HashSet;

use futures::StreamExt;
use iceberg::spec::{
    DataContentType, DataFile as IcebergDataFile, DataFileBuilder, DataFileFormat, FormatVersion,
    PartitionSpec as IcebergSpec, Struct, TableMetadata, TableMetadataBuilder,
};
use xlake_model::{ChangeSet, DataType, Field, PrimitiveType, TimeUnit};

use crate::error::{IcebergError, Result};
use crate::ops::table::{IcebergTable, LoadedTable, FILE_CHECK_CONCURRENCY};
use crate::spec::error::CodecError;
use crate::spec::layout::{self, metadata_file};
use crate::spec::puffin::{frame_positions, read_vector, write_puffin, VectorBlob};

/// The format version xlake writes when nothing else is asked for.
pub const DEFAULT_FORMAT_VERSION: FormatVersion = FormatVersion::V2;

/// The number of a format version (`FormatVersion` displays as `v2`).
pub fn version_number(v: FormatVersion) -> u8 {
    match v {
        FormatVersion::V1 => 1,
        FormatVersion::V2 => 2,
        FormatVersion::V3 => 3,
    }
}

/// A format version xlake does not write: it writes 2 and 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("format version {0} is not supported (2 or 3)")]
pub struct UnsupportedVersion(pub u8);

/// The format version `n` (2 or 3).
pub fn format_version(n: u8) -> std::result::Result<FormatVersion, UnsupportedVersion> {
    match n {
        2 => Ok(FormatVersion::V2),
        3 => Ok(FormatVersion::V3),
        other => Err(UnsupportedVersion(other)),
    }
}

/// The first column of `schema` whose type needs format version 3 (nanosecond
/// timestamps), and why: a v2 table refuses it.
pub fn needs_v3(schema: &xlake_model::Schema) -> Option<(String, String)> {
    fn walk(fields: &[Field], prefix: &str) -> Option<String> {
        fields.iter().find_map(|f| {
            let path = format!("{prefix}{}", f.name);
            match &f.data_type {
                DataType::Primitive(PrimitiveType::Timestamp {
                    unit: TimeUnit::Nanos,
                    ..
                }) => Some(path),
                DataType::Primitive(_) => None,
                DataType::Struct(children) => walk(children, &format!("{path}.")),
                DataType::List(element) => walk(std::slice::from_ref(element), &format!("{path}.")),
                DataType::Map { key, value } => {
                    walk(&[(**key).clone(), (**value).clone()], &format!("{path}."))
                }
            }
        })
    }
    walk(&schema.fields, "").map(|column| {
        (
            column,
            "nanosecond timestamps need Iceberg format version 3 (--format-version 3); this table is version 2".to_string(),
        )
    })
}

/// One added file's deletion vector: read, to be copied with its data file's partition,
/// or gone from storage and named where it was (see `gone_vector`).
enum Vector {
    Read(VectorBlob, Struct),
    Gone(Box<IcebergDataFile>),
}

impl IcebergTable {
    /// The same table, writing format version `n` (2 or 3); any other number is
    /// [`IcebergError::FormatVersion`].
    pub fn format_version_number(self, n: u8) -> Result<Self> {
        let version = format_version(n).map_err(|reason| IcebergError::FormatVersion {
            table: self.table(),
            asked: n,
            reason: reason.to_string(),
        })?;
        Ok(self.format_version(version))
    }

    /// The version the next snapshot on `current` is written in: the table's own, or the
    /// one asked for if higher (an upgrade); a lower one asked for is refused.
    pub(crate) fn target_version(&self, current: Option<&TableMetadata>) -> Result<FormatVersion> {
        let Some(m) = current else {
            return Ok(self.format_version.unwrap_or(DEFAULT_FORMAT_VERSION));
        };
        match self.format_version {
            Some(asked) if asked < m.format_version() => Err(IcebergError::FormatVersion {
                table: self.table(),
                asked: version_number(asked),
                reason: format!(
                    "the table is at format version {}, and versions are never downgraded",
                    version_number(m.format_version())
                ),
            }),
            Some(asked) => Ok(asked.max(m.format_version())),
            None => Ok(m.format_version()),
        }
    }

    /// Upgrade `loaded` in place to the format version asked for, if it is older: a new
    /// `vN.metadata.json` with the same snapshots (position-delete files stay valid for the
    /// snapshots holding them; later vectors are Puffin). Returns the new version, or `None`
    /// when there was nothing to upgrade.
    pub async fn upgrade(&self, loaded: &LoadedTable) -> Result<Option<LoadedTable>> {
        let from = loaded.metadata.format_version();
        let to = self.target_version(Some(&loaded.metadata))?;
        if to <= from {
            return Ok(None);
        }
        // Its `vN` is a commit like any other: a store that would overwrite it is refused.
        self.store.verify_put_if_absent().await?;
        // Every snapshot is rewritten in the new format (a v1 snapshot is not valid v2
        // text as it stands), so none is carried.
        let whole = self.whole(loaded).await?;
        let loaded = &whole;
        let previous = self.store.absolute(&metadata_file(loaded.version));
        let metadata =
            TableMetadataBuilder::new_from_metadata(loaded.metadata.clone(), Some(previous))
                .upgrade_format_version(to)
                .and_then(|b| b.build())
                .map_err(self.spec_error("upgrade the format version"))?
                .metadata;
        let version = loaded.version + 1;
        self.publish(version, &metadata, &loaded.history)
            .await
            .map_err(|u| u.error)?;
        tracing::warn!(table = %self.table(), version, from = %from, to = %to, "upgraded the Iceberg table's format version");
        Ok(Some(LoadedTable {
            version,
            metadata,
            history: loaded.history.clone(),
            hint_stale: false,
        }))
    }

    /// The deletion vectors of the change set's added files (`data`, in the same order),
    /// as one Puffin file and one position-delete entry per vector. Stored vectors are
    /// copied, checked, never decoded into rows; one whose file is gone is named where
    /// it was, if a later source commit removes its data file (see `gone_vector`).
    pub(crate) async fn vector_deletes(
        &self,
        change: &ChangeSet,
        data: &[IcebergDataFile],
        spec: &IcebergSpec,
    ) -> Result<Vec<IcebergDataFile>> {
        let invalid = |path: &str, reason: CodecError| IcebergError::InvalidDataFile {
            table: self.table(),
            commit: change.commit.id.clone(),
            path: path.to_string(),
            reason,
        };
        let mut seen = HashSet::new();
        let with_vectors: Vec<_> = change
            .added
            .iter()
            .zip(data)
            .filter(|(f, _)| f.deletion_vector.is_some() || !f.deleted_rows.is_empty())
            .collect();
        for (_, d) in &with_vectors {
            if !seen.insert(d.file_path()) {
                return Err(invalid(
                    d.file_path(),
                    "two deletion vectors for one data file in one commit".into(),
                ));
            }
        }
        if with_vectors.is_empty() {
            return Ok(Vec::new());
        }
        let results: Vec<Result<Vector>> = futures::stream::iter(with_vectors.iter())
            .map(|(f, d)| async move {
                let location = d.file_path();
                let framed = match &f.deletion_vector {
                    Some(v) => read_vector(&self.store, v, d.record_count()).await,
                    None => frame_positions(&f.deleted_rows),
                };
                let framed = match framed {
                    Ok(framed) => framed,
                    Err(e) => {
                        let gone = self
                            .gone_vector(f, (d, spec.spec_id()), true, &|r| {
                                invalid(location, r.into())
                            })
                            .await?;
                        return gone
                            .map(|g| Vector::Gone(Box::new(g)))
                            .ok_or_else(|| invalid(location, e));
                    }
                };
                let cardinality = match &f.deletion_vector {
                    Some(v) => v.cardinality,
                    None => f.deleted_rows.len() as u64,
                };
                let blob = VectorBlob {
                    referenced_data_file: location.to_string(),
                    cardinality,
                    framed,
                };
                Ok(Vector::Read(blob, d.partition().clone()))
            })
            .buffered(FILE_CHECK_CONCURRENCY)
            .collect()
            .await;
        let (mut blobs, mut gone) = (Vec::new(), Vec::new());
        for vector in results {
            match vector? {
                Vector::Read(blob, partition) => blobs.push((blob, partition)),
                Vector::Gone(entry) => gone.push(*entry),
            }
        }
        if !blobs.is_empty() {
            gone.extend(self.write_vectors(blobs, spec.spec_id()).await?);
        }
        Ok(gone)
    }

    /// `blobs` written into one new Puffin file, each described as the position-delete
    /// entry of its data file (with that file's `partition`, in spec `spec_id`).
    pub(crate) async fn write_vectors(
        &self,
        blobs: Vec<(VectorBlob, Struct)>,
        spec_id: i32,
    ) -> Result<Vec<IcebergDataFile>> {
        let puffin = self.store.absolute(&layout::puffin_file());
        let (blobs, partitions): (Vec<VectorBlob>, Vec<Struct>) = blobs.into_iter().unzip();
        let described: Vec<(String, u64)> = blobs
            .iter()
            .map(|b| (b.referenced_data_file.clone(), b.cardinality))
            .collect();
        let placed = write_puffin(&self.store, &puffin, blobs)
            .await
            .map_err(self.write_failed(&puffin))?;
        let size = self
            .store
            .size(&puffin)
            .await?
            .ok_or_else(|| self.corrupt(&puffin, "just written, and gone"))?;
        described
            .into_iter()
            .zip(partitions)
            .zip(placed)
            .map(|(((referenced, cardinality), partition), (offset, len))| {
                DataFileBuilder::default()
                    .content(DataContentType::PositionDeletes)
                    .file_path(puffin.clone())
                    .file_format(DataFileFormat::Puffin)
                    .partition(partition)
                    .partition_spec_id(spec_id)
                    .record_count(cardinality)
                    .file_size_in_bytes(size)
                    .referenced_data_file(Some(referenced))
                    .content_offset(Some(offset as i64))
                    .content_size_in_bytes(Some(len as i64))
                    .build()
                    .map_err(|e| self.write_failed(&puffin)(e.to_string()))
            })
            .collect()
    }
}
