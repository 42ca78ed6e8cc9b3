//! The Hive Metastore (`thrift://host:port`), over its Thrift API (binary protocol,
//! unframed, no SASL: the standalone metastore's defaults) with Apache's `thrift` crate:
//! `create_database`, `get_table_req`, `create_table` and `alter_table_with_environment_context`.
//!
//! The table is registered as Iceberg's `HiveCatalog` registers one (with
//! `engine.hive.enabled`): an `EXTERNAL_TABLE` with `EXTERNAL=TRUE`, `table_type=ICEBERG`,
//! `metadata_location`, the storage handler `HiveIcebergStorageHandler`, Iceberg's input and
//! output formats and SerDe, and the table root as its location (no columns: readers take
//! the schema from the metadata file).
//!
//! The pointer moves by a conditional `alter_table`, as Iceberg's `HiveTableOperations`
//! commits without locks: the environment context carries `expected_parameter_key` =
//! `metadata_location` and `expected_parameter_value` = the location read, and the
//! metastore refuses the alter ("The table has been modified …") when the entry no longer
//! holds it. Hive Metastore 4.0.0 and later honour these keys (HIVE-26882, which 4.0.1
//! checks with a conditional SQL `UPDATE` in the same transaction); 3.x and older ignore
//! them, so the read-check-alter runs under the metastore's table lock (`lock`), as
//! Iceberg's default commit does (see docs/catalogs.md).

mod lock;
mod wire;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use wire::{Outcome, Value};

use crate::contract::{Catalog, Pointer, Swap};
use crate::error::{CatalogError, Cause, Requests, Result};
use crate::ident::TableIdent;
use crate::target::{redact, CatalogTarget};

/// One call's connect, read and write timeout.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The metastore's port when the URI names none.
const DEFAULT_PORT: u16 = 9083;

/// Iceberg's storage handler, input and output formats and SerDe for Hive.
const STORAGE_HANDLER: &str = "org.apache.iceberg.mr.hive.HiveIcebergStorageHandler";
const INPUT_FORMAT: &str = "org.apache.iceberg.mr.hive.HiveIcebergInputFormat";
const OUTPUT_FORMAT: &str = "org.apache.iceberg.mr.hive.HiveIcebergOutputFormat";
const SERDE: &str = "org.apache.iceberg.mr.hive.HiveIcebergSerDe";

/// Field ids of `hive_metastore.thrift`'s `Table`.
mod table {
    pub(super) const NAME: i16 = 1;
    pub(super) const DB: i16 = 2;
    pub(super) const PARAMETERS: i16 = 9;
}

/// A Hive Metastore.
#[derive(Debug)]
pub struct HmsCatalog {
    uri: String,
    address: String,
}

impl Requests for HmsCatalog {
    fn uri(&self) -> &str {
        &self.uri
    }
}

