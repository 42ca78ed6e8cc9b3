//! The JDBC-catalog layout that Iceberg Java's `JdbcCatalog` and pyiceberg's `SqlCatalog`
//! share: `iceberg_tables(catalog_name, table_namespace, table_name, metadata_location,
//! previous_metadata_location, iceberg_type)` and `iceberg_namespace_properties`, created if
//! absent. A swap is `UPDATE … WHERE metadata_location = <expected>`, as `JdbcCatalog`
//! commits: one row updated, or the race is lost.
//!
//! SQLite ([`SqliteCatalog`]) is compiled in; PostgreSQL ([`postgres::PostgresCatalog`])
//! comes with the `postgres` feature. Both use the same statements (`$n` parameters, each
//! used once and in order, which SQLite binds by position too).

use async_trait::async_trait;

use crate::contract::{Catalog, Pointer, Swap};
use crate::error::{CatalogError, Result};
use crate::ident::TableIdent;

/// Iceberg Java's current (V1) layout; pyiceberg ignores `iceberg_type`, Java reads a NULL
/// there as a table.
const CREATE_TABLES: &str = "CREATE TABLE IF NOT EXISTS iceberg_tables (\
    catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL, \
    table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000), \
    previous_metadata_location VARCHAR(1000), iceberg_type VARCHAR(5), \
    PRIMARY KEY (catalog_name, table_namespace, table_name))";
const CREATE_NAMESPACES: &str = "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (\
    catalog_name VARCHAR(255) NOT NULL, namespace VARCHAR(255) NOT NULL, \
    property_key VARCHAR(255), property_value VARCHAR(1000), \
    PRIMARY KEY (catalog_name, namespace, property_key))";
const LOAD: &str = "SELECT metadata_location FROM iceberg_tables \
    WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3";
/// Both catalogs mark a namespace created without properties with `exists = true`.
const CREATE_NAMESPACE: &str = "INSERT INTO iceberg_namespace_properties \
    (catalog_name, namespace, property_key, property_value) VALUES ($1, $2, 'exists', 'true') \
    ON CONFLICT DO NOTHING";
const REGISTER: &str = "INSERT INTO iceberg_tables \
    (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location) \
    VALUES ($1, $2, $3, $4, NULL) ON CONFLICT DO NOTHING";
const SWAP: &str = "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2 \
    WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5 AND metadata_location = $6";

/// A request that failed because of `e` (the database's or the thread's error).
fn request_error(
    catalog: &str,
    table: &TableIdent,
    e: impl std::error::Error + Send + Sync + 'static,
) -> CatalogError {
    CatalogError::request_caused(catalog, table, e.to_string(), e)
}

/// A JDBC-layout catalog in a SQLite file (`sqlite:///abs/path/catalog.db`).
#[derive(Debug, Clone)]
pub struct SqliteCatalog {
    path: std::path::PathBuf,
    name: String,
    uri: String,
}

impl SqliteCatalog {
    /// The catalog `name` in the SQLite file at `path` (created with its tables if absent).
    pub fn new(path: std::path::PathBuf, name: &str, uri: &str) -> Self {
        Self {
            path,
            name: name.to_string(),
            uri: uri.to_string(),
        }
    }

    /// Run `f` on a connection with the layout in place, off the async threads.
    async fn with_db<T: Send + 'static>(
        &self,
        table: &TableIdent,
        f: impl Fn(&rusqlite::Connection, &str) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let (path, name) = (self.path.clone(), self.name.clone());
        let joined = tokio::task::spawn_blocking(move || {
            let attempt = || {
                let db = rusqlite::Connection::open_with_flags(
                    &path,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
                        | rusqlite::OpenFlags::SQLITE_OPEN_CREATE,
                )?;
                // Concurrent syncs of one catalog wait for each other's write locks.
                db.busy_timeout(std::time::Duration::from_secs(30))?;
                // Write-ahead logging: readers that keep a transaction open (JDBC
                // connection pools of engines reading the catalog) do not block the
                // pointer's move.
                db.pragma_update(None, "journal_mode", "WAL")?;
                db.execute_batch(&format!("{CREATE_TABLES}; {CREATE_NAMESPACES};"))?;
                f(&db, &name)
            };
            // Some lock conflicts are reported at once, without the busy wait (switching
            // a new file to WAL while another process opens it): nothing was written, so
            // the whole call is tried again.
            let mut tries = 0;
            loop {
                match attempt() {
                    Err(e) if is_busy(&e) && tries < BUSY_RETRIES => {
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(50 * tries));
                    }
                    other => return other,
                }
            }
        })
        .await;
        match joined {
            Ok(result) => result.map_err(|e| request_error(&self.uri, table, e)),
            Err(e) => Err(request_error(&self.uri, table, e)),
        }
    }
}

