//! Who may ask `serve` for what: the API key Hudi sends in `HUDI-CALLBACK-KEY`, and the
//! locations (table roots and data files) a request may make the service read or write.

use std::path::{Component, Path, PathBuf};

use subtle::ConstantTimeEq;

use crate::error::{ConfigError, ConfigKind};

/// The default of `hoodie.write.commit.callback.http.api.key` in Apache Hudi
/// (`HoodieWriteCommitCallbackConfig.CALLBACK_HTTP_API_KEY_VALUE`): public, so it
/// authenticates nobody.
pub const HUDI_DEFAULT_KEY: &str = "hudi_write_commit_http_callback";

/// The header Hudi's `HoodieWriteCommitHttpCallbackClient` puts the key in.
pub const KEY_HEADER: &str = "HUDI-CALLBACK-KEY";

/// The key a request must present, if any.
#[derive(Clone)]
pub struct Key(Option<Vec<u8>>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Key(set)"
        } else {
            "Key(none)"
        })
    }
}

impl Key {
    /// A required key. Refuses an empty key and, unless `allow_default`, Hudi's default.
    pub fn required(key: &str, allow_default: bool) -> Result<Self, ConfigError> {
        let key = key.trim_end_matches(['\r', '\n']);
        if key.is_empty() {
            return Err(ConfigError::access("the callback key is empty".into()));
        }
        if key == HUDI_DEFAULT_KEY && !allow_default {
            return Err(ConfigError::access(format!(
                "the callback key is Hudi's public default ({HUDI_DEFAULT_KEY:?}), which anyone can send; set hoodie.write.commit.callback.http.api.key to a secret, or pass --allow-default-key"
            )));
        }
        Ok(Self(Some(key.as_bytes().to_vec())))
    }

    /// The service's key: `XLAKE_CALLBACK_KEY` (`env`), else the first line of
    /// `key_file`; none only with `insecure` (`--insecure-no-key`).
    pub fn configured(
        env: Option<String>,
        key_file: Option<&Path>,
        insecure: bool,
        allow_default: bool,
    ) -> Result<Self, ConfigError> {
        let from_file = key_file
            .map(|p| {
                std::fs::read_to_string(p)
                    .map(|t| t.lines().next().unwrap_or_default().to_string())
                    .map_err(|e| {
                        let message = format!("--key-file {}: {e}", p.display());
                        ConfigError::caused(ConfigKind::Access, message, e)
                    })
            })
            .transpose()?;
        match (env.filter(|k| !k.is_empty()).or(from_file), insecure) {
            (Some(_), true) => Err(ConfigError::access("--insecure-no-key contradicts the key given (XLAKE_CALLBACK_KEY or --key-file)".into())),
            (Some(k), false) => Self::required(&k, allow_default),
            (None, true) => Ok(Self::none()),
            (None, false) => Err(ConfigError::access("a callback key is required: set XLAKE_CALLBACK_KEY or pass --key-file (the value of hoodie.write.commit.callback.http.api.key), or --insecure-no-key".into())),
        }
    }

    /// No key: every request is accepted (`--insecure-no-key`).
    pub fn none() -> Self {
        Self(None)
    }

    /// Whether a key is required.
    pub fn is_required(&self) -> bool {
        self.0.is_some()
    }

    /// Whether `presented` is the key, compared in constant time (for keys of one length).
    pub fn accepts(&self, presented: Option<&[u8]>) -> bool {
        match (&self.0, presented) {
            (None, _) => true,
            (Some(key), Some(p)) => bool::from(key.as_slice().ct_eq(p)),
            (Some(_), None) => false,
        }
    }
}

