//! Catalog URIs, and opening the [`Catalog`] one names:
//!
//! | URI | catalog |
//! |---|---|
//! | `sqlite:///abs/path/catalog.db` | JDBC layout in a SQLite file (always built) |
//! | `postgresql://user@host:port/db` | JDBC layout in PostgreSQL (feature `postgres`; password from the URI or `PGPASSWORD`) |
//! | `rest+http://host:port/path`, `rest+https://…` | Iceberg REST catalog (feature `rest`; credentials from the environment, see `rest`) |
//! | `glue://`, `glue://<catalog-id>` | AWS Glue (feature `glue`; region, endpoint, keys from the AWS environment) |
//! | `thrift://host:port` | Hive Metastore (feature `hms`; port 9083 when none is given) |

use crate::sql::SqliteCatalog;
use crate::{Catalog, CatalogError, Result, TableIdent};

/// The catalog name used when none is given (the JDBC layout's `catalog_name`).
pub const DEFAULT_NAME: &str = "xlake";

/// What the operator asked for: `--catalog`, `--catalog-name`, `--catalog-table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogTarget {
    /// The catalog URI.
    pub uri: String,
    /// The catalog's own name (the JDBC layout's `catalog_name`).
    pub name: String,
    /// `namespace.table`.
    pub table: String,
}

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

    /// The table's identifier.
    pub fn ident(&self) -> Result<TableIdent> {
        TableIdent::parse(&self.table).map_err(|e| CatalogError::Config {
            catalog: redact(&self.uri),
            reason: e.to_string(),
        })
    }
}

/// The HTTP client a network catalog (REST, Glue) talks through: one 30 s timeout per
/// request; a client that cannot be built is a configuration error naming the catalog.
#[cfg(any(feature = "rest", feature = "glue"))]
pub(crate) fn http_client(target: &CatalogTarget) -> crate::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| crate::CatalogError::Config {
            catalog: redact(&target.uri),
            reason: e.to_string(),
        })
}

/// Catalog requests this process sent again after a transient failure (see [`retries`]).
static RETRIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many network catalog requests (REST, Glue) this process sent again after a
/// transient failure since it started (serve exports it in `/metrics`).
pub fn retries() -> u64 {
    RETRIES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Send `req` and read its answer, trying again as storage does
/// ([`xlake_storage::RetryPolicy::default`]: 4 attempts, jittered doubling pauses from
/// 200 ms) when it failed in transit (unreachable, reset, timed out, answer cut short) or
/// the server answered 429 or 503 (busy: nothing done). A pointer move sent again after
/// its answer was lost hears that the entry moved already, which the compare-and-swap
/// loop then reads ([`crate::pointer`]). The last status and body, or the last error.
#[cfg(any(feature = "rest", feature = "glue"))]
pub(crate) async fn send_retrying(
    req: reqwest::RequestBuilder,
) -> std::result::Result<(u16, Vec<u8>), reqwest::Error> {
    let policy = xlake_storage::RetryPolicy::default();
    let mut bound = policy.first_backoff;
    let mut attempt = 1;
    loop {
        // Only a streamed body cannot be cloned; catalogs send JSON.
        let Some(this) = req.try_clone() else {
            return send_once(req).await;
        };
        let outcome = send_once(this).await;
        let transient = match &outcome {
            Err(_) => true,
            Ok((status, _)) => matches!(status, 429 | 503),
        };
        if !transient || attempt >= policy.attempts {
            return outcome;
        }
        RETRIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pause = xlake_storage::jittered(bound);
        tracing::warn!(attempt, "transient catalog failure; retrying in {pause:?}");
        tokio::time::sleep(pause).await;
        bound = (bound * 2).min(policy.max_backoff);
        attempt += 1;
    }
}

#[cfg(any(feature = "rest", feature = "glue"))]
async fn send_once(
    req: reqwest::RequestBuilder,
) -> std::result::Result<(u16, Vec<u8>), reqwest::Error> {
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    Ok((status, resp.bytes().await?.to_vec()))
}

/// The URI without a password (how messages name a catalog).
pub fn redact(uri: &str) -> String {
    match url::Url::parse(uri) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => uri.to_string(),
    }
}

fn config_error(uri: &str, reason: impl Into<String>) -> CatalogError {
    CatalogError::Config {
        catalog: redact(uri),
        reason: reason.into(),
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
