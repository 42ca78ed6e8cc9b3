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
use parquet::arrow::arrow_reader::{ArrowReaderOptions, RowSelection, RowSelector};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use xlake_storage::TableStore;

use crate::action::{parse_commit, MetaData, Protocol};

/// One object of a [`TableStore`] as parquet's asynchronous input.
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
) -> Result<(Option<MetaData>, Option<Protocol>), String> {
    let file = StoreFile {
        store: store.clone(),
        path: path.to_string(),
        size,
    };
    let options = ArrowReaderOptions::new().with_page_index(true);
    let builder = ParquetRecordBatchStreamBuilder::new_with_options(file, options)
        .await
        .map_err(|e| e.to_string())?;
    let roots: Vec<usize> = builder
        .parquet_schema()
        .root_schema()
        .get_fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f.name(), "metaData" | "protocol"))
        .map(|(i, _)| i)
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.clone());
    // Only row groups where some metaData or protocol value is not null (by the column
    // statistics; a group without them is read): writers put these few rows together.
    let schema = builder.parquet_schema();
    let leaves: Vec<usize> = (0..schema.num_columns())
        .filter(|&i| roots.contains(&schema.get_column_root_idx(i)))
        .collect();
    let groups: Vec<usize> = builder
        .metadata()
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
        .collect();
    let selection = pages_with_values(builder.metadata(), &groups, &leaves);
    let mut batches = builder
        .with_projection(mask)
        .with_row_groups(groups)
        .with_row_selection(selection)
        .with_batch_size(8192)
        .build()
        .map_err(|e| e.to_string())?;
    // Writers put these two rows first: stop reading once both are found.
    let (mut metadata, mut protocol) = (None, None);
    while let Some(batch) = batches.try_next().await.map_err(|e| e.to_string())? {
        let commit = parse_commit(&action_rows(&batch)?)?;
        metadata = metadata.or(commit.metadata);
        protocol = protocol.or(commit.protocol);
        if metadata.is_some() && protocol.is_some() {
            break;
        }
    }
    Ok((metadata, protocol))
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
            Some((column, pages))
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

/// The rows of `batch` holding an action, as JSON lines (nulls left out).
fn action_rows(batch: &RecordBatch) -> Result<String, String> {
    // Rows where every action is null are most rows; leave them out first.
    let keep = BooleanArray::from(
        (0..batch.num_rows())
            .map(|i| batch.columns().iter().any(|c| c.is_valid(i)))
            .collect::<Vec<_>>(),
    );
    let rows = filter_record_batch(batch, &keep).map_err(|e| e.to_string())?;
    let mut text = Vec::new();
    let mut writer = arrow_json::LineDelimitedWriter::new(&mut text);
    writer.write(&rows).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    String::from_utf8(text).map_err(|e| e.to_string())
}
