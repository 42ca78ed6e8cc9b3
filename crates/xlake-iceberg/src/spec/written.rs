//! Files an iceberg-rust writer wrote to its in-memory [`FileIO`], read back and copied
//! into the table's own [`TableStore`], so there is one I/O stack.

use bytes::Bytes;
use iceberg::io::FileIO;
use xlake_storage::TableStore;

use crate::spec::error::CodecError;

/// The bytes an iceberg-rust writer left at `location` in the in-memory `io`.
pub(crate) async fn written(io: &FileIO, location: &str) -> Result<Bytes, CodecError> {
    let input = io.new_input(location).map_err(CodecError::library)?;
    input.read().await.map_err(CodecError::library)
}

/// Copy a file written to the in-memory `io` into the store.
pub(crate) async fn persist(
    store: &TableStore,
    io: &FileIO,
    location: &str,
) -> Result<(), CodecError> {
    let bytes = written(io, location).await?;
    store
        .put(location, bytes)
        .await
        .map_err(CodecError::library)
}
