//! `xlake demo DIR`: a bundled Hudi table (table version 9, copy-on-write, 12 instants:
//! upserts, deletes, an insert_overwrite of a partition and a clustering) unpacked into a
//! new or empty folder. Nothing is ever deleted or overwritten: a folder with anything in
//! it is refused before anything is written.

use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};

/// The table, as the zip in `tests/data/hudi/` that the Hudi tests also use.
const TABLE_ZIP: &[u8] =
    include_bytes!("../tests/data/hudi/sample_table_cow_v9_txns_simple_nometa.zip");

/// Why the demo could not unpack.
#[derive(Debug)]
pub enum DemoError {
    /// The folder is not new or empty (a usage error: nothing was written).
    Refused(String),
    /// Unpacking failed midway.
    Failed(String),
}

/// Unpack the table into `dir` (created if missing, its parents too).
pub fn unpack(dir: &Path) -> Result<(), DemoError> {
    let refused = |why: &str| {
        DemoError::Refused(format!(
            "{}: {why}; the demo only unpacks into a new or empty folder and never deletes or overwrites anything. Pass a new path, e.g. /tmp/xlake-demo-{}",
            dir.display(),
            std::process::id()
        ))
    };
    match std::fs::read_dir(dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => return Err(refused("not empty")),
        Ok(false) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| failed(dir, &e))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(refused("a file, not a folder"))
        }
        Err(e) => return Err(failed(dir, &e)),
    }
    let mut archive = zip::ZipArchive::new(Cursor::new(TABLE_ZIP))
        .map_err(|e| DemoError::Failed(format!("the bundled table: {e}")))?;
    for i in 0..archive.len() {
        let mut entry = archive
            .by_index(i)
            .map_err(|e| DemoError::Failed(format!("the bundled table: {e}")))?;
        // Entries sit under one top folder (`v9_txns_simple_nometa/`): drop it.
        let Some(target) = entry.enclosed_name().and_then(|p| inside(dir, &p)) else {
            continue;
        };
        if entry.is_dir() {
            std::fs::create_dir_all(&target).map_err(|e| failed(&target, &e))?;
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| failed(parent, &e))?;
        }
        let mut bytes = Vec::new();
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| DemoError::Failed(format!("the bundled table: {e}")))?;
        // create_new: never overwrite, even a file that appeared meanwhile.
        let mut file = std::fs::File::create_new(&target).map_err(|e| failed(&target, &e))?;
        std::io::Write::write_all(&mut file, &bytes).map_err(|e| failed(&target, &e))?;
    }
    Ok(())
}

/// `path` without its first component, under `dir`.
fn inside(dir: &Path, path: &Path) -> Option<PathBuf> {
    let rest: PathBuf = path.components().skip(1).collect();
    (!rest.as_os_str().is_empty()).then(|| dir.join(rest))
}

fn failed(path: &Path, e: &std::io::Error) -> DemoError {
    DemoError::Failed(format!("{}: {e}", path.display()))
}

/// What to try once the table is mirrored at `table`.
pub fn next_steps(table: &str) -> Vec<String> {
    vec![
        "Try next:".into(),
        format!("  xlake snapshots {table}          # one snapshot per completed Hudi instant"),
        format!("  xlake check {table} --deep       # prove it: every commit mirrored, same files"),
        format!("  xlake inspect {table}"),
        format!("  python -c \"import duckdb; duckdb.sql('INSTALL iceberg; LOAD iceberg'); print(duckdb.sql(\\\"SELECT count(*) FROM iceberg_scan('{table}')\\\"))\""),
        format!("  python -c \"from pyiceberg.table import StaticTable; print(StaticTable.from_metadata('{table}').scan().to_arrow().num_rows)\""),
        "(from the source tree, `cargo run --` stands for `xlake`)".into(),
    ]
}
