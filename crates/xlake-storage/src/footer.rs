//! Parquet footers fetched through a [`TableStore`]: the one place that knows how a
//! footer is laid out, for the target (stats of files a source described without them) and
//! for sources that read files' schemas.

use parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};

use crate::TableStore;

const FOOTER_SIZE: usize = 8;
/// Most footers fit in one read of this many bytes from the end.
const FIRST_READ: u64 = 64 * 1024;

/// Fetch and decode the footer of the Parquet file at `path` (`size` bytes long).
pub async fn read_footer(
    store: &TableStore,
    path: &str,
    size: u64,
) -> Result<ParquetMetaData, String> {
    if size < (FOOTER_SIZE as u64) + 4 {
        return Err(format!("{size} bytes is too short for a Parquet file"));
    }
    let first = size.min(FIRST_READ);
    let mut suffix = store
        .get_range(path, size - first..size)
        .await
        .map_err(|e| e.to_string())?;
    let tail: [u8; FOOTER_SIZE] = suffix[suffix.len() - FOOTER_SIZE..]
        .try_into()
        .map_err(|_| "short read of the footer".to_string())?;
    let tail = FooterTail::try_new(&tail).map_err(|e| format!("not a Parquet file: {e}"))?;
    if tail.is_encrypted_footer() {
        return Err("encrypted Parquet footers are not supported".into());
    }
    let needed = (tail.metadata_length() + FOOTER_SIZE) as u64;
    if needed > size {
        return Err(format!(
            "footer claims {needed} bytes in a {size}-byte file"
        ));
    }
    if needed > first {
        suffix = store
            .get_range(path, size - needed..size)
            .await
            .map_err(|e| e.to_string())?;
    }
    let start = suffix.len() - needed as usize;
    ParquetMetaDataReader::decode_metadata(&suffix[start..suffix.len() - FOOTER_SIZE])
        .map_err(|e| format!("corrupt Parquet footer: {e}"))
}
