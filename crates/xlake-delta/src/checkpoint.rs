//! The `metaData` and `protocol` actions of a classic checkpoint, read without its file
//! list: only those two columns' chunks are fetched (byte ranges through
//! [`TableStore`]), so the cost does not grow with the table. An incremental sync needs
//! nothing else from the checkpoint.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::{Array, BooleanArray, RecordBatch};
use arrow_select::filter::filter_record_batch;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, RowSelection, RowSelector,
};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::schema::types::SchemaDescriptor;
use xlake_storage::TableStore;

use crate::action::{parse_commit, MetaData, Protocol};
use crate::error::Reason;

/// One object of a [`TableStore`] as parquet's asynchronous input.
#[derive(Clone)]
struct StoreFile {
    store: TableStore,
    path: String,
    size: u64,
}

impl AsyncFileReader for StoreFile {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let metadata = ParquetMetaDataReader::new()
                .with_prefetch_hint(Some(64 * 1024))
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

/// The `metaData` and `protocol` actions in the classic checkpoint at `path` (`size`
/// bytes long).
pub async fn metadata_and_protocol(
    store: &TableStore,
    path: &str,
    size: u64,
) -> Result<(Option<MetaData>, Option<Protocol>), Reason> {
    let mut file = StoreFile {
        store: store.clone(),
        path: path.to_string(),
        size,
    };
    let options = ArrowReaderOptions::new().with_page_index(true);
    let meta = ArrowReaderMetadata::load_async(&mut file, options)
        .await
        .map_err(Reason::library)?;
    let schema = meta.parquet_schema();
    let roots: Vec<usize> = schema
        .root_schema()
        .get_fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f.name(), "metaData" | "protocol"))
        .map(|(i, _)| i)
        .collect();
    let leaves: Vec<usize> = (0..schema.num_columns())
        .filter(|&i| roots.contains(&schema.get_column_root_idx(i)))
        .collect();
    let groups = groups_with_values(meta.metadata(), &leaves);
    let pages = pages_with_values(meta.metadata(), &groups, &leaves);
    // First the rows holding either action, by one flat column of each (cheap to decode
    // over a million rows); then every column of the two, on those rows only.
    let selection = match markers(schema) {
        Some(markers) => rows_with_values(file.clone(), &meta, (&groups, pages), markers).await?,
        None => pages,
    };
    let mask = ProjectionMask::roots(schema, roots);
    let mut batches = ParquetRecordBatchStreamBuilder::new_with_metadata(file, meta.clone())
        .with_projection(mask)
        .with_row_groups(groups)
        .with_row_selection(selection)
        .with_batch_size(8192)
        .build()
        .map_err(Reason::library)?;
    let (mut metadata, mut protocol) = (None, None);
    while let Some(batch) = batches.try_next().await.map_err(Reason::library)? {
        let commit = parse_commit(&action_rows(&batch)?)?;
        metadata = metadata.or(commit.metadata);
        protocol = protocol.or(commit.protocol);
        if metadata.is_some() && protocol.is_some() {
            break;
        }
    }
    Ok((metadata, protocol))
}

/// The leaves set on every `metaData` row and every `protocol` row (`metaData.id`,
/// `protocol.minReaderVersion`: both required by the Delta protocol), if the file has
/// both as flat columns.
fn markers(schema: &SchemaDescriptor) -> Option<[usize; 2]> {
    let leaf = |path: &str| {
        (0..schema.num_columns()).find(|&i| {
            let c = schema.column(i);
            c.path().string() == path && c.max_rep_level() == 0
        })
    };
    Some([leaf("metaData.id")?, leaf("protocol.minReaderVersion")?])
}

/// The rows (of `groups`, within `pages`) where one of the `markers` leaves is set.
async fn rows_with_values(
    file: StoreFile,
    meta: &ArrowReaderMetadata,
    (groups, pages): (&[usize], RowSelection),
    markers: [usize; 2],
) -> Result<RowSelection, Reason> {
    let total: usize = groups
        .iter()
        .map(|&g| meta.metadata().row_group(g).num_rows() as usize)
        .sum();
    let mut batches = ParquetRecordBatchStreamBuilder::new_with_metadata(file, meta.clone())
        .with_projection(ProjectionMask::leaves(meta.parquet_schema(), markers))
        .with_row_groups(groups.to_vec())
        .with_row_selection(pages.clone())
        .with_batch_size(64 * 1024)
        .build()
        .map_err(Reason::library)?;
    // The selected rows' numbers, in order, to map batch rows back.
    let mut ranges = Vec::new();
    let mut at = 0;
    for s in pages.iter() {
        if !s.skip {
            ranges.push(at..at + s.row_count);
        }
        at += s.row_count;
    }
    let numbers: Vec<usize> = ranges.into_iter().flatten().collect();
    let mut found = std::collections::BTreeSet::new();
    let mut first = 0;
    while let Some(batch) = batches.try_next().await.map_err(Reason::library)? {
        for column in batch.columns() {
            // Set bits of the validity bitmap (almost every row is null).
            let valid: Vec<usize> = match column.logical_nulls() {
                Some(nulls) => nulls.valid_indices().collect(),
                None => (0..batch.num_rows()).collect(),
            };
            for i in valid {
                let row = numbers
                    .get(first + i)
                    .ok_or("checkpoint rows past the selection")?;
                found.insert(*row);
            }
        }
        first += batch.num_rows();
    }
    let found: Vec<usize> = found.into_iter().collect();
    Ok(select_rows(&found, total))
}