/// A location brought to one spelling for comparison: `s3a://`/`s3n://` as `s3://`,
/// `file:` URLs as paths, `.` and `..` resolved, symlinks on local disk resolved (for
/// the longest existing prefix), no trailing slash.
pub fn normalise(location: &str) -> Result<String, ConfigError> {
    let location = location.trim();
    match url::Url::parse(location) {
        Ok(u) if u.scheme() == "file" => {
            let path = u
                .to_file_path()
                .map_err(|()| ConfigError::access(format!("{location}: not a local file URL")))?;
            local(&path)
        }
        Ok(u) if u.scheme().len() > 1 => {
            let scheme = match u.scheme() {
                "s3a" | "s3n" => "s3",
                "abfs" | "abfss" | "wasb" | "wasbs" => "az",
                "gcs" => "gs",
                s => s,
            };
            let segments = lexical(u.path().split('/')).ok_or_else(|| {
                ConfigError::access(format!("{location}: '..' leaves the bucket"))
            })?;
            // `abfss://<container>@<account>.dfs.core.windows.net/…` names the container
            // before the `@`: without it every container of an account looked alike
            // (hostile review hr14). Other stores ignore a user name (S3 and GCS take the
            // bucket from the host), which is not kept: it would show on /metrics.
            let host = u.host_str().unwrap_or_default().to_ascii_lowercase();
            let host = match u.username() {
                user if !user.is_empty() && scheme == "az" => format!("{user}@{host}"),
                _ => host,
            };
            Ok(format!("{scheme}://{host}/{}", segments.join("/"))
                .trim_end_matches('/')
                .to_string())
        }
        _ => local(Path::new(location)),
    }
}

/// `.` and `..` resolved without touching storage; None if `..` climbs above the root.
fn lexical<'a>(parts: impl Iterator<Item = &'a str>) -> Option<Vec<&'a str>> {
    let mut out = Vec::new();
    for part in parts {
        match part {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            p => out.push(p),
        }
    }
    Some(out)
}

/// An absolute local path with `..` resolved and the symlinks of its longest existing
/// prefix resolved.
fn local(path: &Path) -> Result<String, ConfigError> {
    let abs = std::path::absolute(path).map_err(|e| {
        let message = format!("{}: {e}", path.display());
        ConfigError::caused(ConfigKind::Access, message, e)
    })?;
    let mut clean = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                clean.pop();
            }
            Component::Normal(p) => clean.push(p),
            _ => {}
        }
    }
    // Resolve symlinks on the part that exists; keep the rest as written.
    let mut existing = clean.clone();
    let mut rest = Vec::new();
    let resolved = loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            break real;
        }
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => break existing,
        }
    };
    let full = rest.into_iter().rev().fold(resolved, |p, n| p.join(n));
    Ok(full.to_string_lossy().trim_end_matches('/').to_string())
}

/// Whether normalised `location` is `root` or lies under it.
fn under(location: &str, root: &str) -> bool {
    location == root
        || location
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/') || root.ends_with('/') || root.is_empty())
}

/// The locations a request may touch: tables under an allowed prefix or listed in the
/// config file, and data files under the table, an allowed prefix or a listed table.
#[derive(Debug, Clone, Default)]
pub struct Allowed {
    prefixes: Vec<String>,
    tables: Vec<String>,
}

impl Allowed {
    /// From `--allow` prefixes and the config's table locations.
    pub fn new(prefixes: &[String], tables: &[String]) -> Result<Self, ConfigError> {
        let all = |v: &[String]| {
            v.iter()
                .map(|l| normalise(l))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            prefixes: all(prefixes)?,
            tables: all(tables)?,
        })
    }

    /// The service's allowed locations: the `prefixes` of `--allow` and of a job config's
    /// `allow`, and the config's `tables`; refuses to start with none (any location could
    /// be named).
    pub fn for_service(prefixes: &[String], tables: &[String]) -> Result<Self, ConfigError> {
        let allowed = Self::new(prefixes, tables)?;
        if allowed.is_empty() {
            return Err(ConfigError::access("nothing to serve: give --allow <location-prefix> or --config with the tables to serve".into()));
        }
        Ok(allowed)
    }

    /// Whether nothing at all is allowed.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty() && self.tables.is_empty()
    }

    /// The normalised table location if the table may be served.
    pub fn table(&self, location: &str) -> Option<String> {
        let n = normalise(location).ok()?;
        let ok = self.tables.contains(&n) || self.prefixes.iter().any(|p| under(&n, p));
        ok.then_some(n)
    }

    /// The roots data files of a served table may lie under (the table itself first).
    pub fn data_roots(&self, table: &str) -> Vec<String> {
        std::iter::once(table.to_string())
            .chain(self.prefixes.iter().cloned())
            .chain(self.tables.iter().cloned())
            .collect()
    }
}