/// How often a call refused at once for a lock is tried again (waits 50 ms, 100 ms, ...).
const BUSY_RETRIES: u64 = 10;

/// Whether SQLite refused for a lock held by another connection.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

#[async_trait]
impl Catalog for SqliteCatalog {
    fn describe(&self) -> String {
        format!("{} (catalog name {})", self.uri, self.name)
    }

    async fn load_pointer(&self, table: &TableIdent) -> Result<Option<Pointer>> {
        let (ns, t) = (table.namespace_text(), table.name.clone());
        self.with_db(table, move |db, name| {
            let mut stmt = db.prepare(LOAD)?;
            let mut rows = stmt.query((name, &ns, &t))?;
            Ok(match rows.next()? {
                Some(row) => Some(Pointer {
                    location: row.get::<_, Option<String>>(0)?.unwrap_or_default(),
                    token: None,
                    metadata: None,
                }),
                None => None,
            })
        })
        .await
    }

    async fn register(&self, table: &TableIdent, location: &str) -> Result<Swap> {
        let (ns, t, loc) = (
            table.namespace_text(),
            table.name.clone(),
            location.to_string(),
        );
        self.with_db(table, move |db, name| {
            db.execute(CREATE_NAMESPACE, (name, &ns))?;
            Ok(match db.execute(REGISTER, (name, &ns, &t, &loc))? {
                1 => Swap::Done,
                _ => Swap::Lost,
            })
        })
        .await
    }

    async fn swap(&self, table: &TableIdent, expected: &Pointer, location: &str) -> Result<Swap> {
        let (ns, t) = (table.namespace_text(), table.name.clone());
        let (old, new) = (expected.location.clone(), location.to_string());
        self.with_db(table, move |db, name| {
            Ok(match db.execute(SWAP, (&new, &old, name, &ns, &t, &old))? {
                1 => Swap::Done,
                _ => Swap::Lost,
            })
        })
        .await
    }
}

/// PostgreSQL (`postgresql://user@host:port/db`), without TLS.
#[cfg(feature = "postgres")]
pub mod postgres {
    use super::*;

    /// A JDBC-layout catalog in a PostgreSQL database.
    #[derive(Debug, Clone)]
    pub struct PostgresCatalog {
        config: tokio_postgres::Config,
        name: String,
        uri: String,
    }

    impl PostgresCatalog {
        /// The catalog `name` in the database `config` names (`uri`: how messages name it).
        pub fn new(config: tokio_postgres::Config, name: &str, uri: &str) -> Self {
            Self {
                config,
                name: name.to_string(),
                uri: uri.to_string(),
            }
        }

