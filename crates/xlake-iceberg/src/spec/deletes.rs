//! Position-delete files: the rows a source deleted from a data file (a Delta deletion
//! vector) as an Iceberg v2 position-delete Parquet file (`file_path`, `pos`).

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;

use crate::spec::error::CodecError;

/// Reserved field id of `file_path` in position-delete files.
const FILE_PATH_ID: &str = "2147483546";
/// Reserved field id of `pos` in position-delete files.
const POS_ID: &str = "2147483545";

fn field(name: &str, data_type: DataType, id: &str) -> Field {
    Field::new(name, data_type, false)
        .with_metadata([("PARQUET:field_id".to_string(), id.to_string())].into())
}

/// The bytes of a position-delete file deleting `positions` (ascending) of `data_file`.
pub fn position_delete_file(data_file: &str, positions: &[u64]) -> Result<Bytes, CodecError> {
    let schema = Arc::new(Schema::new(vec![
        field("file_path", DataType::Utf8, FILE_PATH_ID),
        field("pos", DataType::Int64, POS_ID),
    ]));
    let pos: Vec<i64> = positions
        .iter()
        .map(|&p| i64::try_from(p).map_err(|_| format!("row position {p} is out of range")))
        .collect::<Result<_, _>>()?;
    let paths: ArrayRef = Arc::new(StringArray::from(vec![data_file; pos.len()]));
    let batch = RecordBatch::try_new(schema.clone(), vec![paths, Arc::new(Int64Array::from(pos))])
        .map_err(CodecError::library)?;
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, None).map_err(CodecError::library)?;
    writer.write(&batch).map_err(CodecError::library)?;
    writer.close().map_err(CodecError::library)?;
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[test]
    fn writes_file_path_and_pos_with_reserved_ids() {
        let bytes = position_delete_file("/t/a.parquet", &[1, 5]).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
        let schema = reader.schema().clone();
        assert_eq!(schema.field(0).metadata()["PARQUET:field_id"], FILE_PATH_ID);
        assert_eq!(schema.field(1).metadata()["PARQUET:field_id"], POS_ID);
        let batch = reader.build().unwrap().next().unwrap().unwrap();
        let pos = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(pos.values(), &[1, 5]);
    }
}
