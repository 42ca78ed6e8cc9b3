//! What a location holds, found before a command acts on it, so that a mistyped path fails
//! at once and plainly instead of looking like an empty table.

use xlake_storage::TableStore;

use crate::{sources, targets, SyncError};

/// What [`locate`] found at a location.
#[derive(Debug, Clone)]
pub struct Located {
    /// The table root.
    pub store: TableStore,
    /// The source table there, by its format's name (`HUDI`, `DELTA`, `PARQUET`), if any.
    pub format: Option<&'static str>,
    /// Whether Iceberg metadata (`metadata/vN.metadata.json`) is there.
    pub iceberg: bool,
}

/// Open `location` and look, from names alone, for a source table (of the `format` named,
/// else of any format the [`sources`] registry detects, else of the one a mirror there
/// records) and for Iceberg metadata. A location that is not a folder, or whose scheme this
/// build cannot open, is an error here.
pub async fn locate(location: &str, format: Option<&str>) -> Result<Located, SyncError> {
    let store = TableStore::open(location)?;
    let format = sources::detect(&store, format)
        .await?
        .map(|k| k.format.as_str());
    let iceberg = targets::open_default(&store)?.exists().await?;
    Ok(Located {
        store,
        format,
        iceberg,
    })
}

impl Located {
    /// Refuse a location without a Hudi or Delta table (for commands that read one).
    pub fn require_source(self) -> Result<Self, SyncError> {
        match self.format {
            Some(_) => Ok(self),
            None => Err(sources::not_a_table(&self.store, &sources::detectable())),
        }
    }

    /// Refuse a location with neither a source table nor Iceberg metadata (for commands
    /// that act on the Iceberg metadata only).
    pub fn require_table(self) -> Result<Self, SyncError> {
        match (self.format, self.iceberg) {
            (None, false) => {
                let (formats, markers) = sources::describe(&sources::detectable());
                Err(SyncError::NoTable {
                    table: self.store.location().to_string(),
                    formats,
                    markers,
                })
            }
            _ => Ok(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn folders_without_a_table_are_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().to_str().unwrap();
        std::fs::create_dir(dir.path().join("_delta_log")).unwrap();
        std::fs::write(dir.path().join("_delta_log/notes.txt"), b"x").unwrap();
        let found = locate(location, None).await.unwrap();
        assert_eq!((found.format, found.iceberg), (None, false));
        let err = found.clone().require_source().unwrap_err();
        assert!(
            err.to_string()
                .contains("not a Hudi, Delta or Iceberg table"),
            "{err}"
        );
        let err = found.require_table().unwrap_err();
        assert!(err.to_string().contains("not a table"), "{err}");

        std::fs::write(
            dir.path().join("_delta_log/00000000000000000000.json"),
            b"{}",
        )
        .unwrap();
        let found = locate(location, None).await.unwrap();
        assert_eq!(found.format, Some("DELTA"));
    }
}