        /// A connection with the layout in place.
        async fn connect(&self, table: &TableIdent) -> Result<tokio_postgres::Client> {
            let err = |e: tokio_postgres::Error| {
                CatalogError::request_caused(&self.uri, table, pg_reason(&e), e)
            };
            let (client, connection) = self
                .config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(err)?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::warn!("catalog connection: {e}");
                }
            });
            for ddl in [CREATE_TABLES, CREATE_NAMESPACES] {
                // Two first syncs creating the tables at once: one of them sees a
                // unique violation on the type; the tables exist either way.
                if let Err(e) = client.batch_execute(ddl).await {
                    if e.code() != Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
                        return Err(err(e));
                    }
                }
            }
            Ok(client)
        }
    }

    /// The server's message when there is one (wrong password, unknown database).
    fn pg_reason(e: &tokio_postgres::Error) -> String {
        match e.as_db_error() {
            Some(db) => format!("{}: {}", db.severity(), db.message()),
            None => match std::error::Error::source(e) {
                Some(source) => format!("{e}: {source}"),
                None => e.to_string(),
            },
        }
    }

    #[async_trait]
    impl Catalog for PostgresCatalog {
        fn describe(&self) -> String {
            format!("{} (catalog name {})", self.uri, self.name)
        }

        async fn load_pointer(&self, table: &TableIdent) -> Result<Option<Pointer>> {
            let client = self.connect(table).await?;
            let ns = table.namespace_text();
            let rows = client
                .query(LOAD, &[&self.name, &ns, &table.name])
                .await
                .map_err(|e| CatalogError::request_caused(&self.uri, table, pg_reason(&e), e))?;
            Ok(rows.first().map(|row| Pointer {
                location: row.get::<_, Option<String>>(0).unwrap_or_default(),
                token: None,
                metadata: None,
            }))
        }

        async fn register(&self, table: &TableIdent, location: &str) -> Result<Swap> {
            let client = self.connect(table).await?;
            let ns = table.namespace_text();
            let err = |e: tokio_postgres::Error| {
                CatalogError::request_caused(&self.uri, table, pg_reason(&e), e)
            };
            client
                .execute(CREATE_NAMESPACE, &[&self.name, &ns])
                .await
                .map_err(err)?;
            let n = client
                .execute(REGISTER, &[&self.name, &ns, &table.name, &location])
                .await
                .map_err(err)?;
            Ok(if n == 1 { Swap::Done } else { Swap::Lost })
        }

        async fn swap(
            &self,
            table: &TableIdent,
            expected: &Pointer,
            location: &str,
        ) -> Result<Swap> {
            let client = self.connect(table).await?;
            let ns = table.namespace_text();
            let old = expected.location.as_str();
            let n = client
                .execute(SWAP, &[&location, &old, &self.name, &ns, &table.name, &old])
                .await
                .map_err(|e| CatalogError::request_caused(&self.uri, table, pg_reason(&e), e))?;
            Ok(if n == 1 { Swap::Done } else { Swap::Lost })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pointer::{advance, Advanced, History, TableError};

    /// A table folder holding the versions listed.
    struct Holds(&'static [u64]);

    #[async_trait]
    impl History for Holds {
        async fn holds(&self, version: u64) -> std::result::Result<bool, TableError> {
            Ok(self.0.contains(&version))
        }
    }

    #[tokio::test]
    async fn a_failed_request_keeps_the_database_error_as_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("absent").join("c.db");
        let cat = SqliteCatalog::new(db, "xlake", "sqlite:///absent/c.db");
        let table = TableIdent::parse("ns.t").unwrap();
        let e = cat.load_pointer(&table).await.unwrap_err();
        let source = std::error::Error::source(&e).expect("a cause");
        assert!(source.is::<rusqlite::Error>(), "{source:?}");
        assert!(e.to_string().ends_with(&source.to_string()), "{e}");
    }

    #[tokio::test]
    async fn sqlite_registers_moves_forward_and_refuses_foreign_entries() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        let cat = SqliteCatalog::new(db.clone(), "xlake", "sqlite:///c.db");
        let t = TableIdent::parse("ns.t").unwrap();
        assert_eq!(cat.load_pointer(&t).await.unwrap(), None);
        let held = Holds(&[1, 2, 3]);
        let r = advance(&cat, &t, &held, "/d/t", 1).await.unwrap();
        assert_eq!(
            r,
            Advanced::Registered("/d/t/metadata/v1.metadata.json".into())
        );
        let r = advance(&cat, &t, &held, "/d/t", 3).await.unwrap();
        assert!(matches!(r, Advanced::Moved(..)), "{r:?}");
        // Never backwards.
        let r = advance(&cat, &t, &held, "/d/t", 2).await.unwrap();
        assert_eq!(
            r,
            Advanced::Current("/d/t/metadata/v3.metadata.json".into())
        );
        // A stale expectation loses.
        let stale = Pointer {
            location: "/d/t/metadata/v1.metadata.json".into(),
            token: None,
            metadata: None,
        };
        assert_eq!(cat.swap(&t, &stale, "/x").await.unwrap(), Swap::Lost);
        // Another table's entry under the same name is refused, and left as it is.
        let e = advance(&cat, &t, &held, "/d/other", 9).await.unwrap_err();
        assert!(matches!(e, CatalogError::Foreign { .. }), "{e}");
        assert!(
            e.to_string().contains("/d/t/metadata/v3.metadata.json"),
            "{e}"
        );
        assert!(e.to_string().contains("/d/other/metadata/"), "{e}");
        let p = cat.load_pointer(&t).await.unwrap().unwrap();
        assert_eq!(p.location, "/d/t/metadata/v3.metadata.json");
        // previous_metadata_location is kept as JdbcCatalog does.
        let conn = rusqlite::Connection::open(&db).unwrap();
        let prev: String = conn
            .query_row(
                "SELECT previous_metadata_location FROM iceberg_tables",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(prev, "/d/t/metadata/v1.metadata.json");
    }

    #[tokio::test]
    async fn another_writers_file_in_our_metadata_folder_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let cat = SqliteCatalog::new(dir.path().join("c.db"), "xlake", "sqlite:///c.db");
        let t = TableIdent::parse("ns.t").unwrap();
        advance(&cat, &t, &Holds(&[1]), "/d/t", 1).await.unwrap();
        let theirs = "/d/t/metadata/00002-0f0e0d0c-0000-4000-8000-000000000001.metadata.json";
        let held = Pointer {
            location: "/d/t/metadata/v1.metadata.json".into(),
            token: None,
            metadata: None,
        };
        assert_eq!(cat.swap(&t, &held, theirs).await.unwrap(), Swap::Done);
        let e = advance(&cat, &t, &Holds(&[1, 2]), "/d/t", 2)
            .await
            .unwrap_err();
        assert!(matches!(e, CatalogError::OtherWriter { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains(theirs) && text.contains("that xlake did not write"),
            "{text}"
        );
        assert!(!text.contains("not this table's metadata folder"), "{text}");
        assert_eq!(
            cat.load_pointer(&t).await.unwrap().unwrap().location,
            theirs
        );
    }

    #[tokio::test]
    async fn a_newer_entry_the_table_does_not_hold_is_moved() {
        let dir = tempfile::tempdir().unwrap();
        let cat = SqliteCatalog::new(dir.path().join("c.db"), "xlake", "sqlite:///c.db");
        let t = TableIdent::parse("ns.t").unwrap();
        advance(&cat, &t, &Holds(&[4]), "/d/t", 4).await.unwrap();
        // The folder was mirrored afresh: v4 is gone, v1 is current.
        let r = advance(&cat, &t, &Holds(&[1]), "/d/t", 1).await.unwrap();
        assert_eq!(
            r,
            Advanced::Moved(
                "/d/t/metadata/v4.metadata.json".into(),
                "/d/t/metadata/v1.metadata.json".into()
            )
        );
        // A spelling xlake does not write is not the current version.
        let p = cat.load_pointer(&t).await.unwrap().unwrap();
        let odd = "/d/t/metadata/v01.metadata.json";
        assert_eq!(cat.swap(&t, &p, odd).await.unwrap(), Swap::Done);
        let r = advance(&cat, &t, &Holds(&[1]), "/d/t", 1).await.unwrap();
        assert!(matches!(r, Advanced::Moved(from, _) if from == odd));
    }

    /// Review D3: an entry ahead counts only along the chain from the current version (a
    /// writer that got further leaves every version between); past a gap it is moved.
    #[tokio::test]
    async fn only_an_entry_ahead_along_the_chain_stays() {
        let dir = tempfile::tempdir().unwrap();
        let cat = SqliteCatalog::new(dir.path().join("c.db"), "xlake", "sqlite:///c.db");
        let t = TableIdent::parse("ns.t").unwrap();
        advance(&cat, &t, &Holds(&[1, 2, 3]), "/d/t", 3)
            .await
            .unwrap();
        let r = advance(&cat, &t, &Holds(&[1, 2, 3]), "/d/t", 1)
            .await
            .unwrap();
        assert_eq!(
            r,
            Advanced::Current("/d/t/metadata/v3.metadata.json".into())
        );
        let r = advance(&cat, &t, &Holds(&[1, 3]), "/d/t", 1).await.unwrap();
        assert_eq!(
            r,
            Advanced::Moved(
                "/d/t/metadata/v3.metadata.json".into(),
                "/d/t/metadata/v1.metadata.json".into()
            )
        );
    }
}
