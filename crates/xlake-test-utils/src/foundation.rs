//! The foundation test table: Parquet files of every common type, written with the
//! `parquet` crate (no Iceberg field ids, like any Hudi or Delta file), and a sequence of
//! change sets over them: append, append, overwrite of two files, delete-only, a column
//! added, and a compaction. It also writes `expected.json`: for every source commit, the
//! columns and rows an Iceberg reader must return at that snapshot.
//!
//! Shared by `tests/it/iceberg_roundtrip.rs` (read back with iceberg-rust) and
//! `examples/foundation_table.rs` (the table the interop suite reads with pyiceberg,
//! DuckDB and Spark).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Int32Builder, ListBuilder, MapBuilder, MapFieldNames, StringBuilder};
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
    Int32Array, Int64Array, RecordBatch, StringArray, StructArray, TimestampMicrosecondArray,
};
use arrow_schema::{
    DataType as ArrowType, Field as ArrowField, Fields, Schema as ArrowSchema,
    TimeUnit as ArrowUnit,
};
use parquet::arrow::ArrowWriter;
use serde_json::{json, Value as Json};
use xlake_model::{
    ChangeSet, DataFile, DataType, Field, PartitionField, PartitionSpec, PrimitiveType, Schema,
    SourceCommit, SourceFormat, TimeUnit, Transform, Value,
};

/// One row of the test table.
#[derive(Clone, Debug)]
pub struct Row {
    /// The key; every other column is derived from it.
    pub id: i64,
    /// The partition value.
    pub part: &'static str,
    /// Microseconds since the epoch; all rows of a file share a day.
    pub ts: i64,
    /// The `extra` column, added by commit c5.
    pub extra: Option<String>,
}

const DAY_US: i64 = 86_400_000_000;
/// 2024-03-01T00:00:00Z in microseconds.
const BASE_US: i64 = 1_709_251_200_000_000;

impl Row {
    fn b(&self) -> Option<bool> {
        (self.id % 3 != 0).then_some(self.id % 2 == 0)
    }
    fn i(&self) -> Option<i32> {
        (self.id % 4 != 1).then_some(self.id as i32 * 10 - 25)
    }
    fn f(&self) -> f32 {
        self.id as f32 * 1.5
    }
    fn d(&self) -> Option<f64> {
        (self.id % 5 != 2).then_some(self.id as f64 * -0.25)
    }
    /// Unscaled decimal(10,2).
    fn dec(&self) -> i128 {
        i128::from(self.id) * 12_345 - 500
    }
    fn date(&self) -> i32 {
        (self.ts.div_euclid(DAY_US)) as i32
    }
    fn tstz(&self) -> i64 {
        self.ts + 123_456
    }
    fn s(&self) -> Option<String> {
        (self.id % 6 != 4).then(|| {
            format!(
                "row-{}-{}",
                self.id,
                "x".repeat((self.id % 3) as usize * 10)
            )
        })
    }
    fn bin(&self) -> Vec<u8> {
        vec![self.id as u8, 0xFF, 0x00]
    }
    fn st(&self) -> Option<(Option<i32>, String)> {
        (self.id % 7 != 3).then(|| {
            (
                (self.id % 2 == 0).then_some(self.id as i32),
                format!("s{}", self.id),
            )
        })
    }
    fn l(&self) -> Option<Vec<i32>> {
        (self.id % 5 != 0).then(|| (0..(self.id % 3) as i32).collect())
    }
    fn m(&self) -> Vec<(String, i32)> {
        (0..(self.id % 2 + 1))
            .map(|k| (format!("k{k}"), k as i32 + self.id as i32))
            .collect()
    }

    /// The row as every engine's output is normalised to (see tests/interop/rows.py).
    pub fn expected(&self, with_extra: bool) -> Json {
        let micros_iso = |us: i64, zone: bool| {
            let dt = chrono::DateTime::from_timestamp_micros(us).unwrap();
            let s = dt.naive_utc().format("%Y-%m-%dT%H:%M:%S%.f").to_string();
            if zone {
                format!("{s}+00:00")
            } else {
                s
            }
        };
        let dec = {
            let v = self.dec();
            let sign = if v < 0 { "-" } else { "" };
            format!("{sign}{}.{:02}", v.abs() / 100, v.abs() % 100)
        };
        let mut row = json!({
            "id": self.id,
            "part": self.part,
            "b": self.b(),
            "i": self.i(),
            "f": self.f(),
            "d": self.d(),
            "dec": dec,
            "dt": chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap().checked_add_days(chrono::Days::new(self.date() as u64)).unwrap().to_string(),
            "ts": micros_iso(self.ts, false),
            "tstz": micros_iso(self.tstz(), true),
            "s": self.s(),
            "bin": self.bin().iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "st": self.st().map(|(x, y)| json!({"x": x, "y": y})),
            "l": self.l(),
            "m": self.m().into_iter().collect::<BTreeMap<_, _>>(),
        });
        if with_extra {
            row["extra"] = json!(self.extra);
        }
        row
    }
}

