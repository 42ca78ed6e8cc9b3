//! Parquet footers fetched through a [`TableStore`]: the one place that knows how a
//! footer is laid out, for the target (stats of files a source described without them) and
//! for sources that read files' schemas.

use parquet::errors::ParquetError;
use parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};

use crate::{StorageError, TableStore};

/// Why a Parquet footer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FooterError {
    /// The file is shorter than a footer.
    #[error("{size} bytes is too short for a Parquet file")]
    TooShort {
        /// The file's size.
        size: u64,
    },
    /// Reading the file failed.
    #[error("{0}")]
    Storage(#[from] StorageError),
    /// The store returned fewer bytes than asked for.
    #[error("short read of the footer")]
    ShortRead,
    /// The last bytes are not a Parquet footer.
    #[error("not a Parquet file: {0}")]
    NotParquet(#[source] ParquetError),
    /// The footer is encrypted.
    #[error("encrypted Parquet footers are not supported")]
    Encrypted,
    /// The footer claims more bytes than the file has.
    #[error("footer claims {needed} bytes in a {size}-byte file")]
    Oversized {
        /// The bytes the footer claims.
        needed: u64,
        /// The file's size.
        size: u64,
    },
    /// The footer's metadata does not decode.
    #[error("corrupt Parquet footer: {0}")]
    Corrupt(#[source] ParquetError),
}

const FOOTER_SIZE: usize = 8;
/// Most footers fit in one read of this many bytes from the end.
const FIRST_READ: u64 = 64 * 1024;

/// Fetch and decode the footer of the Parquet file at `path` (`size` bytes long).
pub async fn read_footer(
    store: &TableStore,
    path: &str,
    size: u64,
) -> Result<ParquetMetaData, FooterError> {
    if size < (FOOTER_SIZE as u64) + 4 {
        return Err(FooterError::TooShort { size });
    }
    let first = size.min(FIRST_READ);
    let mut suffix = store.get_range(path, size - first..size).await?;
    let tail: [u8; FOOTER_SIZE] = suffix[suffix.len() - FOOTER_SIZE..]
        .try_into()
        .map_err(|_| FooterError::ShortRead)?;
    let tail = FooterTail::try_new(&tail).map_err(FooterError::NotParquet)?;
    if tail.is_encrypted_footer() {
        return Err(FooterError::Encrypted);
    }
    let needed = (tail.metadata_length() + FOOTER_SIZE) as u64;
    if needed > size {
        return Err(FooterError::Oversized { needed, size });
    }
    if needed > first {
        suffix = store.get_range(path, size - needed..size).await?;
    }
    let start = suffix.len() - needed as usize;
    ParquetMetaDataReader::decode_metadata(&suffix[start..suffix.len() - FOOTER_SIZE])
        .map_err(FooterError::Corrupt)
}
