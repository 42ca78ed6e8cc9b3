//! [`CatalogError`]: the one error of this crate; each names the catalog and the table.

/// Why the table's own storage failed while a catalog entry was judged (the engine's
/// error, boxed: the catalog crate knows no table format).
pub type TableError = Box<dyn std::error::Error + Send + Sync>;

/// The error beneath a failed request (the HTTP client's, SQLite's, the Thrift wire's).
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Errors of a catalog; each names the catalog (its URI without credentials) and the table.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The URI or the table name cannot be used.
    #[error("catalog {catalog}: {reason}")]
    Config {
        /// The catalog URI as given (credentials removed).
        catalog: String,
        /// Why.
        reason: String,
    },
    /// The catalog could not be reached or refused a request.
    #[error("catalog {catalog}, table {table}: {reason}")]
    Request {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// What failed (naming the cause, if there is one, in its own words).
        reason: String,
        /// The error of the client or the wire beneath, where there is one.
        #[source]
        source: Option<Cause>,
    },
    /// The entry under this name points at another table's metadata.
    #[error("catalog {catalog}, table {table}: the entry points at {found}, which is not this table's metadata folder {expected}; refusing to move it (drop or rename the entry, or choose another --catalog-table)")]
    Foreign {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// Where the entry points.
        found: String,
        /// This table's `metadata/` folder.
        expected: String,
    },
    /// The entry under this name points at a metadata file in this table's own `metadata/`
    /// folder that xlake did not write (another writer committed to the table).
    #[error("catalog {catalog}, table {table}: the entry points at {found}, a metadata file in this table's metadata folder {folder} that xlake did not write (another writer committed to the table); refusing to move it (stop the other writer and drop the entry, or choose another --catalog-table)")]
    OtherWriter {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// Where the entry points.
        found: String,
        /// This table's `metadata/` folder.
        folder: String,
    },
    /// The table's own metadata, read to judge where the entry points, could not be read.
    #[error(
        "catalog {catalog}, table {table}: reading the file the entry names ({location}): {source}"
    )]
    Table {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// Where the entry points.
        location: String,
        /// Why the table's storage failed.
        source: TableError,
    },
    /// The entry is this table's, but another writer committed to it (or it is another
    /// table at this location): moving it would undo that writer's work.
    #[error("catalog {catalog}, table {table}: the entry points at {found}, {reason}; this table's metadata is {expected}; refusing to move it (xlake never overwrites another writer's commit: undo that commit, or drop the entry so that the next sync registers it)")]
    Diverged {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// Where the entry points.
        found: String,
        /// This table's current `vN.metadata.json` (its `metadata/` folder before the first).
        expected: String,
        /// What the entry holds that xlake did not write.
        reason: String,
    },
    /// Other writers kept moving the pointer while this one tried to.
    #[error("catalog {catalog}, table {table}: the pointer kept changing under us ({attempts} attempts); the next sync moves it")]
    Contended {
        /// The catalog URI (credentials removed).
        catalog: String,
        /// `namespace.table`.
        table: String,
        /// Attempts made.
        attempts: usize,
    },
}

impl CatalogError {
    /// A request to `catalog` for `table` that failed as `reason` says.
    pub fn request(catalog: &str, table: impl ToString, reason: impl ToString) -> Self {
        Self::Request {
            catalog: catalog.to_string(),
            table: table.to_string(),
            reason: reason.to_string(),
            source: None,
        }
    }

    /// A request that failed because of `cause`; `reason` reads as the message (it names
    /// the cause in its own words), the cause stays as its source.
    pub fn request_caused(
        catalog: &str,
        table: impl ToString,
        reason: impl ToString,
        cause: impl Into<Cause>,
    ) -> Self {
        Self::Request {
            catalog: catalog.to_string(),
            table: table.to_string(),
            reason: reason.to_string(),
            source: Some(cause.into()),
        }
    }
}

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, CatalogError>;

/// A catalog reached at one URI, whose request errors all name it: [`Requests::error`] and
/// [`Requests::caused`] for the network backends (REST, Glue, Hive Metastore).
#[cfg(any(feature = "rest", feature = "glue", feature = "hms"))]
pub(crate) trait Requests {
    /// The catalog's URI, as errors show it (credentials redacted).
    fn uri(&self) -> &str;

    /// A request on `table` that failed for `reason`.
    fn error(
        &self,
        table: &crate::ident::TableIdent,
        reason: impl std::fmt::Display,
    ) -> CatalogError {
        CatalogError::request(self.uri(), table, reason)
    }

    /// A request on `table` that failed because of `cause`, `reason` its message.
    fn caused(
        &self,
        table: &crate::ident::TableIdent,
        reason: impl std::fmt::Display,
        cause: impl Into<Cause>,
    ) -> CatalogError {
        CatalogError::request_caused(self.uri(), table, reason, cause)
    }
}