/// A selection of exactly `rows` (sorted) out of `total`.
fn select_rows(rows: &[usize], total: usize) -> RowSelection {
    let mut selectors = Vec::new();
    let mut at = 0;
    for &r in rows {
        if r > at {
            selectors.push(RowSelector::skip(r - at));
        }
        selectors.push(RowSelector::select(1));
        at = r + 1;
    }
    if total > at {
        selectors.push(RowSelector::skip(total - at));
    }
    RowSelection::from(selectors)
}

/// Row groups where some metaData or protocol value is not null (by the column
/// statistics; a group without them is read): writers put these few rows together.
fn groups_with_values(metadata: &ParquetMetaData, leaves: &[usize]) -> Vec<usize> {
    metadata
        .row_groups()
        .iter()
        .enumerate()
        .filter(|(_, rg)| {
            leaves.iter().any(|&c| {
                rg.column(c)
                    .statistics()
                    .and_then(|s| s.null_count_opt())
                    .is_none_or(|nulls| nulls < rg.num_rows() as u64)
            })
        })
        .map(|(i, _)| i)
        .collect()
}

/// Within the chosen row groups, the rows of the pages where some of `leaves` is not
/// null, by the page index (a checkpoint of a large table has a million rows; delta-rs
/// puts these two actions last); every row of a group without a page index.
fn pages_with_values(
    metadata: &ParquetMetaData,
    groups: &[usize],
    leaves: &[usize],
) -> RowSelection {
    let mut ranges: Vec<Range<usize>> = Vec::new();
    let mut offset = 0;
    for &g in groups {
        let rows = metadata.row_group(g).num_rows() as usize;
        let indexed = |c: usize| {
            let column = metadata.column_index()?.get(g)?.get(c)?;
            let pages = metadata.offset_index()?.get(g)?.get(c)?.page_locations();
            // A page index that is not in order within the group (a crafted or damaged
            // checkpoint) is not used: the whole group is read.
            let ordered = pages.first().is_some_and(|p| p.first_row_index == 0)
                && pages
                    .windows(2)
                    .all(|w| w[0].first_row_index < w[1].first_row_index)
                && pages
                    .last()
                    .is_some_and(|p| usize::try_from(p.first_row_index).is_ok_and(|i| i < rows));
            ordered.then_some((column, pages))
        };
        let mut group: Vec<Range<usize>> = Vec::new();
        for &c in leaves {
            let Some((column, pages)) = indexed(c) else {
                group.clear();
                group.push(0..rows);
                break;
            };
            for (i, page) in pages.iter().enumerate() {
                let start = page.first_row_index as usize;
                let end = pages
                    .get(i + 1)
                    .map_or(rows, |p| p.first_row_index as usize);
                let all_null = column
                    .null_count(i)
                    .is_some_and(|n| n as usize >= end - start);
                if !all_null {
                    group.push(start..end);
                }
            }
        }
        ranges.extend(group.into_iter().map(|r| r.start + offset..r.end + offset));
        offset += rows;
    }
    ranges.sort_by_key(|r| r.start);
    let mut selectors = Vec::new();
    let mut at = 0;
    for r in ranges {
        let start = r.start.max(at);
        if r.end <= start {
            continue;
        }
        if start > at {
            selectors.push(RowSelector::skip(start - at));
        }
        selectors.push(RowSelector::select(r.end - start));
        at = r.end;
    }
    if offset > at {
        selectors.push(RowSelector::skip(offset - at));
    }
    RowSelection::from(selectors)
}

/// Every action row of a whole classic checkpoint (`bytes`), as JSON lines (the shape of
/// a commit file's lines); for a log small enough to read whole (xlake's own).
pub(crate) fn all_action_rows(bytes: Bytes) -> Result<String, Reason> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(Reason::library)?
        .with_batch_size(8192)
        .build()
        .map_err(Reason::library)?;
    let mut text = String::new();
    for batch in reader {
        text.push_str(&action_rows(&batch.map_err(Reason::library)?)?);
    }
    Ok(text)
}

/// The rows of `batch` holding an action, as JSON lines (nulls left out).
fn action_rows(batch: &RecordBatch) -> Result<String, Reason> {
    // Rows where every action is null are most rows; leave them out first.
    let keep = BooleanArray::from(
        (0..batch.num_rows())
            .map(|i| batch.columns().iter().any(|c| c.is_valid(i)))
            .collect::<Vec<_>>(),
    );
    let rows = filter_record_batch(batch, &keep).map_err(Reason::library)?;
    let mut text = Vec::new();
    let mut writer = arrow_json::LineDelimitedWriter::new(&mut text);
    writer.write(&rows).map_err(Reason::library)?;
    writer.finish().map_err(Reason::library)?;
    String::from_utf8(text).map_err(Reason::library)
}
