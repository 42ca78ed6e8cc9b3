//! An Iceberg REST catalog (`rest+http://host:port/path`, `rest+https://…`), through the
//! spec's endpoints: `GET /v1/config`, `POST /v1/{prefix}/namespaces`,
//! `GET …/namespaces/{ns}/tables/{name}`, `POST …/namespaces/{ns}/register` (the first
//! registration) and `POST …/namespaces/{ns}/tables/{name}` (commitTable: every later
//! move, a compare-and-swap on the entry's `main` snapshot; see [`crate::commit`]).
//!
//! With `XLAKE_REST_MOVE=register` an entry is moved by `register` with `overwrite: true`
//! instead (Polaris, Gravitino), after reading that it still points where expected: the
//! server then never writes to the table's folder, but the spec has no conditional
//! register, so this is read-check-write.
//!
//! Credentials and options come from the environment, never from the URI or the logs:
//!
//! | variable | meaning |
//! |---|---|
//! | `XLAKE_REST_TOKEN` | a bearer token |
//! | `XLAKE_REST_CREDENTIAL` | `client_id:client_secret` for the OAuth2 client-credentials flow |
//! | `XLAKE_REST_OAUTH2_URI` | token endpoint (default `<catalog>/v1/oauth/tokens`) |
//! | `XLAKE_REST_SCOPE` | OAuth2 scope (default `catalog`) |
//! | `XLAKE_REST_WAREHOUSE` | the `warehouse` sent to `/v1/config` |
//! | `XLAKE_REST_PREFIX` | the path prefix (default: what `/v1/config` returns, else none) |
//! | `XLAKE_REST_MOVE` | `commit` (default) or `register` (`register` with `overwrite`) |

use async_trait::async_trait;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde_json::{json, Value};
use tokio::sync::OnceCell;

use crate::contract::{Catalog, Committed, Pointer, Swap};
use crate::error::{CatalogError, Requests, Result};
use crate::http::{http_client, send_retrying};
use crate::ident::TableIdent;
use crate::target::{redact, CatalogTarget};

/// A session: the prefix and the authorization header.
#[derive(Debug, Clone)]
struct Session {
    prefix: String,
    auth: Option<String>,
}

/// An Iceberg REST catalog.
#[derive(Debug)]
pub struct RestCatalog {
    base: String,
    uri: String,
    http: reqwest::Client,
    session: OnceCell<Session>,
    by_commit: bool,
}

impl Requests for RestCatalog {
    fn uri(&self) -> &str {
        &self.uri
    }
}

impl RestCatalog {
    /// The catalog `target` names; nothing is contacted yet.
    pub fn new(target: &CatalogTarget) -> Result<Self> {
        let base = target
            .uri
            .strip_prefix("rest+")
            .unwrap_or(&target.uri)
            .trim_end_matches('/')
            .to_string();
        let http = http_client(target)?;
        let by_commit = match std::env::var("XLAKE_REST_MOVE").as_deref() {
            Err(_) | Ok("commit") => true,
            Ok("register") => false,
            Ok(other) => {
                return Err(CatalogError::Config {
                    catalog: redact(&target.uri),
                    reason: format!(
                        "XLAKE_REST_MOVE={other:?}: expected commit (the default) or register"
                    ),
                })
            }
        };
        Ok(Self {
            base,
            uri: redact(&target.uri),
            http,
            session: OnceCell::new(),
            by_commit,
        })
    }

    /// Send `req` (with the session's authorization), returning status and JSON body.
    async fn send(
        &self,
        table: &TableIdent,
        req: reqwest::RequestBuilder,
        auth: Option<&str>,
    ) -> Result<(u16, Value)> {
        let req = match auth {
            Some(a) => req.header("Authorization", a),
            None => req,
        };
        let (status, body) = send_retrying(req).await.map_err(|e| {
            let reason = format!("unreachable: {}", source_chain(&e));
            self.caused(table, reason, e)
        })?;
        Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    }

    /// A status the spec does not expect here, as an error with the server's message.
    fn refused(&self, table: &TableIdent, what: &str, status: u16, body: &Value) -> CatalogError {
        let message = body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("");
        let hint = match status {
            401 | 403 => " (check XLAKE_REST_TOKEN or XLAKE_REST_CREDENTIAL)",
            _ => "",
        };
        self.error(table, format!("{what}: HTTP {status} {message}{hint}"))
    }

    async fn session(&self, table: &TableIdent) -> Result<&Session> {
        self.session
            .get_or_try_init(|| async {
                let auth = self.authorization(table).await?;
                let mut config = self.http.get(format!("{}/v1/config", self.base));
                if let Ok(w) = std::env::var("XLAKE_REST_WAREHOUSE") {
                    config = config.query(&[("warehouse", w)]);
                }
                let (status, body) = self.send(table, config, auth.as_deref()).await?;
                if status != 200 {
                    return Err(self.refused(table, "GET /v1/config", status, &body));
                }
                let prefix = std::env::var("XLAKE_REST_PREFIX").ok().or_else(|| {
                    ["/overrides/prefix", "/defaults/prefix"]
                        .iter()
                        .find_map(|p| body.pointer(p).and_then(Value::as_str))
                        .map(str::to_string)
                });
                Ok(Session {
                    prefix: prefix.map_or(String::new(), |p| format!("/{}", p.trim_matches('/'))),
                    auth,
                })
            })
            .await
    }

