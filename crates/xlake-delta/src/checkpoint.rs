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
use parquet::arrow::arrow_reader::ArrowReaderOptions;
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

/// The `metaData` and `protocol` actions in the classic checkpoint at `path`.
pub async fn metadata_and_protocol(
    store: &TableStore,
    path: &str,
) -> Result<(Option<MetaData>, Option<Protocol>), String> {
    let size = store
        .size(path)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{}: not found", store.absolute(path)))?;
    let file = StoreFile {
        store: store.clone(),
        path: path.to_string(),
        size,
    };
    let builder = ParquetRecordBatchStreamBuilder::new(file)
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
    let mut batches = builder
        .with_projection(mask)
        .with_row_groups(groups)
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