impl HmsCatalog {
    /// The metastore `target` names (`thrift://host[:port]`); nothing is contacted yet.
    pub fn new(target: &CatalogTarget) -> Result<Self> {
        let config = |reason: String| CatalogError::Config {
            catalog: redact(&target.uri),
            reason,
        };
        let url = url::Url::parse(&target.uri)
            .map_err(|e| config(format!("not a thrift://host:port URI: {e}")))?;
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| config("expected thrift://host:port (no host)".into()))?;
        if !matches!(url.path(), "" | "/") || url.query().is_some() {
            return Err(config(
                "expected thrift://host:port (a metastore URI has no path)".into(),
            ));
        }
        let port = url.port().unwrap_or(DEFAULT_PORT);
        Ok(Self {
            uri: redact(&target.uri),
            address: format!("{host}:{port}"),
        })
    }

    /// `method(args…)` on the metastore, off the async runtime's threads.
    async fn call(&self, table: &TableIdent, method: &str, args: Vec<Value>) -> Result<Outcome> {
        self.try_call(method, args)
            .await
            .map_err(|(reason, cause)| self.caused(table, reason, cause))
    }

    /// [`Self::call`], failing with the reason and its cause alone.
    async fn try_call(
        &self,
        method: &str,
        args: Vec<Value>,
    ) -> std::result::Result<Outcome, (String, Cause)> {
        let (address, name) = (self.address.clone(), method.to_string());
        let done =
            tokio::task::spawn_blocking(move || wire::call(&address, &name, args, TIMEOUT)).await;
        match done {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(e)) => Err((e.to_string(), e.into())),
            Err(e) => Err((format!("{method}: reading the reply failed: {e}"), e.into())),
        }
    }

    fn database(&self, table: &TableIdent) -> Result<String> {
        match table.namespace.as_slice() {
            [db] => Ok(db.clone()),
            _ => Err(self.error(
                table,
                "the Hive Metastore has one namespace level (the database)",
            )),
        }
    }

    /// `get_table_req` (Hive 4 has no `get_table`; 3.x has both): the table, or `None` when
    /// there is none (`NoSuchObjectException`).
    async fn get(&self, table: &TableIdent) -> Result<Option<Value>> {
        let request = Value::Struct(vec![
            (1, Value::str(&self.database(table)?)),
            (2, Value::str(&table.name)),
        ]);
        let reply = match self.call(table, "get_table_req", vec![request]).await? {
            Outcome::Returned(reply) => reply,
            Outcome::Thrown(2, _) => return Ok(None),
            Outcome::Thrown(_, message) => {
                return Err(self.error(table, format!("get_table_req: {message}")))
            }
        };
        match reply.as_ref().and_then(|r| r.field(1)) {
            Some(t) => Ok(Some(t.clone())),
            None => Err(self.error(table, "get_table_req: a reply without the table")),
        }
    }

    /// `create_database` unless it exists (`AlreadyExistsException`).
    async fn create_database(&self, table: &TableIdent) -> Result<()> {
        let db = Value::Struct(vec![(1, Value::str(&self.database(table)?))]);
        match self.call(table, "create_database", vec![db]).await? {
            Outcome::Returned(_) | Outcome::Thrown(1, _) => Ok(()),
            Outcome::Thrown(_, message) => {
                Err(self.error(table, format!("create_database: {message}")))
            }
        }
    }
}

/// The `metadata_location` parameter of a metastore table.
fn metadata_location(t: &Value) -> Option<&str> {
    t.field(table::PARAMETERS)?
        .get("metadata_location")?
        .as_str()
}

/// The table root of a `…/metadata/vN.metadata.json` location.
fn root_of(location: &str) -> &str {
    location
        .rsplit_once("/metadata/")
        .map_or(location, |(root, _)| root)
}

/// A new metastore `Table` for the Iceberg table whose metadata is at `location`, as
/// Iceberg's `HiveCatalog` creates one with the Hive engine enabled.
fn new_table(db: &str, name: &str, location: &str) -> Value {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let now = Value::I32(i32::try_from(now).unwrap_or(i32::MAX));
    let owner = std::env::var("USER").unwrap_or_else(|_| "xlake".into());
    let no_strings = || Value::List(thrift::protocol::TType::String, vec![]);
    let no_structs = || Value::List(thrift::protocol::TType::Struct, vec![]);
    let serde = Value::Struct(vec![(2, Value::str(SERDE)), (3, Value::string_map([]))]);
    let storage = Value::Struct(vec![
        (1, no_structs()),
        (2, Value::str(root_of(location))),
        (3, Value::str(INPUT_FORMAT)),
        (4, Value::str(OUTPUT_FORMAT)),
        (5, Value::Bool(false)),
        (6, Value::I32(-1)),
        (7, serde),
        (8, no_strings()),
        (9, no_structs()),
        (10, Value::string_map([])),
    ]);
    let parameters = Value::string_map([
        ("EXTERNAL", "TRUE"),
        ("table_type", "ICEBERG"),
        ("metadata_location", location),
        ("storage_handler", STORAGE_HANDLER),
    ]);
    Value::Struct(vec![
        (table::NAME, Value::str(name)),
        (table::DB, Value::str(db)),
        (3, Value::str(&owner)),
        (4, now.clone()),
        (5, now),
        (6, Value::I32(i32::MAX)),
        (7, storage),
        (8, no_structs()),
        (table::PARAMETERS, parameters),
        (12, Value::str("EXTERNAL_TABLE")),
    ])
}

#[async_trait]
impl Catalog for HmsCatalog {
    fn describe(&self) -> String {
        self.uri.clone()
    }