    /// The `Authorization` header from the environment, fetching an OAuth2 token if asked.
    async fn authorization(&self, table: &TableIdent) -> Result<Option<String>> {
        if let Ok(token) = std::env::var("XLAKE_REST_TOKEN") {
            return Ok(Some(format!("Bearer {token}")));
        }
        let Ok(credential) = std::env::var("XLAKE_REST_CREDENTIAL") else {
            return Ok(None);
        };
        let (id, secret) = credential.split_once(':').unwrap_or(("", &credential));
        let url = std::env::var("XLAKE_REST_OAUTH2_URI")
            .unwrap_or_else(|_| format!("{}/v1/oauth/tokens", self.base));
        let scope = std::env::var("XLAKE_REST_SCOPE").unwrap_or_else(|_| "catalog".into());
        let form = [
            ("grant_type", "client_credentials"),
            ("client_id", id),
            ("client_secret", secret),
            ("scope", &scope),
        ];
        let (status, body) = self
            .send(table, self.http.post(&url).form(&form), None)
            .await?;
        match body.get("access_token").and_then(Value::as_str) {
            Some(token) if status == 200 => Ok(Some(format!("Bearer {token}"))),
            _ => Err(self.error(
                table,
                format!(
                    "OAuth2 token request refused: HTTP {status} {} (check XLAKE_REST_CREDENTIAL)",
                    body.get("error").and_then(Value::as_str).unwrap_or("")
                ),
            )),
        }
    }

    fn table_url(&self, session: &Session, table: &TableIdent) -> String {
        format!(
            "{}/tables/{}",
            self.namespace_url(session, table),
            utf8_percent_encode(&table.name, NON_ALPHANUMERIC)
        )
    }

    fn namespace_url(&self, session: &Session, table: &TableIdent) -> String {
        let ns = table.namespace.join("\u{1f}");
        format!(
            "{}/v1{}/namespaces/{}",
            self.base,
            session.prefix,
            utf8_percent_encode(&ns, NON_ALPHANUMERIC)
        )
    }

    /// `POST …/register`, with `overwrite` to move an existing entry.
    async fn post_register(
        &self,
        table: &TableIdent,
        location: &str,
        overwrite: bool,
    ) -> Result<Swap> {
        let s = self.session(table).await?;
        let mut body = json!({"name": table.name, "metadata-location": location});
        if overwrite {
            body["overwrite"] = json!(true);
        }
        let url = format!("{}/register", self.namespace_url(s, table));
        let (status, reply) = self
            .send(table, self.http.post(url).json(&body), s.auth.as_deref())
            .await?;
        match status {
            200 => Ok(Swap::Done),
            // `overwrite` replaces an existing entry whatever it holds: a conflict then is
            // a server that does not move entries this way, not a race to retry.
            409 if overwrite => Err(self.refused(
                table,
                "register with overwrite (this server does not move an entry by register; unset XLAKE_REST_MOVE to move it by commit)",
                status,
                &reply,
            )),
            409 => Ok(Swap::Lost),
            _ => Err(self.refused(table, "register", status, &reply)),
        }
    }
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

#[async_trait]
impl Catalog for RestCatalog {
    fn describe(&self) -> String {
        self.uri.clone()
    }

    async fn load_pointer(&self, table: &TableIdent) -> Result<Option<Pointer>> {
        let s = self.session(table).await?;
        let url = self.table_url(s, table);
        let (status, mut body) = self
            .send(table, self.http.get(url), s.auth.as_deref())
            .await?;
        match status {
            200 => match body.get("metadata-location").and_then(Value::as_str) {
                Some(l) => Ok(Some(Pointer {
                    location: l.to_string(),
                    token: None,
                    metadata: Some(body["metadata"].take()),
                })),
                None => Err(self.error(table, "load table: reply has no metadata-location")),
            },
            404 => Ok(None),
            _ => Err(self.refused(table, "load table", status, &body)),
        }
    }

    async fn register(&self, table: &TableIdent, location: &str) -> Result<Swap> {
        let s = self.session(table).await?;
        let url = format!("{}/v1{}/namespaces", self.base, s.prefix);
        let body = json!({"namespace": table.namespace, "properties": {}});
        let (status, reply) = self
            .send(table, self.http.post(url).json(&body), s.auth.as_deref())
            .await?;
        if !matches!(status, 200 | 409) {
            return Err(self.refused(table, "create namespace", status, &reply));
        }
        self.post_register(table, location, false).await
    }

    async fn swap(&self, table: &TableIdent, expected: &Pointer, location: &str) -> Result<Swap> {
        match self.load_pointer(table).await? {
            Some(p) if p.location == expected.location => {
                self.post_register(table, location, true).await
            }
            _ => Ok(Swap::Lost),
        }
    }

    fn moves_by_commit(&self) -> bool {
        self.by_commit
    }

    async fn commit(
        &self,
        table: &TableIdent,
        expected: &Pointer,
        ours: &Value,
    ) -> Result<Committed> {
        let entry = expected.metadata.as_ref().unwrap_or(&Value::Null);
        let body = json!({
            "identifier": {"namespace": table.namespace, "name": table.name},
            "requirements": crate::commit::requirements(entry),
            "updates": crate::commit::updates(entry, ours),
        });
        let s = self.session(table).await?;
        let url = self.table_url(s, table);
        let (status, reply) = self
            .send(table, self.http.post(url).json(&body), s.auth.as_deref())
            .await?;
        match status {
            200 => match reply.get("metadata-location").and_then(Value::as_str) {
                Some(l) => Ok(Committed::Done(l.to_string())),
                None => Err(self.error(table, "commit: reply has no metadata-location")),
            },
            409 => Ok(Committed::Lost),
            // 500, 502, 504: the commit's state is unknown; the next sync reads the entry.
            _ => Err(self.refused(table, "commit", status, &reply)),
        }
    }
}
