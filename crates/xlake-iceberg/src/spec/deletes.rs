//! Position-delete files: the rows a source deleted from a data file (a Delta deletion
//! vector) as an Iceberg v2 position-delete Parquet file (`file_path`, `pos`), and such a
//! file read back (an Iceberg source's v2 deletes), grouped by data file.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{cast::AsArray, StringViewArray};
use arrow_array::{Array, ArrayRef, Int64Array, LargeStringArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use roaring::RoaringTreemap;

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

/// The rows a position-delete Parquet file deletes, by the data file (`file_path` as
/// written) they are in. Only `file_path` and `pos` are read (a file may also hold the
/// deleted `row`); an `Err` says what is wrong with the file: not Parquet, a column
/// missing or of another type, a null or negative position (Parquet's error beneath).
pub fn read_position_deletes(bytes: Bytes) -> Result<HashMap<String, RoaringTreemap>, CodecError> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(CodecError::within("not a Parquet file"))?;
    let schema = builder.schema().clone();
    let index = |name: &str| {
        schema
            .fields()
            .iter()
            .position(|f| f.name() == name)
            .ok_or_else(|| {
                format!("no `{name}` column (a position-delete file has `file_path` and `pos`)")
            })
    };
    let (path_at, pos_at) = (index("file_path")?, index("pos")?);
    let roots = builder.parquet_schema().columns().iter().enumerate();
    let wanted: Vec<usize> = roots
        .filter(|(_, c)| matches!(c.path().parts(), [n] if n == "file_path" || n == "pos"))
        .map(|(i, _)| i)
        .collect();
    let mask = ProjectionMask::leaves(builder.parquet_schema(), wanted);
    let reader = builder
        .with_projection(mask)
        .build()
        .map_err(CodecError::within("unreadable"))?;
    let (path_at, pos_at) = if path_at < pos_at { (0, 1) } else { (1, 0) };
    let mut out: HashMap<String, RoaringTreemap> = HashMap::new();
    for batch in reader {
        let batch = batch.map_err(CodecError::within("unreadable"))?;
        let paths = strings(batch.column(path_at).as_ref())?;
        let pos = batch
            .column(pos_at)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| format!("`pos` is {}, not a long", batch.column(pos_at).data_type()))?;
        for (i, path) in paths.into_iter().enumerate() {
            let (Some(path), true) = (path, pos.is_valid(i)) else {
                return Err(format!("row {i}: a null `file_path` or `pos`").into());
            };
            let p = u64::try_from(pos.value(i))
                .map_err(|_| format!("row {i}: position {} is negative", pos.value(i)))?;
            out.entry(path.to_string()).or_default().insert(p);
        }
    }
    Ok(out)
}

/// The values of a string column, in any of Arrow's string layouts.
fn strings(column: &dyn Array) -> Result<Vec<Option<&str>>, CodecError> {
    if let Some(a) = column.as_any().downcast_ref::<StringArray>() {
        return Ok(a.iter().collect());
    }
    if let Some(a) = column.as_any().downcast_ref::<LargeStringArray>() {
        return Ok(a.iter().collect());
    }
    if let Some(a) = column.as_any().downcast_ref::<StringViewArray>() {
        return Ok(a.iter().collect());
    }
    if let Some(a) = column.as_binary_opt::<i32>() {
        return a
            .iter()
            .map(|b| b.map(std::str::from_utf8).transpose())
            .collect::<Result<_, _>>()
            .map_err(CodecError::within("`file_path` is not UTF-8"));
    }
    Err(format!("`file_path` is {}, not a string", column.data_type()).into())
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

    #[test]
    fn reads_positions_back_by_data_file_and_refuses_other_files() {
        let bytes = position_delete_file("/t/a.parquet", &[1, 5]).unwrap();
        let read = read_position_deletes(bytes).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read["/t/a.parquet"].iter().collect::<Vec<_>>(), [1, 5]);
        let err = read_position_deletes(Bytes::from_static(b"PFA1")).unwrap_err();
        assert!(err.to_string().starts_with("not a Parquet file"), "{err}");
        let beneath = std::error::Error::source(&err);
        assert!(beneath.is_some_and(|e| e.is::<parquet::errors::ParquetError>()));
        // A data file (no `file_path`, `pos`) is not a position-delete file.
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(vec![1])) as ArrayRef],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let err = read_position_deletes(Bytes::from(out)).unwrap_err();
        assert!(
            err.to_string().starts_with("no `file_path` column"),
            "{err}"
        );
    }
}