    async fn load_pointer(&self, table: &TableIdent) -> Result<Option<Pointer>> {
        let Some(t) = self.get(table).await? else {
            return Ok(None);
        };
        let location = metadata_location(&t)
            .unwrap_or("(no metadata_location: not an Iceberg table)")
            .to_string();
        Ok(Some(Pointer {
            location,
            token: None,
            metadata: None,
        }))
    }

    async fn register(&self, table: &TableIdent, location: &str) -> Result<Swap> {
        self.create_database(table).await?;
        let t = new_table(&self.database(table)?, &table.name, location);
        match self.call(table, "create_table", vec![t]).await? {
            Outcome::Returned(_) => Ok(Swap::Done),
            Outcome::Thrown(1, _) => Ok(Swap::Lost),
            Outcome::Thrown(_, message) => {
                Err(self.error(table, format!("create_table: {message}")))
            }
        }
    }

    async fn swap(&self, table: &TableIdent, expected: &Pointer, location: &str) -> Result<Swap> {
        let lock = self.lock(table).await?;
        let moved = self.alter(table, expected, location).await;
        if let Some(lock) = lock {
            self.unlock(table, lock).await;
        }
        moved
    }
}

impl HmsCatalog {
    /// Move the pointer from `expected` to `location` by a conditional `alter_table`.
    async fn alter(&self, table: &TableIdent, expected: &Pointer, location: &str) -> Result<Swap> {
        // Re-read to keep everything else the table holds (alter_table replaces it whole).
        let Some(mut t) = self.get(table).await? else {
            return Ok(Swap::Lost);
        };
        if metadata_location(&t) != Some(expected.location.as_str()) {
            return Ok(Swap::Lost);
        }
        let mut parameters = t
            .field(table::PARAMETERS)
            .cloned()
            .unwrap_or_else(|| Value::string_map([]));
        parameters.put("metadata_location", location);
        parameters.put("previous_metadata_location", &expected.location);
        parameters.put("table_type", "ICEBERG");
        t.set(table::PARAMETERS, parameters);
        let context = Value::Struct(vec![(
            1,
            Value::string_map([
                ("expected_parameter_key", "metadata_location"),
                ("expected_parameter_value", expected.location.as_str()),
                // As Iceberg's MetastoreUtil.alterTable: no statistics pass over the folder.
                ("DO_NOT_UPDATE_STATS", "true"),
            ]),
        )]);
        let (db, name) = (self.database(table)?, table.name.clone());
        let args = vec![Value::str(&db), Value::str(&name), t, context];
        match self
            .call(table, "alter_table_with_environment_context", args)
            .await?
        {
            Outcome::Returned(_) => Ok(Swap::Done),
            Outcome::Thrown(_, message) if message.contains("has been modified") => Ok(Swap::Lost),
            Outcome::Thrown(_, message) => Err(self.error(
                table,
                format!("alter_table_with_environment_context: {message}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_a_host_and_port() {
        let target = |uri: &str| CatalogTarget {
            uri: uri.into(),
            name: "xlake".into(),
            table: "db.t".into(),
        };
        let hms = HmsCatalog::new(&target("thrift://127.0.0.1:9183")).unwrap();
        assert_eq!(hms.address, "127.0.0.1:9183");
        let hms = HmsCatalog::new(&target("thrift://metastore")).unwrap();
        assert_eq!(hms.address, "metastore:9083");
        for bad in ["thrift://", "thrift://h:1/db", "thrift://h:99999"] {
            assert!(HmsCatalog::new(&target(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_new_table_is_registered_as_iceberg_registers_one() {
        let t = new_table("db", "trips", "/data/t/metadata/v3.metadata.json");
        assert_eq!(
            metadata_location(&t),
            Some("/data/t/metadata/v3.metadata.json")
        );
        let params = t.field(table::PARAMETERS).unwrap();
        for (k, v) in [
            ("table_type", "ICEBERG"),
            ("EXTERNAL", "TRUE"),
            ("storage_handler", STORAGE_HANDLER),
        ] {
            assert_eq!(params.get(k).and_then(Value::as_str), Some(v), "{k}");
        }
        assert_eq!(t.field(12).and_then(Value::as_str), Some("EXTERNAL_TABLE"));
        let location = t.field(7).and_then(|sd| sd.field(2));
        assert_eq!(location.and_then(Value::as_str), Some("/data/t"));
    }
}
