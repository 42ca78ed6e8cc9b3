//! Catalog URIs, and opening the [`Catalog`] one names:
//!
//! | URI | catalog |
//! |---|---|
//! | `sqlite:///abs/path/catalog.db` | JDBC layout in a SQLite file (always built) |
//! | `postgresql://user@host:port/db` | JDBC layout in PostgreSQL (feature `postgres`; password from the URI or `PGPASSWORD`) |
//! | `rest+http://host:port/path`, `rest+https://…` | Iceberg REST catalog (feature `rest`; credentials from the environment, see `rest`) |
//! | `glue://`, `glue://<catalog-id>` | AWS Glue (feature `glue`; region, endpoint, keys from the AWS environment) |
//! | `thrift://host:port` | Hive Metastore (feature `hms`; port 9083 when none is given) |

pub use crate::http::retries;
pub use crate::target::{redact, CatalogTarget, DEFAULT_NAME};

use crate::contract::Catalog;
use crate::error::Result;
use crate::sql::SqliteCatalog;
use crate::target::config_error;

// Checking a target opens it: `CatalogTarget::new` lives here, beside the backends it tries.
impl CatalogTarget {
    /// The target, checked: the table name parses and the URI kind is known.
    pub fn new(uri: &str, name: Option<&str>, table: &str) -> Result<Self> {
        let target = Self {
            uri: uri.to_string(),
            name: name.unwrap_or(DEFAULT_NAME).to_string(),
            table: table.to_string(),
        };
        target.ident()?;
        open(&target)?;
        Ok(target)
    }

    /// The target from optional command-line or config values: `None` without a URI;
    /// a URI needs a table name, and a table name or catalog name needs a URI.
    pub fn from_options(
        uri: Option<&str>,
        name: Option<&str>,
        table: Option<&str>,
    ) -> Result<Option<Self>> {
        match (uri, table) {
            (Some(uri), Some(table)) => Self::new(uri, name, table).map(Some),
            (Some(uri), None) => Err(config_error(
                uri,
                "a catalog needs --catalog-table <namespace>.<name> (catalog_table in a job file)",
            )),
            (None, Some(_)) => Err(config_error(
                "(none)",
                "--catalog-table needs --catalog <URI> (catalog in a job file)",
            )),
            (None, None) if name.is_some() => Err(config_error(
                "(none)",
                "--catalog-name needs --catalog <URI>",
            )),
            (None, None) => Ok(None),
        }
    }
}

/// Open the catalog `target` names. Nothing is contacted yet.
pub fn open(target: &CatalogTarget) -> Result<Box<dyn Catalog>> {
    let uri = target.uri.as_str();
    let scheme = uri.split_once("://").map(|(s, _)| s).unwrap_or("");
    match scheme {
        "sqlite" => {
            let path = &uri["sqlite://".len()..];
            if !path.starts_with('/') {
                return Err(config_error(
                    uri,
                    "expected sqlite:///absolute/path/catalog.db (three slashes: an absolute path)",
                ));
            }
            Ok(Box::new(SqliteCatalog::new(
                path.into(),
                &target.name,
                uri,
            )))
        }
        "postgresql" | "postgres" => postgres(target),
        "rest+http" | "rest+https" => rest(target),
        "glue" => glue(target),
        "thrift" => hms(target),
        _ => Err(config_error(
            uri,
            "unknown catalog kind; expected sqlite:///path, postgresql://user@host:port/db, rest+http(s)://host/path, glue://, thrift://host:port",
        )),
    }
}

#[cfg(feature = "postgres")]
fn postgres(target: &CatalogTarget) -> Result<Box<dyn Catalog>> {
    let uri = target.uri.as_str();
    let mut config: tokio_postgres::Config = uri
        .parse()
        .map_err(|e| config_error(uri, format!("not a PostgreSQL URI: {e}")))?;
    if config.get_password().is_none() {
        if let Ok(password) = std::env::var("PGPASSWORD") {
            config.password(password);
        }
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(10));
    }
    Ok(Box::new(crate::sql::postgres::PostgresCatalog::new(
        config,
        &target.name,
        &redact(uri),
    )))
}

#[cfg(not(feature = "postgres"))]
fn postgres(target: &CatalogTarget) -> Result<Box<dyn Catalog>> {
    Err(config_error(
        &target.uri,
        "PostgreSQL catalogs need a build with the `postgres` feature (or `cloud`)",
    ))
}

#[cfg(feature = "glue")]
fn glue(target: &CatalogTarget) -> Result<Box<dyn Catalog>> {
    Ok(Box::new(crate::glue::GlueCatalog::new(target)?))
}

#[cfg(not(feature = "glue"))]
fn glue(target: &CatalogTarget) -> Result<Box<dyn Catalog>> {
    Err(config_error(
        &target.uri,
        "Glue catalogs need a build with the `glue` feature (or `cloud`)",
    ))
}

#[cfg(feature = "hms")]
fn hms(target: &CatalogTarget) -> Result<Box<dyn Catalog>> {
    Ok(Box::new(crate::hms::HmsCatalog::new(target)?))
}

#[cfg(not(feature = "hms"))]
fn hms(target: &CatalogTarget) -> Result<Box<dyn Catalog>> {
    Err(config_error(
        &target.uri,
        "Hive Metastore catalogs need a build with the `hms` feature (or `cloud`)",
    ))
}

#[cfg(feature = "rest")]
fn rest(target: &CatalogTarget) -> Result<Box<dyn Catalog>> {
    Ok(Box::new(crate::rest::RestCatalog::new(target)?))
}

#[cfg(not(feature = "rest"))]
fn rest(target: &CatalogTarget) -> Result<Box<dyn Catalog>> {
    Err(config_error(
        &target.uri,
        "REST catalogs need a build with the `rest` feature (or `cloud`)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_checked_and_passwords_hidden() {
        assert!(CatalogTarget::new("sqlite:///tmp/c.db", None, "ns.t").is_ok());
        let e = CatalogTarget::new("sqlite://rel/c.db", None, "ns.t").unwrap_err();
        assert!(e.to_string().contains("absolute"), "{e}");
        let e = CatalogTarget::new("mysql://h/db", None, "ns.t").unwrap_err();
        assert!(e.to_string().contains("unknown catalog kind"), "{e}");
        let e = CatalogTarget::new("sqlite:///tmp/c.db", None, "t").unwrap_err();
        assert!(e.to_string().contains("<namespace>.<name>"), "{e}");
        assert_eq!(
            redact("postgresql://u:secret@h:5/db"),
            "postgresql://u:***@h:5/db"
        );
    }
}
