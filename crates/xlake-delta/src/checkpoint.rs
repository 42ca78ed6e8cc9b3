//! The `metaData` and `protocol` actions of a classic checkpoint, read without its file
//! list: only those two columns' chunks are fetched (byte ranges through
//! [`TableStore`]), so the cost does not grow with the table. An incremental sync needs
//! nothing else from the checkpoint.

use std::ops::Range;
use std::sync::Arc;

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
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let batches: Vec<_> = builder
        .with_projection(mask)
        .build()
        .map_err(|e| e.to_string())?
        .try_collect()
        .await
        .map_err(|e| e.to_string())?;
    // Rows as JSON actions (nulls left out), the action rows only, parsed like a commit.
    let mut text = Vec::new();
    {
        let mut writer = arrow_json::LineDelimitedWriter::new(&mut text);
        for batch in &batches {
            writer.write(batch).map_err(|e| e.to_string())?;
        }
        writer.finish().map_err(|e| e.to_string())?;
    }
    let text = String::from_utf8(text).map_err(|e| e.to_string())?;
    let actions: String = text
        .lines()
        .filter(|l| l.trim() != "{}")
        .map(|l| format!("{l}\n"))
        .collect();
    let commit = parse_commit(&actions)?;
    Ok((commit.metadata, commit.protocol))
}