/// Whether a data file `path` (table-relative, or absolute) lies under one of `roots`
/// (normalised). A relative path may not climb out of the table with `..`.
pub fn data_file_allowed(path: &str, roots: &[String]) -> bool {
    let absolute =
        path.starts_with('/') || url::Url::parse(path).is_ok_and(|u| u.scheme().len() > 1);
    if !absolute {
        return path.split('/').all(|p| p != "..");
    }
    normalise(path).is_ok_and(|n| roots.iter().any(|r| under(&n, r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_exactly_and_refuse_hudis_default() {
        let k = Key::required("s3cret\n", false).unwrap();
        assert!(k.accepts(Some(b"s3cret")));
        assert!(!k.accepts(Some(b"s3cre")));
        assert!(!k.accepts(Some(b"s3cretx")));
        assert!(!k.accepts(None));
        assert!(Key::required(HUDI_DEFAULT_KEY, false).is_err());
        assert!(Key::required(HUDI_DEFAULT_KEY, true).is_ok());
        assert!(Key::required("", false).is_err());
        assert!(Key::none().accepts(None));
    }

    #[test]
    fn locations_are_normalised_before_the_prefix_check() {
        assert_eq!(
            normalise("s3a://Bucket/a/./b/../t/").unwrap(),
            "s3://bucket/a/t"
        );
        // URL parsing already resolves `..`, never above the bucket.
        assert_eq!(normalise("s3://b/../x").unwrap(), "s3://b/x");
        assert_eq!(normalise("file:///x/y/../z").unwrap(), "/x/z");
        let allowed = Allowed::new(&["s3://lake/tables".into()], &[]).unwrap();
        assert!(allowed.table("s3a://lake/tables/t1").is_some());
        assert!(allowed.table("s3://lake/tables2/t1").is_none());
        assert!(allowed.table("s3://lake/tables/../secrets").is_none());
        let roots = allowed.data_roots("s3://lake/tables/t1");
        assert!(data_file_allowed("p=1/f.parquet", &roots));
        assert!(!data_file_allowed("../../etc/passwd", &roots));
        assert!(!data_file_allowed("file:///etc/hostname", &roots));
        assert!(!data_file_allowed("/etc/hostname", &roots));
        assert!(data_file_allowed("s3a://lake/tables/t1/f.parquet", &roots));
    }

    #[test]
    fn an_azure_container_named_before_the_at_is_part_of_the_location() {
        let account = "acct.dfs.core.windows.net";
        let allowed = Allowed::new(&[format!("abfss://lake@{account}/tables")], &[]).unwrap();
        assert!(allowed
            .table(&format!("abfss://lake@{account}/tables/t"))
            .is_some());
        assert!(allowed
            .table(&format!("abfss://secret@{account}/tables/t"))
            .is_none());
        assert!(allowed
            .table(&format!("abfss://{account}/tables/t"))
            .is_none());
        let roots = allowed.data_roots(&format!("abfss://lake@{account}/tables/t"));
        assert!(data_file_allowed(
            &format!("abfss://lake@{account}/tables/t/f.parquet"),
            &roots
        ));
        assert!(!data_file_allowed(
            &format!("abfss://other@{account}/tables/t/f.parquet"),
            &roots
        ));
        // S3 takes the bucket from the host; a user name there is not shown.
        assert_eq!(normalise("s3://key:secret@lake/t").unwrap(), "s3://lake/t");
    }
}