/// The neutral schema, with or without the `extra` column added by commit c5.
pub fn model_schema(with_extra: bool) -> Schema {
    let mut fields = vec![
        Field::required("id", PrimitiveType::Long).with_doc("row key"),
        Field::required("part", PrimitiveType::String),
        Field::optional("b", PrimitiveType::Boolean),
        Field::optional("i", PrimitiveType::Int),
        Field::required("f", PrimitiveType::Float),
        Field::optional("d", PrimitiveType::Double),
        Field::required(
            "dec",
            PrimitiveType::Decimal {
                precision: 10,
                scale: 2,
            },
        ),
        Field::required("dt", PrimitiveType::Date),
        Field::required(
            "ts",
            PrimitiveType::Timestamp {
                unit: TimeUnit::Micros,
                with_zone: false,
            },
        ),
        Field::required(
            "tstz",
            PrimitiveType::Timestamp {
                unit: TimeUnit::Micros,
                with_zone: true,
            },
        ),
        Field::optional("s", PrimitiveType::String),
        Field::required("bin", PrimitiveType::Binary),
        Field::new(
            "st",
            DataType::Struct(vec![
                Field::optional("x", PrimitiveType::Int),
                Field::required("y", PrimitiveType::String),
            ]),
            true,
        ),
        Field::new(
            "l",
            DataType::List(Box::new(Field::optional("element", PrimitiveType::Int))),
            true,
        ),
        Field::new(
            "m",
            DataType::Map {
                key: Box::new(Field::required("key", PrimitiveType::String)),
                value: Box::new(Field::optional("value", PrimitiveType::Int)),
            },
            false,
        ),
    ];
    if with_extra {
        fields.push(Field::optional("extra", PrimitiveType::String));
    }
    Schema::new(fields)
}

/// Identity on `part`, day on `ts`.
pub fn model_spec() -> PartitionSpec {
    PartitionSpec::new(vec![
        PartitionField::identity("part"),
        PartitionField::new("ts", "ts_day", Transform::Day),
    ])
}

