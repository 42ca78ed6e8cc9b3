//! AWS Glue Data Catalog (`glue://`, or `glue://<catalog-id>` for another account's catalog),
//! through Glue's JSON API signed with SigV4 (AWS's own signer, `aws-sigv4`): `GetTable`, `CreateDatabase`, `CreateTable`,
//! and `UpdateTable` with `VersionId` (Glue's optimistic concurrency) to move the pointer.
//! The table's `Parameters` carry `table_type=ICEBERG`, `metadata_location` and
//! `previous_metadata_location`, as Iceberg's `GlueCatalog` writes them.
//!
//! Region, endpoint and credentials come from the usual AWS environment variables:
//! `AWS_REGION` (or `AWS_DEFAULT_REGION`), `AWS_ENDPOINT_URL_GLUE` (or `AWS_ENDPOINT_URL`),
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`. Profiles, SSO and
//! instance roles are not read.

use std::time::SystemTime;

use async_trait::async_trait;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use serde_json::{json, Value};

use crate::contract::{Catalog, Pointer, Swap};
use crate::error::{Cause, Requests, Result};
use crate::http::{http_client, send_retrying};
use crate::ident::TableIdent;
use crate::target::CatalogTarget;

/// A Glue Data Catalog.
#[derive(Debug)]
pub struct GlueCatalog {
    uri: String,
    catalog_id: Option<String>,
    http: reqwest::Client,
}

/// What one request needs from the environment.
struct Env {
    region: String,
    endpoint: String,
    key: String,
    secret: String,
    token: Option<String>,
}

impl Requests for GlueCatalog {
    fn uri(&self) -> &str {
        &self.uri
    }
}

impl GlueCatalog {
    /// The catalog `target` names; nothing is contacted yet.
    pub fn new(target: &CatalogTarget) -> Result<Self> {
        let id = target
            .uri
            .trim_start_matches("glue://")
            .trim_end_matches('/');
        let http = http_client(target)?;
        Ok(Self {
            uri: target.uri.clone(),
            catalog_id: (!id.is_empty()).then(|| id.to_string()),
            http,
        })
    }

    fn env(&self, table: &TableIdent) -> Result<Env> {
        let var = |names: &[&str]| names.iter().find_map(|n| std::env::var(n).ok());
        let missing = |what: &str| self.error(table, format!("{what} is not set"));
        let region = var(&["AWS_REGION", "AWS_DEFAULT_REGION"])
            .ok_or_else(|| missing("AWS_REGION (or AWS_DEFAULT_REGION)"))?;
        let endpoint = var(&["AWS_ENDPOINT_URL_GLUE", "AWS_ENDPOINT_URL"])
            .unwrap_or_else(|| format!("https://glue.{region}.amazonaws.com"));
        Ok(Env {
            key: var(&["AWS_ACCESS_KEY_ID"]).ok_or_else(|| missing("AWS_ACCESS_KEY_ID"))?,
            secret: var(&["AWS_SECRET_ACCESS_KEY"])
                .ok_or_else(|| missing("AWS_SECRET_ACCESS_KEY"))?,
            token: var(&["AWS_SESSION_TOKEN"]),
            region,
            endpoint: endpoint.trim_end_matches('/').to_string(),
        })
    }

    /// Call Glue's `action`; `Ok(Err(type))` for an error reply of that exception type.
    async fn call(
        &self,
        table: &TableIdent,
        action: &str,
        mut body: Value,
    ) -> Result<std::result::Result<Value, (String, String)>> {
        if let (Some(id), Some(obj)) = (&self.catalog_id, body.as_object_mut()) {
            obj.insert("CatalogId".into(), json!(id));
        }
        let env = self.env(table)?;
        let payload = body.to_string();
        let url = format!("{}/", env.endpoint);
        let target = format!("AWSGlue.{action}");
        let headers = [
            ("content-type", "application/x-amz-json-1.1"),
            ("x-amz-target", target.as_str()),
        ];
        let signed = sign_request(&env, "glue", SystemTime::now(), &url, &headers, &payload)
            .map_err(|e| self.caused(table, format!("{action}: signing: {e}"), e))?;
        let mut req = self.http.post(&url).body(payload);
        for (k, v) in headers
            .iter()
            .copied()
            .chain(signed.iter().map(|(k, v)| (*k, v.as_str())))
        {
            req = req.header(k, v);
        }
        let (status, body) = send_retrying(req)
            .await
            .map_err(|e| self.caused(table, format!("{action}: unreachable: {e}"), e))?;
        let reply: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if status == 200 {
            return Ok(Ok(reply));
        }
        let kind = reply
            .get("__type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .rsplit('#')
            .next()
            .unwrap_or("")
            .to_string();
        let message = ["message", "Message"]
            .iter()
            .find_map(|k| reply.get(*k).and_then(Value::as_str))
            .unwrap_or("")
            .to_string();
        Ok(Err((kind, format!("{action}: HTTP {status} {message}"))))
    }

    fn database(&self, table: &TableIdent) -> Result<String> {
        match table.namespace.as_slice() {
            [db] => Ok(db.clone()),
            _ => Err(self.error(table, "Glue has one namespace level (the database)")),
        }
    }

    /// `GetTable`: the table, or `None` when Glue has no such table.
    async fn get(&self, table: &TableIdent) -> Result<Option<Value>> {
        let body = json!({"DatabaseName": self.database(table)?, "Name": table.name});
        match self.call(table, "GetTable", body).await? {
            Ok(reply) => Ok(reply.get("Table").cloned()),
            Err((kind, _)) if kind == "EntityNotFoundException" => Ok(None),
            Err((kind, msg)) => Err(self.error(table, format!("{kind} {msg}"))),
        }
    }
}

/// SigV4 by AWS's signer: the headers to add (`authorization`, `x-amz-date`, and
/// `x-amz-security-token` with a session token) to a POST of `payload` to `url` carrying
/// `headers` (lowercase names; `host` is taken from `url`, as the HTTP client sends it).
fn sign_request(
    env: &Env,
    service: &str,
    time: SystemTime,
    url: &str,
    headers: &[(&str, &str)],
    payload: &str,
) -> std::result::Result<Vec<(&'static str, String)>, Cause> {
    let credentials = Credentials::new(
        &env.key,
        &env.secret,
        env.token.clone(),
        None,
        "environment",
    );
    let identity = Identity::from(credentials);
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(&env.region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()?
        .into();
    let body = SignableBody::Bytes(payload.as_bytes());
    let request = SignableRequest::new("POST", url, headers.iter().copied(), body)?;
    let (instructions, _) = sign(request, &params)?.into_parts();
    let (headers, _) = instructions.into_parts();
    Ok(headers
        .iter()
        .map(|h| (h.name(), h.value().to_string()))
        .collect())
}

/// The table root of a `…/metadata/vN.metadata.json` location.
fn root_of(location: &str) -> &str {
    location
        .rsplit_once("/metadata/")
        .map_or(location, |(root, _)| root)
}

#[async_trait]
impl Catalog for GlueCatalog {
    fn describe(&self) -> String {
        self.uri.clone()
    }

    async fn load_pointer(&self, table: &TableIdent) -> Result<Option<Pointer>> {
        let Some(t) = self.get(table).await? else {
            return Ok(None);
        };
        let location = t
            .pointer("/Parameters/metadata_location")
            .and_then(Value::as_str)
            .unwrap_or("(no metadata_location: not an Iceberg table)")
            .to_string();
        let token = t
            .get("VersionId")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(Some(Pointer {
            location,
            token,
            metadata: None,
        }))
    }

    async fn register(&self, table: &TableIdent, location: &str) -> Result<Swap> {
        let db = self.database(table)?;
        let body = json!({"DatabaseInput": {"Name": db}});
        match self.call(table, "CreateDatabase", body).await? {
            Ok(_) => {}
            Err((kind, _)) if kind == "AlreadyExistsException" => {}
            Err((kind, msg)) => return Err(self.error(table, format!("{kind} {msg}"))),
        }
        let body = json!({"DatabaseName": db, "TableInput": {
            "Name": table.name,
            "TableType": "EXTERNAL_TABLE",
            "Parameters": {"table_type": "ICEBERG", "metadata_location": location},
            "StorageDescriptor": {"Location": root_of(location)},
        }});
        match self.call(table, "CreateTable", body).await? {
            Ok(_) => Ok(Swap::Done),
            Err((kind, _)) if kind == "AlreadyExistsException" => Ok(Swap::Lost),
            Err((kind, msg)) => Err(self.error(table, format!("{kind} {msg}"))),
        }
    }

    async fn swap(&self, table: &TableIdent, expected: &Pointer, location: &str) -> Result<Swap> {
        // Re-read to keep what others set on the table (UpdateTable replaces the input).
        let Some(current) = self.get(table).await? else {
            return Ok(Swap::Lost);
        };
        let at = current
            .pointer("/Parameters/metadata_location")
            .and_then(Value::as_str);
        let version = current.get("VersionId").and_then(Value::as_str);
        if at != Some(expected.location.as_str()) || version != expected.token.as_deref() {
            return Ok(Swap::Lost);
        }
        let mut parameters = current.get("Parameters").cloned().unwrap_or(json!({}));
        parameters["metadata_location"] = json!(location);
        parameters["previous_metadata_location"] = json!(expected.location);
        parameters["table_type"] = json!("ICEBERG");
        let mut input = json!({
            "Name": table.name,
            "TableType": current.get("TableType").cloned().unwrap_or(json!("EXTERNAL_TABLE")),
            "Parameters": parameters,
        });
        for key in ["Description", "StorageDescriptor", "Owner"] {
            if let Some(v) = current.get(key) {
                input[key] = v.clone();
            }
        }
        let mut body = json!({"DatabaseName": self.database(table)?, "TableInput": input});
        if let Some(v) = version {
            body["VersionId"] = json!(v);
        }
        match self.call(table, "UpdateTable", body).await? {
            Ok(_) => Ok(Swap::Done),
            Err((kind, _)) if kind == "ConcurrentModificationException" => Ok(Swap::Lost),
            Err((kind, msg)) => Err(self.error(table, format!("{kind} {msg}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's SigV4 test suite, "post-vanilla": a POST to `/` of example.amazonaws.com with
    /// an empty body, signed for service `service` in us-east-1 at 20150830T123600Z.
    #[test]
    fn requests_are_signed_as_the_aws_test_suite_says() {
        let env = Env {
            region: "us-east-1".into(),
            endpoint: "https://example.amazonaws.com".into(),
            key: "AKIDEXAMPLE".into(),
            secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            token: None,
        };
        let time = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160);
        let url = "https://example.amazonaws.com/";
        let headers = sign_request(&env, "service", time, url, &[], "").unwrap();
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(
            get("authorization"),
            Some("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b")
        );
        // A session token is sent, and Glue's headers are signed.
        let env = Env {
            token: Some("tok".into()),
            ..env
        };
        let glue = [
            ("content-type", "application/x-amz-json-1.1"),
            ("x-amz-target", "AWSGlue.GetTable"),
        ];
        let headers = sign_request(&env, "glue", time, url, &glue, "{}").unwrap();
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("x-amz-security-token"), Some("tok"));
        assert!(get("authorization")
            .is_some_and(|a| a.contains("/glue/aws4_request") && a.contains("x-amz-target")));
    }

    #[test]
    fn the_root_is_above_metadata() {
        assert_eq!(root_of("s3://b/t/metadata/v3.metadata.json"), "s3://b/t");
    }
}