fn arrow_schema(with_extra: bool) -> Arc<ArrowSchema> {
    let mut fields = vec![
        ArrowField::new("id", ArrowType::Int64, false),
        ArrowField::new("part", ArrowType::Utf8, false),
        ArrowField::new("b", ArrowType::Boolean, true),
        ArrowField::new("i", ArrowType::Int32, true),
        ArrowField::new("f", ArrowType::Float32, false),
        ArrowField::new("d", ArrowType::Float64, true),
        ArrowField::new("dec", ArrowType::Decimal128(10, 2), false),
        ArrowField::new("dt", ArrowType::Date32, false),
        ArrowField::new(
            "ts",
            ArrowType::Timestamp(ArrowUnit::Microsecond, None),
            false,
        ),
        ArrowField::new(
            "tstz",
            ArrowType::Timestamp(ArrowUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        ArrowField::new("s", ArrowType::Utf8, true),
        ArrowField::new("bin", ArrowType::Binary, false),
        ArrowField::new("st", ArrowType::Struct(st_fields()), true),
        ArrowField::new(
            "l",
            ArrowType::List(Arc::new(ArrowField::new("element", ArrowType::Int32, true))),
            true,
        ),
        ArrowField::new(
            "m",
            ArrowType::Map(
                Arc::new(ArrowField::new(
                    "key_value",
                    ArrowType::Struct(Fields::from(vec![
                        ArrowField::new("key", ArrowType::Utf8, false),
                        ArrowField::new("value", ArrowType::Int32, true),
                    ])),
                    false,
                )),
                false,
            ),
            false,
        ),
    ];
    if with_extra {
        fields.push(ArrowField::new("extra", ArrowType::Utf8, true));
    }
    Arc::new(ArrowSchema::new(fields))
}

fn st_fields() -> Fields {
    Fields::from(vec![
        ArrowField::new("x", ArrowType::Int32, true),
        ArrowField::new("y", ArrowType::Utf8, false),
    ])
}

/// The list column `l`.
fn list_column(rows: &[Row]) -> ArrayRef {
    let mut lists = ListBuilder::new(Int32Builder::new()).with_field(Arc::new(ArrowField::new(
        "element",
        ArrowType::Int32,
        true,
    )));
    for r in rows {
        match r.l() {
            Some(v) => lists.append_value(v.into_iter().map(Some)),
            None => lists.append_null(),
        }
    }
    Arc::new(lists.finish())
}

/// The map column `m`.
fn map_column(rows: &[Row]) -> ArrayRef {
    let names = MapFieldNames {
        entry: "key_value".into(),
        key: "key".into(),
        value: "value".into(),
    };
    let mut maps = MapBuilder::new(Some(names), StringBuilder::new(), Int32Builder::new());
    for r in rows {
        for (k, v) in r.m() {
            maps.keys().append_value(k);
            maps.values().append_value(v);
        }
        maps.append(true).unwrap();
    }
    Arc::new(maps.finish())
}

/// The struct column `st`.
fn struct_column(rows: &[Row]) -> ArrayRef {
    let st_x: ArrayRef = Arc::new(Int32Array::from(
        rows.iter()
            .map(|r| r.st().and_then(|s| s.0))
            .collect::<Vec<_>>(),
    ));
    let st_y: ArrayRef = Arc::new(StringArray::from(
        rows.iter()
            .map(|r| r.st().map(|s| s.1).unwrap_or_default())
            .collect::<Vec<_>>(),
    ));
    let st_nulls = arrow_array::builder::BooleanBufferBuilder::new(rows.len());
    let mut st_nulls = st_nulls;
    rows.iter().for_each(|r| st_nulls.append(r.st().is_some()));
    Arc::new(StructArray::new(
        st_fields(),
        vec![st_x, st_y],
        Some(st_nulls.finish().into()),
    ))
}

fn batch(rows: &[Row], with_extra: bool) -> RecordBatch {
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(
            rows.iter().map(|r| r.id).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            rows.iter().map(|r| r.part).collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from(
            rows.iter().map(Row::b).collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            rows.iter().map(Row::i).collect::<Vec<_>>(),
        )),
        Arc::new(Float32Array::from(
            rows.iter().map(Row::f).collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            rows.iter().map(Row::d).collect::<Vec<_>>(),
        )),
        Arc::new(
            Decimal128Array::from(rows.iter().map(Row::dec).collect::<Vec<_>>())
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ),
        Arc::new(Date32Array::from(
            rows.iter().map(Row::date).collect::<Vec<_>>(),
        )),
        Arc::new(TimestampMicrosecondArray::from(
            rows.iter().map(|r| r.ts).collect::<Vec<_>>(),
        )),
        Arc::new(
            TimestampMicrosecondArray::from(rows.iter().map(Row::tstz).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ),
        Arc::new(StringArray::from(
            rows.iter().map(Row::s).collect::<Vec<_>>(),
        )),
        Arc::new(BinaryArray::from_iter_values(rows.iter().map(Row::bin))),
        struct_column(rows),
        list_column(rows),
        map_column(rows),
    ];
    if with_extra {
        columns.push(Arc::new(StringArray::from(
            rows.iter().map(|r| r.extra.clone()).collect::<Vec<_>>(),
        )));
    }
    RecordBatch::try_new(arrow_schema(with_extra), columns).unwrap()
}

/// Write rows as `data/<name>.parquet` under the table root; return the neutral DataFile
/// (no record count and no stats: the target must read the footer).
fn write_file(root: &Path, name: &str, rows: &[Row], with_extra: bool) -> DataFile {
    let rel = format!("data/part={}/{name}.parquet", rows[0].part);
    let path = root.join(&rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::File::create(&path).unwrap();
    let mut writer = ArrowWriter::try_new(file, arrow_schema(with_extra), None).unwrap();
    writer.write(&batch(rows, with_extra)).unwrap();
    writer.close().unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    DataFile::parquet(rel, size, None).with_partition(vec![
        Some(Value::String(rows[0].part.to_string())),
        Some(Value::Date(rows[0].date())),
    ])
}

fn rows(ids: std::ops::Range<i64>, part: &'static str, day: i64, extra: bool) -> Vec<Row> {
    ids.map(|id| Row {
        id,
        part,
        ts: BASE_US + day * DAY_US + id * 1_000_001,
        extra: extra.then(|| format!("e{id}")),
    })
    .collect()
}

fn commit(id: &str, action: &str, minutes: i64) -> SourceCommit {
    SourceCommit {
        format: SourceFormat::new("HUDI"),
        id: id.into(),
        action: action.into(),
        requested_ms: None,
        commit_time_ms: 1_709_300_000_000 + minutes * 60_000,
    }
}

/// What a reader must see at each source commit.
pub struct Expected {
    /// The change sets, in commit order, as a source would hand them to the target.
    pub change_sets: Vec<ChangeSet>,
    /// Per change set: (columns, rows as JSON), rows sorted by id.
    pub snapshots: Vec<(Vec<String>, Vec<Json>)>,
}

/// Write the data files under `root` and return the change sets and expected rows.
pub fn build(root: &Path) -> Expected {
    let f1 = rows(0..5, "a", 0, false);
    let f2 = rows(5..9, "b", 0, false);
    let f3 = rows(9..12, "a", 1, false);
    let f4 = rows(20..23, "a", 0, false);
    let f5 = rows(30..34, "b", 2, true);
    let d1 = write_file(root, "f1", &f1, false);
    let d2 = write_file(root, "f2", &f2, false);
    let d3 = write_file(root, "f3", &f3, false);
    let d4 = write_file(root, "f4", &f4, false);
    let d5 = write_file(root, "f5", &f5, true);
    // Compaction of f4: the same rows rewritten into one new file.
    let d6 = write_file(root, "f6", &f4, false);

    let (old, new) = (model_schema(false), model_schema(true));
    let cs = |c: SourceCommit,
              schema: &Schema,
              added: Vec<DataFile>,
              removed: Vec<&DataFile>,
              data_change: bool| {
        let mut change = ChangeSet::new(c, schema.clone(), model_spec());
        change.added = added;
        change.removed = removed.into_iter().map(|d| d.path.clone()).collect();
        change.data_change = data_change;
        change
    };
    let change_sets = vec![
        cs(
            commit("c1", "commit", 0),
            &old,
            vec![d1.clone(), d2.clone()],
            vec![],
            true,
        ),
        cs(
            commit("c2", "commit", 1),
            &old,
            vec![d3.clone()],
            vec![],
            true,
        ),
        cs(
            commit("c3", "replacecommit", 2),
            &old,
            vec![d4.clone()],
            vec![&d1, &d2],
            true,
        ),
        cs(commit("c4", "commit", 3), &old, vec![], vec![&d3], true),
        cs(
            commit("c5", "commit", 4),
            &new,
            vec![d5.clone()],
            vec![],
            true,
        ),
        cs(
            commit("c6", "replacecommit", 5),
            &new,
            vec![d6.clone()],
            vec![&d4],
            false,
        ),
    ];
    let live: Vec<Vec<&Vec<Row>>> = vec![
        vec![&f1, &f2],
        vec![&f1, &f2, &f3],
        vec![&f3, &f4],
        vec![&f4],
        vec![&f4, &f5],
        vec![&f4, &f5],
    ];
    Expected {
        change_sets,
        snapshots: expected_rows(live),
    }
}

/// Per source commit, the columns and the rows (sorted by id) of the `live` files: the
/// fifth commit adds the column `extra`, which only its own file's rows hold.
fn expected_rows(live: Vec<Vec<&Vec<Row>>>) -> Vec<(Vec<String>, Vec<Json>)> {
    live.into_iter()
        .enumerate()
        .map(|(i, files)| {
            let with_extra = i >= 4;
            let schema = model_schema(with_extra);
            let columns = schema.fields.iter().map(|f| f.name.clone()).collect();
            let mut rows: Vec<Json> = files
                .into_iter()
                .flatten()
                .map(|r| {
                    let mut r = r.clone();
                    if !with_extra || r.id < 30 {
                        r.extra = None;
                    }
                    r.expected(with_extra)
                })
                .collect();
            rows.sort_by_key(|r| r["id"].as_i64());
            (columns, rows)
        })
        .collect()
}

/// `expected.json` for the interop suite.
pub fn expected_json(table: &Path, expected: &Expected) -> Json {
    json!({
        "table": table.to_str().unwrap(),
        "commits": expected.change_sets.iter().zip(&expected.snapshots).map(|(c, (columns, rows))| json!({
            "source_id": c.commit.id,
            "commit_time_ms": c.commit.commit_time_ms,
            "columns": columns,
            "rows": rows,
        })).collect::<Vec<_>>(),
    })
}
