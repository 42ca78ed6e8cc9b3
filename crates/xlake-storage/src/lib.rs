//! # xlake-storage: one storage interface for sources and target
//!
//! A [`TableStore`] is a table's root location on an `object_store` backend: local disk
//! by default, `s3://`, `gs://` and `az://` with the `cloud` feature and options from
//! the environment. Only `scheme://` makes a URL (`tbl:1` is a path); a scheme no build
//! opens (`hdfs://`) is refused saying so, and a local root must be an existing folder. Sources read their logs through it and the Iceberg target writes
//! through it, so there is one I/O stack and one place for credentials.
//!
//! On a local root opened by path, folders are listed (`local_list`: names alone with
//! `getdents64` on Linux, given as [`Names`], one buffer) and whole files read directly
//! with `std::fs` (faster, with object_store's results and errors); files that are
//! never rewritten in place ([`TableStore::get_written_once`]: Iceberg metadata) are
//! mapped, not copied, when 256 KiB or more on a local disk's file system on Linux
//! (`local_read`, the workspace's one `unsafe` block). Everything else goes through
//! object_store.
//!
//! Paths given to a [`TableStore`] are either relative to the table root or absolute
//! locations inside the same store. [`TableStore::put_if_absent`] is the primitive that
//! makes commits atomic: it never overwrites. Transient failures are retried
//! ([`RetryPolicy`]); a [`TableStore::journaled`] handle records what it writes, so work
//! abandoned before its commit can be deleted again ([`Journal`]).
//!
//! [`footer`] reads Parquet footers and [`avro`] Avro container headers, the two file
//! layouts both sides need to look into.
//!
//! `faults` wraps any backend to fail, delay or half-complete chosen requests, for
//! tests and failure drills: built for this crate's unit tests and, with the `testing`
//! feature, for the integration tests (never in the binary).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod avro;
mod change;
mod deferred;
#[cfg(any(test, feature = "testing"))]
pub mod faults;
pub mod footer;
mod local_list;
mod local_read;
mod local_tree;
mod names;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use local_read::Whole;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions};

pub use change::Change;
pub use names::Names;
/// A body to write: one `Bytes`, or parts written one after the other.
pub use object_store::PutPayload;
use url::Url;

/// Errors of storage access; each names the location involved.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The table location cannot be used.
    #[error("invalid table location {location}: {reason}")]
    InvalidLocation {
        /// The location as given.
        location: String,
        /// Why it is refused.
        reason: String,
    },
    /// The store a remote location names cannot be set up (its URL or its settings are
    /// refused, or the build has no cloud stores).
    #[error("invalid table location {location}: {source}")]
    Unopenable {
        /// The location as given.
        location: String,
        /// Why the store could not be set up.
        #[source]
        source: RemoteError,
    },
    /// The object does not exist.
    #[error("{location}: not found")]
    NotFound {
        /// Full location.
        location: String,
    },
    /// A location outside the table and the allowed ones ([`TableStore::confined`]):
    /// refused before any request, so the answer is the same whether it exists or not.
    #[error("a location outside the table and the allowed locations (named in the log); nothing there was read")]
    Outside {
        /// The location as named.
        location: String,
    },
    /// The store cannot write an object only if it is absent, so commits could not be
    /// atomic.
    #[error("{location}: this store does not support put-if-absent (conditional writes), which xlake's atomic commit relies on; {reason}. If exactly one xlake process ever writes this table, pass --single-writer")]
    NoPutIfAbsent {
        /// Full location of the write that needed it.
        location: String,
        /// What showed it.
        reason: String,
    },
    /// Any other failure of the backend.
    #[error("{location}: {source}")]
    Backend {
        /// Full location.
        location: String,
        /// The backend's error.
        #[source]
        source: object_store::Error,
    },
}

/// Why the store of a remote location could not be set up; each reads as the library's
/// own message, which stays reachable as the source.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// object_store refused the URL or the settings.
    #[error(transparent)]
    Store(#[from] object_store::Error),
    /// object_store does not recognise the URL.
    #[error("{0}")]
    Url(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The URL's path is not an object path.
    #[error(transparent)]
    Path(#[from] object_store::path::Error),
    /// The location names no store this build opens.
    #[error("{0}")]
    Unsupported(String),
}

/// Result of [`TableStore::put_if_absent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The object was created.
    Created,
    /// An object already existed there; nothing was written.
    AlreadyExists,
}

/// A listed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path relative to the table root.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification time, ms since the epoch.
    pub modified_ms: i64,
    /// The object's entity tag where the listing gives one ([`Stamp::e_tag`]).
    pub e_tag: Option<String>,
}

impl Entry {
    /// The listed object's time and tag.
    pub fn stamp(&self) -> Stamp {
        Stamp {
            modified_ms: self.modified_ms,
            e_tag: self.e_tag.clone(),
        }
    }
}

/// What tells an object from another written at the same path since it was last looked
/// at, as a listing, a read or a lookup gives it: its modification time, and its entity
/// tag where the store gives one. An object store's time is whole seconds (S3's listing;
/// any store's `Last-Modified` on a read) and a local file's a clock tick: an object
/// written anew within it keeps its time, not its tag. The tag is the store's `ETag`
/// (S3 and GCS: the content's MD5 for a single-part upload; Azure: changed by every
/// write), surrounding quotes and a weak mark dropped so that a listing's and a read's
/// compare equal; on a local disk the file's inode, size, modification and creation
/// times (`local_list`), which a copy with its times kept does not keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Last modification time, ms since the epoch.
    pub modified_ms: i64,
    /// The entity tag, `None` where the store gives none.
    pub e_tag: Option<String>,
}

impl Stamp {
    /// The stamp of an object as object_store describes it.
    fn of(meta: &object_store::ObjectMeta) -> Self {
        Stamp {
            modified_ms: meta.last_modified.timestamp_millis(),
            e_tag: tag_of(meta),
        }
    }
}

/// An object's entity tag as object_store gives it, without the quotes and weak mark
/// (`W/"…"`) that a response header carries and an Azure listing does not.
fn tag_of(meta: &object_store::ObjectMeta) -> Option<String> {
    let tag = meta.e_tag.as_deref()?;
    Some(tag.trim_start_matches("W/").trim_matches('"').to_string())
}

/// What a listing from an offset does with a name ([`TableStore::list_digit_names_from`]).
enum Step {
    /// Keep the name (if it is directly under the folder).
    Take,
    /// Go on past it.
    Skip,
    /// Nothing more to find: end the listing.
    Stop,
}

/// A table root on some object store.
#[derive(Debug, Clone)]
pub struct TableStore {
    store: Arc<dyn ObjectStore>,
    /// Root inside the store.
    root: Path,
    /// Location string of the root as written into metadata (no trailing slash).
    location: String,
    /// `scheme://authority` for remote stores, empty for local disk.
    origin: String,
    /// The operator vouches that no other process writes the table: put-if-absent may
    /// fall back to a check followed by a plain write.
    single_writer: bool,
    /// Local disk, whose put-if-absent (a hard link) is known to be atomic.
    known_atomic: bool,
    /// Outcome of the put-if-absent probe, made once per store (other stores only).
    probed: Arc<tokio::sync::OnceCell<Result<(), String>>>,
    /// The store as far as put-if-absent is concerned (see [`Self::put_if_absent_identity`]):
    /// its origin and the endpoint it was opened with; `None` for a store built by the
    /// caller, whose behaviour is its own.
    identity: Option<String>,
    /// How transient failures are retried.
    retry: RetryPolicy,
    /// The root's folder when it is local disk opened by path: folders are listed and whole
    /// files read there directly ([`Self::list_names`], [`Self::list_dir`], [`Self::get`]).
    local_root: Option<std::path::PathBuf>,
    /// Where this handle records what it writes (see [`Self::journaled`]).
    journal: Option<Journal>,
    /// Which locations outside the table root may be touched (see [`Self::confined`]).
    confinement: Option<Confinement>,
    /// Writes held back until [`Self::flush`] (see [`Self::deferring`]).
    deferred: Option<deferred::Deferred>,
}

/// Which absolute locations outside the table root a [`TableStore::confined`] handle may
/// touch: a predicate over the location as the log names it, decided before any request.
#[derive(Clone)]
pub struct Confinement(Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl Confinement {
    /// Locations for which `allowed` returns true may be touched.
    pub fn new(allowed: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(allowed))
    }
}

impl std::fmt::Debug for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Confinement")
    }
}

/// The paths a [`TableStore::journaled`] handle wrote or tried to write, in order: what
/// to delete when the work they belong to is abandoned before anything refers to them.
/// A path is recorded before its write starts (a write cut off midway may still land);
/// one that put-if-absent then finds already there is struck off (it is not ours).
#[derive(Debug, Clone, Default)]
pub struct Journal(Arc<std::sync::Mutex<Vec<Option<String>>>>);

impl Journal {
    fn record(&self, path: &str) -> Option<usize> {
        let mut paths = self.0.lock().ok()?;
        paths.push(Some(path.to_string()));
        Some(paths.len() - 1)
    }

    fn strike(&self, entry: Option<usize>) {
        if let (Some(i), Ok(mut paths)) = (entry, self.0.lock()) {
            if let Some(p) = paths.get_mut(i) {
                *p = None;
            }
        }
    }

    /// How many entries are recorded: a mark for [`Self::since`].
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |paths| paths.len())
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The paths recorded after `mark`, those struck off left out.
    pub fn since(&self, mark: usize) -> Vec<String> {
        self.0.lock().map_or(Vec::new(), |paths| {
            paths
                .get(mark..)
                .unwrap_or_default()
                .iter()
                .flatten()
                .cloned()
                .collect()
        })
    }
}

/// How a [`TableStore`] retries a request that failed transiently (a dropped connection,
/// a timeout, a server error such as S3's 503 SlowDown, an I/O error): the same request
/// again after a pause drawn at random between half and all of a bound that doubles each
/// time (exponential backoff with jitter, so processes that failed together do not retry
/// together). Requests refused for a reason (not found, already exists, permission
/// denied, not supported) are never retried, nor is a backend's generic error that
/// carries an OS refusal (not a directory, permission denied, ...). Cloud stores are
/// opened with `object_store`'s own retries off, so this is the one retry layer: every
/// retry is counted ([`retries`]) and each attempt is bounded by the client's request
/// timeout (object_store's `timeout`, 30 s unless set), so a connection that never
/// answers costs at most `attempts` timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1: no retry).
    pub attempts: u32,
    /// Bound of the pause before the first retry.
    pub first_backoff: Duration,
    /// Largest bound of a pause.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 4 attempts, pausing up to 200 ms, 400 ms, 800 ms (at least half of each).
    fn default() -> Self {
        Self {
            attempts: 4,
            first_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// Retries made by every [`TableStore`] of this process (see [`retries`]).
static RETRIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many requests this process's stores have retried since it started: one per
/// request sent again after a transient failure (serve exports it in `/metrics`).
pub fn retries() -> u64 {
    RETRIES.load(std::sync::atomic::Ordering::Relaxed)
}

/// A pause between half of `bound` and `bound`, drawn at random: the jitter of
/// [`RetryPolicy`]'s backoff (the network catalogs' retries use it too).
pub fn jittered(bound: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    // Each RandomState is seeded afresh: a cheap random draw without a dependency.
    let draw = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let half = bound / 2;
    let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    half + Duration::from_nanos(draw.checked_rem(nanos.max(1)).unwrap_or(0))
}

impl RetryPolicy {
    /// No retries: every failure is final.
    pub fn none() -> Self {
        Self {
            attempts: 1,
            ..Self::default()
        }
    }
}

/// Worth trying again: a failure that says nothing about the request itself. A backend's
/// generic error is transient unless the operating system's reason inside it is one no
/// retry can change (a local path that is a file, missing, forbidden or malformed): those
/// fail at once. The local backend's own refusals, with no operating system's reason
/// inside (a name it does not take, `x#1`), fail at once too.
fn transient(e: &object_store::Error) -> bool {
    match e {
        object_store::Error::Generic {
            store: "LocalFileSystem",
            source,
        } => has_io_error(source.as_ref()) && !refused_by_os(source.as_ref()),
        object_store::Error::Generic { source, .. } => !refused_by_os(source.as_ref()),
        object_store::Error::JoinError { .. } => true,
        _ => false,
    }
}

/// Whether there is an I/O error somewhere in `e`'s chain.
fn has_io_error(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err.is::<std::io::Error>() {
            return true;
        }
        next = err.source();
    }
    false
}

/// Whether an I/O error somewhere in `e`'s chain is a refusal: retrying the same request
/// gets the same answer.
fn refused_by_os(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind::*;
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return is_link_loop(io)
                || matches!(
                    io.kind(),
                    NotFound
                        | PermissionDenied
                        | NotADirectory
                        | IsADirectory
                        | InvalidInput
                        | InvalidFilename
                        | ReadOnlyFilesystem
                        | AlreadyExists
                        | Unsupported
                );
        }
        next = err.source();
    }
    false
}

/// Whether `e` is a loop of symbolic links (`ELOOP`), which no retry undoes (its
/// `ErrorKind` is not a stable one to match).
#[cfg(target_os = "linux")]
fn is_link_loop(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
}

/// See the Linux version: elsewhere such an error is retried as any other.
#[cfg(not(target_os = "linux"))]
fn is_link_loop(_: &std::io::Error) -> bool {
    false
}

/// The size a local folder reports when it fits in one block of its file system (ext4's
/// 4 KiB: about 100 entries of short names); such a folder is listed on the calling thread.
const ONE_BLOCK: u64 = 4096;

/// Remote schemes that object_store's cloud clients (the `cloud` feature) open.
const CLOUD_SCHEMES: [&str; 8] = ["s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl"];

/// The scheme of a location written as a URL (`s3://b/t`, `file:///t`, `file:/t`), lower
/// case; `None` for a path. Only `scheme://` (and `file:`) makes a URL, so a relative path
/// with a colon (`tbl:1`) stays a path.
fn url_scheme(location: &str) -> Option<String> {
    if location
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("file:"))
    {
        return Some("file".into());
    }
    let (scheme, _) = location.split_once("://")?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        // `C://x` is a Windows drive, not a scheme.
        && scheme.len() > 1;
    valid.then(|| scheme.to_ascii_lowercase())
}

/// A location told apart: a local folder (absolute) or a remote URL of a cloud scheme.
enum Resolved {
    Local(std::path::PathBuf),
    Remote(Url),
}

/// Tell a location's kind from its spelling (no I/O): see [`TableStore::open`].
fn resolve(location: &str) -> Result<Resolved, StorageError> {
    let invalid = |reason: String| StorageError::InvalidLocation {
        location: location.to_string(),
        reason,
    };
    let trimmed = location.trim_end_matches('/');
    if trimmed.is_empty() {
        return Err(invalid("not a table folder".into()));
    }
    let fs_path = match url_scheme(trimmed).as_deref() {
        None => std::path::PathBuf::from(trimmed),
        // `file:/x` (Hadoop style) and `file:///x` both name /x.
        Some("file") => Url::parse(trimmed)
            .ok()
            .and_then(|u| u.to_file_path().ok())
            .ok_or_else(|| invalid("not a local file URL".into()))?,
        Some(scheme) if CLOUD_SCHEMES.contains(&scheme) => {
            return Url::parse(trimmed)
                .map(Resolved::Remote)
                .map_err(|e| invalid(e.to_string()));
        }
        Some(scheme) => return Err(invalid(unsupported_scheme(scheme))),
    };
    std::path::absolute(&fs_path)
        .map(|abs| Resolved::Local(without_parent_dirs(abs)))
        .map_err(|e| invalid(e.to_string()))
}

/// `abs` with its `..` resolved as the operating system resolves them (what precedes the
/// last `..` canonical, what follows as written, so a link named after it stays a link):
/// a table reached as `/a/../a/t` is `/a/t`, and the locations its metadata records are
/// ones every spelling of the table reads. As written when that part does not exist.
fn without_parent_dirs(abs: std::path::PathBuf) -> std::path::PathBuf {
    use std::path::Component;
    let components: Vec<Component<'_>> = abs.components().collect();
    let Some(last) = components.iter().rposition(|c| *c == Component::ParentDir) else {
        return abs;
    };
    let head: std::path::PathBuf = components[..=last].iter().collect();
    match std::fs::canonicalize(&head) {
        Ok(real) => components[last + 1..]
            .iter()
            .fold(real, |path, c| path.join(c)),
        Err(_) => abs,
    }
}

/// Why a scheme no build of xlake opens, and what would work instead.
fn unsupported_scheme(scheme: &str) -> String {
    match scheme {
        "hdfs" | "viewfs" | "webhdfs" | "swebhdfs" => format!(
            "{scheme}:// is not supported by any xlake build (object_store, its storage layer, has no HDFS client); \
             mount the file system and pass the local path, or use its S3 gateway with an s3:// location (built with `--features cloud`)"
        ),
        "wasb" | "wasbs" => format!(
            "{scheme}:// (the legacy Azure Blob driver) is not supported; name the same container as az://container/path or abfss://container@account.dfs.core.windows.net/path (built with `--features cloud`)"
        ),
        "http" | "https" => format!(
            "{scheme}:// is not supported: a table needs a store that lists and writes objects conditionally"
        ),
        _ => format!(
            "unknown scheme {scheme}://; xlake opens local paths (or file://) and, built with `--features cloud`, {}",
            CLOUD_SCHEMES.map(|s| format!("{s}://")).join(", ")
        ),
    }
}

/// The cloud store `url` names and the path of its root, configured from `options`
/// (object_store's keys, lower case; unknown ones ignored) as `object_store::parse_url_opts`
/// would, except that object_store's own retries are off: [`TableStore::retrying`] is the
/// one retry layer, so that every retry is bounded, jittered and counted.
#[cfg(feature = "cloud")]
fn cloud_store(
    url: &Url,
    options: Vec<(String, String)>,
) -> Result<(Box<dyn ObjectStore>, Path), RemoteError> {
    use object_store::aws::AmazonS3Builder;
    use object_store::azure::MicrosoftAzureBuilder;
    use object_store::gcp::GoogleCloudStorageBuilder;
    use object_store::{ObjectStoreScheme, RetryConfig};
    let (scheme, root) =
        ObjectStoreScheme::parse(url).map_err(|e| RemoteError::Url(Box::new(e)))?;
    let retry = RetryConfig {
        max_retries: 0,
        ..RetryConfig::default()
    };
    macro_rules! configured {
        ($builder:ty) => {{
            let builder = options.into_iter().fold(
                <$builder>::new().with_url(url.to_string()),
                |builder, (key, value)| match key.parse() {
                    Ok(k) => builder.with_config(k, value),
                    Err(_) => builder,
                },
            );
            let store = builder.with_retry(retry).build()?;
            Box::new(store) as Box<dyn ObjectStore>
        }};
    }
    let store = match scheme {
        ObjectStoreScheme::AmazonS3 => configured!(AmazonS3Builder),
        ObjectStoreScheme::GoogleCloudStorage => configured!(GoogleCloudStorageBuilder),
        ObjectStoreScheme::MicrosoftAzure => configured!(MicrosoftAzureBuilder),
        other => {
            return Err(RemoteError::Unsupported(format!(
                "{other:?} is not a cloud store"
            )))
        }
    };
    Ok((store, root))
}

/// Whether `there` holds exactly the bytes of `body`.
pub fn same(there: &Bytes, body: &PutPayload) -> bool {
    let mut rest = &there[..];
    there.len() == body.content_length()
        && body
            .iter()
            .all(|part| match rest.split_at_checked(part.len()) {
                Some((head, tail)) => {
                    rest = tail;
                    head == &part[..]
                }
                None => false,
            })
}

impl TableStore {
    /// Open a table root: a local directory path (`/data/t`, `./t`, `tbl:1`,
    /// `file:///data/t`, `file:/data/t`), or a URL (`s3://bucket/t`) when built with the
    /// `cloud` feature. Only `scheme://` makes a URL: anything else is a path. A local
    /// path must be an existing folder.
    pub fn open(location: &str) -> Result<Self, StorageError> {
        match resolve(location)? {
            Resolved::Local(path) => Self::open_local(&path, location),
            Resolved::Remote(url) => {
                Self::open_remote(&url).map_err(|source| StorageError::Unopenable {
                    location: location.to_string(),
                    source,
                })
            }
        }
    }

    /// The [`Self::location`] that [`Self::open`] gives `location`, without opening it or
    /// looking whether it exists: two spellings of one table (`./t/`, `/data/t`) give
    /// the same name. Remote locations are named as with the `cloud` feature.
    pub fn normalized_location(location: &str) -> Result<String, StorageError> {
        match resolve(location)? {
            Resolved::Local(path) => Ok(path.to_string_lossy().trim_end_matches('/').into()),
            Resolved::Remote(url) => {
                let root =
                    Path::from_url_path(url.path()).map_err(|e| StorageError::InvalidLocation {
                        location: location.to_string(),
                        reason: e.to_string(),
                    })?;
                Ok(format!("{}://{}/{root}", url.scheme(), url.authority()))
            }
        }
    }

    /// A table root on local disk at the absolute `abs` (`location` as the user wrote
    /// it), which must be an existing folder.
    fn open_local(abs: &std::path::Path, location: &str) -> Result<Self, StorageError> {
        let invalid = |reason: String| StorageError::InvalidLocation {
            location: location.to_string(),
            reason,
        };
        match std::fs::metadata(abs) {
            Ok(m) if !m.is_dir() => return Err(invalid("a file, not a folder".into())),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(invalid("no such folder".into()))
            }
            Err(e) => return Err(invalid(e.to_string())),
        }
        // `abs` is absolute and has no `..` (`resolve`): taken as written, without the
        // `realpath` object_store's `from_filesystem_path` makes (a system call per
        // folder of the path, for every table of a job's pass).
        let root = Path::from_absolute_path(abs).map_err(|e| invalid(e.to_string()))?;
        let location = abs.to_string_lossy().trim_end_matches('/').to_string();
        Ok(Self {
            store: Arc::new(LocalFileSystem::new()),
            root,
            location,
            origin: String::new(),
            single_writer: false,
            known_atomic: true,
            probed: Arc::default(),
            identity: None,
            retry: RetryPolicy::default(),
            local_root: Some(abs.to_path_buf()),
            journal: None,
            confinement: None,
            deferred: None,
        })
    }

    #[cfg(feature = "cloud")]
    fn open_remote(url: &Url) -> Result<Self, RemoteError> {
        // object_store's option keys are lower case (`aws_endpoint`); the environment's
        // are upper case (`AWS_ENDPOINT`), as its own `from_env` builders read them.
        let options: Vec<(String, String)> = std::env::vars()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        let (store, mut root) = cloud_store(url, options.clone())?;
        // object_store 0.12 disagrees with itself on `az://`: its Azure builder takes the
        // host as the container (`az://container/path`, as delta-rs and fsspec write it)
        // while `parse_url` drops the first path segment as if it were the container, so
        // `az://lake/t` would be rooted at the container and `az://lake/a/t` at `t`.
        if url.scheme() == "az" {
            root = Path::from_url_path(url.path())?;
        }
        let origin = format!("{}://{}", url.scheme(), url.authority());
        let location = format!("{origin}/{root}");
        // The endpoint and conditional-write options are part of which store answers
        // (`s3://b` on AWS and on a MinIO are two stores, whose conditional writes may
        // differ; `AWS_CONDITIONAL_PUT=disabled` turns them off).
        let mut settings: Vec<String> = options
            .iter()
            .filter(|(k, _)| {
                (k.contains("endpoint") || k.contains("conditional"))
                    && ["aws_", "google_", "azure_"]
                        .iter()
                        .any(|p| k.starts_with(p))
            })
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        settings.sort_unstable();
        settings.dedup();
        let identity = match settings.is_empty() {
            true => origin.clone(),
            false => format!("{origin} ({})", settings.join(", ")),
        };
        let mut store = Self::from_store(Arc::from(store), root, location, origin);
        store.identity = Some(identity);
        Ok(store)
    }

    #[cfg(not(feature = "cloud"))]
    fn open_remote(url: &Url) -> Result<Self, RemoteError> {
        Err(RemoteError::Unsupported(format!(
            "{}:// locations need xlake built with `--features cloud` (cargo build --release --features cloud)",
            url.scheme()
        )))
    }

    /// A table root on a store built by the caller (a custom or wrapped backend):
    /// `root` inside the store, `location` as written into metadata, `origin` the
    /// `scheme://authority` prefix of remote locations (empty for local disk).
    pub fn from_store(
        store: Arc<dyn ObjectStore>,
        root: Path,
        location: String,
        origin: String,
    ) -> Self {
        Self {
            store,
            root,
            location,
            origin,
            single_writer: false,
            known_atomic: false,
            probed: Arc::default(),
            identity: None,
            retry: RetryPolicy::default(),
            local_root: None,
            journal: None,
            confinement: None,
            deferred: None,
        }
    }

    /// Retry transient failures as `policy` says (the default: [`RetryPolicy::default`]).
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Run `request` until it succeeds, fails for a reason, or runs out of attempts.
    async fn retrying<T, F, Fut>(&self, path: &str, mut request: F) -> object_store::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = object_store::Result<T>>,
    {
        let mut bound = self.retry.first_backoff;
        let mut attempt = 1;
        loop {
            match request().await {
                Err(e) if attempt < self.retry.attempts && transient(&e) => {
                    let pause = jittered(bound);
                    tracing::warn!(location = %self.absolute(path), attempt, error = %e, "transient storage error; retrying in {pause:?}");
                    RETRIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tokio::time::sleep(pause).await;
                    bound = (bound * 2).min(self.retry.max_backoff);
                    attempt += 1;
                }
                outcome => return outcome,
            }
        }
    }

    /// Whether a write that returned an error is known not to have happened: true for
    /// local disk, whose requests are system calls (no reply can be lost on the way
    /// back); over a network a failed request may still have taken effect. (A network
    /// file system mounted as a local path is taken to give the same guarantee.)
    pub fn failed_writes_are_definite(&self) -> bool {
        self.known_atomic
    }

    /// This store, recording in the returned [`Journal`] every path it writes.
    pub fn journaled(&self) -> (Self, Journal) {
        let journal = Journal::default();
        let mut store = self.clone();
        store.journal = Some(journal.clone());
        (store, journal)
    }

    /// This store, holding back what [`Self::put`] writes until [`Self::flush`] writes it
    /// all at once (a read of a held file is answered from memory; past 16 MiB held, a
    /// put flushes). For files under new names that nothing refers to before the flush:
    /// a commit's manifests and list, flushed beside the check before its commit point.
    /// Put-if-absent is never held.
    pub fn deferring(&self) -> Self {
        let mut store = self.clone();
        store.deferred = Some(deferred::Deferred::default());
        store
    }

    /// Write every held write of a [`Self::deferring`] handle, side by side; nothing held
    /// afterwards (but the writes that failed). Every write runs to its end, each with its
    /// retries, before the first error is returned: none is left to land after the caller
    /// has deleted what it abandons. Nothing to do on another handle.
    pub async fn flush(&self) -> Result<(), StorageError> {
        let Some(deferred) = &self.deferred else {
            return Ok(());
        };
        let mut direct = self.clone();
        direct.deferred = None;
        let outcomes: Vec<Result<(), StorageError>> = futures::stream::iter(deferred.held())
            .map(|(location, path, bytes)| {
                let direct = &direct;
                async move {
                    direct.put(&path, bytes).await?;
                    deferred.forget(&location);
                    Ok(())
                }
            })
            .buffer_unordered(deferred::FLUSH_CONCURRENCY)
            .collect()
            .await;
        outcomes.into_iter().collect()
    }

    /// The bytes a [`Self::deferring`] handle holds for `path`.
    fn held(&self, path: &str) -> Option<Bytes> {
        self.deferred.as_ref()?.get(&self.absolute(path))
    }

    /// Declare that exactly one process writes this table, so a store without
    /// put-if-absent is accepted: the write becomes a check followed by a plain write.
    pub fn with_single_writer(mut self, single_writer: bool) -> Self {
        self.single_writer = single_writer;
        self
    }

    /// Confine this handle: a location is touched only if `confinement` allows it (an
    /// absolute one as named; on local disk a table-relative one by its full location, so
    /// that a link inside the table cannot lead out); any other fails with
    /// [`StorageError::Outside`] before a request is made.
    pub fn confined(mut self, confinement: Confinement) -> Self {
        self.confinement = Some(confinement);
        self
    }

    /// Make sure put-if-absent works before the first commit writes anything: a store
    /// other than local disk is probed once (some lack it; some S3-compatible servers
    /// ignore `If-None-Match` and overwrite). With [`Self::with_single_writer`] nothing
    /// is probed.
    pub async fn verify_put_if_absent(&self) -> Result<(), StorageError> {
        if self.single_writer || self.known_atomic {
            return Ok(());
        }
        let probe = format!("metadata/.xlake-probe-{}", uuid::Uuid::new_v4());
        let outcome = self
            .probed
            .get_or_init(|| async {
                // The reason alone: the refusal below names the location and the remedy.
                let reason = |e: StorageError| match e {
                    StorageError::NoPutIfAbsent { reason, .. } => reason,
                    other => other.to_string(),
                };
                let first = self.put_if_absent(&probe, Bytes::from_static(b"1")).await;
                let second = match first {
                    Ok(_) => self.put_if_absent(&probe, Bytes::from_static(b"2")).await,
                    Err(_) => Ok(PutOutcome::AlreadyExists),
                };
                // Deleted whatever happened: a failed create may have landed all the same.
                let _ = self.delete(&probe).await;
                match (first.map_err(reason)?, second.map_err(reason)?) {
                    (PutOutcome::Created, PutOutcome::AlreadyExists) => Ok(()),
                    _ => Err("a second conditional write of the same object succeeded".to_string()),
                }
            })
            .await;
        outcome
            .clone()
            .map_err(|reason| StorageError::NoPutIfAbsent {
                location: self.absolute(&probe),
                reason,
            })
    }

    /// What a table may record once put-if-absent has been shown to work on this store, so
    /// that later processes need not probe it again ([`Self::put_if_absent_recorded`]): the
    /// store's origin and the settings that choose its server and its conditional writes.
    /// `None` where nothing is probed (local disk, one writer) or where the store is the
    /// caller's own (it is probed once per handle).
    pub fn put_if_absent_identity(&self) -> Option<&str> {
        match self.single_writer || self.known_atomic {
            true => None,
            false => self.identity.as_deref(),
        }
    }

    /// The table records `recorded` as the store on which put-if-absent was shown to work:
    /// when that is this store, [`Self::verify_put_if_absent`] makes no probe. (A table
    /// copied to another bucket or server records another store, and is probed there.)
    pub fn put_if_absent_recorded(&self, recorded: &str) {
        if self.put_if_absent_identity() == Some(recorded) {
            let _ = self.probed.set(Ok(()));
        }
    }

    /// The object store itself, rooted at the store's root (not the table's), for
    /// libraries that take one (deltalake-core). Requests through it are not retried.
    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// The table root as written into metadata: an absolute local path or a URL.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The full location of a table-relative or absolute path.
    pub fn absolute(&self, path: &str) -> String {
        if is_absolute(path) {
            path.to_string()
        } else {
            format!("{}/{}", self.location, path.trim_start_matches('/'))
        }
    }

    /// Whether `location` (a table location recorded in metadata) names this table root.
    /// Spellings of one place are the same: `file:///a/t`, `file:/a/t` and `/a/t`, with or
    /// without a trailing slash; local paths are compared in canonical form (symlinks
    /// resolved, as far as the path exists), so a table reached through a link is at home;
    /// URLs by scheme (`s3a://` and `s3n://` as `s3://`), authority and path. A copied or
    /// moved table's metadata names another place.
    pub fn is_here(&self, location: &str) -> bool {
        match (local_path(location), local_path(&self.location)) {
            (Some(there), Some(here)) => there == here || canonical(&there) == canonical(&here),
            (None, None) => remote_key(location) == remote_key(&self.location),
            _ => false,
        }
    }

    /// This table under `location`, another spelling of its local place (a link to it,
    /// or the place a link at it names: [`Self::is_here`]), with the same settings; `None`
    /// when `location` is spelled as this handle's or opens as it (`/d/sub/../t`, a relative
    /// path: else a caller re-opening the table as it spells it would ask again without
    /// end), is not this table's, or is not local.
    /// A table synced once as `/real/t` and once as `/link/t` would name its files both
    /// ways, and a removal named one way would not find the file named the other: what
    /// the metadata recorded is written again instead.
    pub fn spelled_as(&self, location: &str) -> Option<TableStore> {
        self.local_root.as_ref()?;
        let there = local_path(location)?;
        if local_path(&self.location).is_some_and(|here| here == there) || !self.is_here(location) {
            return None;
        }
        let Ok(Resolved::Local(abs)) = resolve(&there.to_string_lossy()) else {
            return None;
        };
        let opened = Self::open_local(&abs, location).ok()?;
        if local_path(&opened.location) == local_path(&self.location) {
            return None;
        }
        Some(Self {
            root: opened.root,
            location: opened.location,
            local_root: opened.local_root,
            ..self.clone()
        })
    }

    /// Move an object within the store (replacing anything at `to`). On local disk a
    /// rename; elsewhere a copy, then a delete of the original.
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), StorageError> {
        let (source, target) = (self.object_path(from)?, self.object_path(to)?);
        self.retrying(from, || self.store.rename(&source, &target))
            .await
            .map_err(|e| self.backend_error(from, e))
    }

    /// Whether `path` is, on a local root opened by path, anything but a regular file
    /// (a symbolic link, whatever it leads to; a folder; gone). Listings give a link the
    /// age of what it leads to, so what deletes by age skips these. False on object
    /// stores (they have no links) and for locations outside the table.
    pub fn not_regular_local_file(&self, path: &str) -> bool {
        let Some(full) = self.local_path(path) else {
            return false;
        };
        let meta = std::fs::symlink_metadata(full);
        !matches!(meta, Ok(m) if m.file_type().is_file())
    }

    /// Whether `path` is, on a local root opened by path, a folder (or a link to one),
    /// where the caller expects a file. False on object stores (a "folder" there is a
    /// prefix of other names, beside which an object of that name can still be written)
    /// and for locations outside the table.
    pub fn is_local_folder(&self, path: &str) -> bool {
        let Some(full) = self.local_path(path) else {
            return false;
        };
        std::fs::metadata(full).is_ok_and(|m| m.is_dir())
    }

    /// What stands at `path`, on a local root opened by path, where the caller expects a
    /// file and finds none it can read: "a folder" (or a link to one), "a FIFO, socket or
    /// device" (or a link to one), "a link to nothing" (a symbolic link whose target is
    /// gone), "a link that cannot be followed" (a loop of links, a target in a folder it
    /// may not enter). `None` for a file, for nothing at all, on object stores and for
    /// locations outside the table.
    pub fn local_non_file(&self, path: &str) -> Option<&'static str> {
        let full = self.local_path(path)?;
        match std::fs::metadata(&full) {
            Ok(m) if m.is_dir() => Some("a folder"),
            Ok(m) if m.is_file() => None,
            Ok(_) => Some("a FIFO, socket or device"),
            Err(e) => {
                let link = std::fs::symlink_metadata(&full);
                if !link.is_ok_and(|m| m.file_type().is_symlink()) {
                    return None;
                }
                Some(match e.kind() {
                    std::io::ErrorKind::NotFound => "a link to nothing",
                    _ => "a link that cannot be followed",
                })
            }
        }
    }

    /// Whether `path` is, on a local root opened by path, a symbolic link (whatever it
    /// leads to). False on object stores and for locations outside the table.
    pub fn is_local_link(&self, path: &str) -> bool {
        self.local_path(path).is_some_and(|full| {
            std::fs::symlink_metadata(full).is_ok_and(|m| m.file_type().is_symlink())
        })
    }

    /// Where `path` lies on a local root opened by path; `None` on object stores and for
    /// locations outside the table.
    fn local_path(&self, path: &str) -> Option<std::path::PathBuf> {
        let (root, rel) = (self.local_root.as_ref()?, self.relative(path)?);
        Some(root.join(rel.trim_matches('/')))
    }

    /// The path relative to the table root, if the location lies under it.
    pub fn relative<'a>(&self, path: &'a str) -> Option<&'a str> {
        if !is_absolute(path) {
            return Some(path);
        }
        path.strip_prefix(self.location.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
    }

    /// With a [`Confinement`], refuse `path` before any request unless it is allowed: an
    /// absolute location as named, and on local disk a table-relative one too, by its full
    /// location (a symbolic link inside the table may lead anywhere; the confinement's
    /// predicate resolves links). Object stores have no links: their relative paths stay
    /// in the table.
    fn confine(&self, path: &str, relative: Option<&str>) -> Result<(), StorageError> {
        let Some(confinement) = &self.confinement else {
            return Ok(());
        };
        let allowed = match relative {
            None => (confinement.0)(path),
            Some(rel) if self.origin.is_empty() => (confinement.0)(&self.absolute(rel)),
            Some(_) => true,
        };
        if allowed {
            return Ok(());
        }
        tracing::error!(table = %self.location, location = %path, "refused: outside the table and the allowed locations");
        Err(StorageError::Outside {
            location: path.to_string(),
        })
    }

    fn object_path(&self, path: &str) -> Result<Path, StorageError> {
        let relative = self.relative(path);
        self.confine(path, relative)?;
        let full = if let Some(rel) = relative {
            let root = self.root.as_ref();
            if root.is_empty() {
                rel.to_string()
            } else {
                format!("{root}/{rel}")
            }
        } else if let Some(rest) = path.strip_prefix("file://") {
            rest.trim_start_matches('/').to_string()
        } else if path.starts_with('/') && self.origin.is_empty() {
            path.trim_start_matches('/').to_string()
        } else if !self.origin.is_empty() && path.starts_with(&self.origin) {
            path[self.origin.len()..]
                .trim_start_matches('/')
                .to_string()
        } else {
            return Err(StorageError::InvalidLocation {
                location: path.to_string(),
                reason: format!("not inside the store of {}", self.location),
            });
        };
        Ok(Path::parse(&full).unwrap_or_else(|_| Path::from(full.as_str())))
    }

    fn backend_error(&self, path: &str, source: object_store::Error) -> StorageError {
        let location = self.absolute(path);
        match source {
            object_store::Error::NotFound { .. } => StorageError::NotFound { location },
            source => StorageError::Backend { location, source },
        }
    }

    /// Read a whole object.
    pub async fn get(&self, path: &str) -> Result<Bytes, StorageError> {
        self.get_whole(path, Whole::Read).await
    }

    /// [`Self::get`] of an object known to be a few bytes (a pointer such as
    /// `version-hint.text` or `_last_checkpoint`): on a local root read on the calling
    /// thread, not handed to a blocking thread and back, which costs more than the read
    /// (a no-op pass over a fleet of tables reads one per table); elsewhere [`Self::get`].
    pub async fn get_small(&self, path: &str) -> Result<Bytes, StorageError> {
        self.get_whole(path, Whole::Small).await
    }

    /// Read a whole object that is never rewritten in place once it exists, as every
    /// Iceberg metadata file xlake writes (created whole under a new name). The same as
    /// [`Self::get`], but on a local root a large file on a local disk's file system is
    /// mapped into memory rather than copied (`local_read`): cheaper, and sound only if
    /// no one truncates the file in place while the bytes live.
    pub async fn get_written_once(&self, path: &str) -> Result<Bytes, StorageError> {
        self.get_whole(path, Whole::MapWrittenOnce).await
    }

    async fn get_whole(&self, path: &str, how: Whole) -> Result<Bytes, StorageError> {
        Ok(self.get_timed_as(path, how).await?.0)
    }

    /// [`Self::get`], with the object's modification time and tag ([`Stamp`], as
    /// [`Entry::stamp`]) from the same read: on a local root the `fstat` the read makes
    /// anyway, elsewhere the response's `Last-Modified` (whole seconds on S3, GCS and
    /// Azure, where a listing may give milliseconds) and `ETag`. `None` for a write held
    /// back ([`Self::deferring`]), which has no time yet.
    pub async fn get_timed(&self, path: &str) -> Result<(Bytes, Option<Stamp>), StorageError> {
        self.get_timed_as(path, Whole::Read).await
    }

    async fn get_timed_as(
        &self,
        path: &str,
        how: Whole,
    ) -> Result<(Bytes, Option<Stamp>), StorageError> {
        let p = self.object_path(path)?;
        if let Some(held) = self.held(path) {
            return Ok((held, None));
        }
        if let Some(read) = self.local_get(path, how).await {
            return read.map(|(bytes, modified)| (bytes, Some(modified)));
        }
        // The whole read is retried: a body cut short fails the second step.
        self.retrying(path, || async {
            let got = self.store.get(&p).await?;
            let stamp = Stamp::of(&got.meta);
            Ok((got.bytes().await?, Some(stamp)))
        })
        .await
        .map_err(|e| self.backend_error(path, e))
    }

    /// On a local root opened by path, a whole file read directly (`local_read`: one read
    /// of its size, or mapped as `how` allows): object_store's local read doubles the size
    /// of each read (8 KiB, 16 KiB, ...), which made reading a 1.2 MB `vN.metadata.json`
    /// cost ~1 ms more (issue 16). Retried
    /// as every request is. A folder is not found, and a path through a file an error,
    /// as object_store has them. `None` elsewhere: other stores, a store built by the
    /// caller, an absolute location outside the table, and a path object_store does not
    /// take as it is written (an empty, `.` or `..` segment, a leading or trailing `/`)
    /// or a writer's staged upload, where its mapping to the disk differs from a join.
    /// The file's modification time and tag come with it (see [`Self::get_timed`]).
    async fn local_get(
        &self,
        path: &str,
        how: Whole,
    ) -> Option<Result<(Bytes, Stamp), StorageError>> {
        let file = self.local_file(path)?;
        let read = self
            .retrying(path, || {
                let file = file.clone();
                async move {
                    if how == Whole::Small {
                        return local_read::read_timed(&file, how).map_err(|e| io_error(path, e));
                    }
                    let timed = move || local_read::read_timed(&file, how);
                    match tokio::task::spawn_blocking(timed).await {
                        Ok(read) => read.map_err(|e| io_error(path, e)),
                        Err(source) => Err(object_store::Error::JoinError { source }),
                    }
                }
            })
            .await;
        Some(read.map_err(|e| self.backend_error(path, e)))
    }

    /// The local file of `path` on a local root opened by path; `None` elsewhere, and for
    /// a path object_store does not take as it is written (see [`Self::local_get`]).
    fn local_file(&self, path: &str) -> Option<std::path::PathBuf> {
        let rel = self.relative(path)?;
        let parsed = Path::parse(rel).ok()?;
        let plain =
            parsed.as_ref() == rel && !parsed.filename().is_some_and(local_list::staged_upload);
        Some(plain.then_some(self.local_root.as_ref())??.join(rel))
    }

    /// Read a byte range of an object.
    pub async fn get_range(
        &self,
        path: &str,
        range: std::ops::Range<u64>,
    ) -> Result<Bytes, StorageError> {
        let p = self.object_path(path)?;
        if let Some(held) = self.held(path) {
            let (start, end) = (range.start as usize, range.end as usize);
            return held.get(start..end.min(held.len())).map_or_else(
                || {
                    let reason = format!("range {range:?} past the end ({} bytes)", held.len());
                    Err(self.backend_error(
                        path,
                        object_store::Error::Generic {
                            store: "deferred",
                            source: reason.into(),
                        },
                    ))
                },
                |b| Ok(held.slice_ref(b)),
            );
        }
        self.refuse_special(path)?;
        self.retrying(path, || self.store.get_range(&p, range.clone()))
            .await
            .map_err(|e| self.backend_error(path, e))
    }

    /// Last modification time and tag of an object (as [`Entry::stamp`]), or `None` when
    /// it does not exist: a `HEAD` on an object store. On a local root opened by path one
    /// `stat` (object_store's `head` opens the file and asks its descriptor, after a
    /// `stat` that refuses a FIFO).
    pub async fn stamp(&self, path: &str) -> Result<Option<Stamp>, StorageError> {
        let p = self.object_path(path)?;
        if let Some(file) = self.local_file(path).filter(|_| self.held(path).is_none()) {
            return match std::fs::metadata(&file) {
                Ok(meta) if meta.is_dir() => Ok(None),
                Ok(meta) => Ok(Some(local_list::stamp(&meta))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(self.backend_error(path, io_error(path, e))),
            };
        }
        self.refuse_special(path)?;
        match self.retrying(path, || self.store.head(&p)).await {
            Ok(meta) => Ok(Some(Stamp::of(&meta))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.backend_error(path, e)),
        }
    }

    /// When each of `files`, as this store listed them, last changed ([`Change`]): on an
    /// object store from the listing (no request); on a local root opened by path one
    /// `lstat` each (and a `stat` more for a symbolic link: the link and the file it leads
    /// to, as the listing follows it), on a blocking thread. A
    /// file gone since it was listed fails the call, naming it, as its read would; so does
    /// one outside the handle's confinement.
    pub async fn changes(&self, files: &[Entry]) -> Result<Vec<Change>, StorageError> {
        if self.local_root.is_none() {
            return Ok(files.iter().map(Change::listed).collect());
        }
        // Refused outside a confinement, as a read of the file would be.
        let wanted = files
            .iter()
            .map(|f| self.object_path(&f.path).map(|_| self.local_path(&f.path)))
            .collect::<Result<Vec<_>, _>>()?;
        let looked = tokio::task::spawn_blocking(move || {
            let mut found = Vec::with_capacity(wanted.len());
            for (i, path) in wanted.into_iter().enumerate() {
                match path.as_deref().map(Change::look_up).transpose() {
                    Ok(change) => found.push(change),
                    Err(e) => return Err((i, e)),
                }
            }
            Ok(found)
        })
        .await;
        let found = match looked {
            Ok(Ok(found)) => found,
            Ok(Err((i, e))) => {
                let path = files.get(i).map_or("", |f| f.path.as_str());
                return Err(self.backend_error(path, io_error(path, e)));
            }
            Err(e) => return Err(self.backend_error("", io_error("", std::io::Error::other(e)))),
        };
        Ok(files
            .iter()
            .zip(found)
            .map(|(f, local)| local.unwrap_or_else(|| Change::listed(f)))
            .collect())
    }

    /// The files of [`Self::list_recursive`] that `keep` takes, each with when it last
    /// changed ([`Change`], as [`Self::changes`] gives it), sorted by path: for a source
    /// that lists its files at every sync. On a local root opened by path from the one look
    /// the listing takes at each file (`local_tree`: an `lstat`, and a `stat` more for a
    /// symbolic link), where object_store's listing and [`Self::changes`] after it take
    /// four; elsewhere from the listing, with no request more. A file kept outside the
    /// handle's confinement fails the call, as [`Self::changes`] fails.
    pub async fn list_recursive_changes(
        &self,
        dir: &str,
        keep: impl Fn(&Entry) -> bool,
    ) -> Result<Vec<(Entry, Change)>, StorageError> {
        if let Some(mut listed) = self.local_tree(dir).await? {
            listed.retain(|(entry, _)| keep(entry));
            for (entry, _) in &listed {
                // Refused outside a confinement, as a read of the file would be.
                self.object_path(&entry.path)?;
            }
            return Ok(listed);
        }
        let mut files = self.list_recursive(dir).await?;
        files.retain(keep);
        let changes = self.changes(&files).await?;
        Ok(files.into_iter().zip(changes).collect())
    }

    /// On a local root opened by path, the files below `dir` and their changes by
    /// `local_tree`, sorted by path. `None` elsewhere, and where object_store's listing
    /// would fail: the caller then lists through it, for its error.
    async fn local_tree(&self, dir: &str) -> Result<Option<Vec<(Entry, Change)>>, StorageError> {
        let Some(root) = &self.local_root else {
            return Ok(None);
        };
        self.object_path(dir)?;
        let Some(rel) = self.relative(dir) else {
            return Ok(None);
        };
        let (root, folder) = (root.clone(), root.join(rel.trim_matches('/')));
        let walked = tokio::task::spawn_blocking(move || local_tree::walk(&root, &folder)).await;
        let Some(mut listed) = walked.ok().flatten() else {
            return Ok(None);
        };
        listed.sort_unstable_by(|a, b| a.0.path.cmp(&b.0.path));
        Ok(Some(listed))
    }

    /// On a local root, refuse a FIFO, socket or device at `path` before object_store
    /// opens it (its `head` and ranged reads open the file, and a FIFO's open waits for a
    /// writer: a hostile review's syncs hung).
    fn refuse_special(&self, path: &str) -> Result<(), StorageError> {
        match self
            .local_file(path)
            .and_then(|f| local_read::not_readable(&f))
        {
            Some(e) => Err(self.backend_error(path, io_error(path, e))),
            None => Ok(()),
        }
    }

    /// Size of an object, or `None` when it does not exist.
    pub async fn size(&self, path: &str) -> Result<Option<u64>, StorageError> {
        let p = self.object_path(path)?;
        if let Some(held) = self.held(path) {
            return Ok(Some(held.len() as u64));
        }
        self.refuse_special(path)?;
        match self.retrying(path, || self.store.head(&p)).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.backend_error(path, e)),
        }
    }

    /// [`Self::size`] of an object looked up once per pass of a scheduled job, that is
    /// small or, usually, absent (a `v(N+1).metadata.json` after the hint's version): on a
    /// local root opened by path a `stat` on the calling thread, not handed to a blocking
    /// thread and back, which costs more than the `stat` (as [`Self::get_small`]);
    /// elsewhere [`Self::size`].
    pub async fn size_small(&self, path: &str) -> Result<Option<u64>, StorageError> {
        let Some(file) = self.local_file(path).filter(|_| self.held(path).is_none()) else {
            return self.size(path).await;
        };
        match std::fs::metadata(&file) {
            Ok(meta) if meta.is_file() => Ok(Some(meta.len())),
            Ok(_) => Ok(None),
            Err(e) => match io_error(path, e) {
                object_store::Error::NotFound { .. } => Ok(None),
                e => Err(self.backend_error(path, e)),
            },
        }
    }

    /// Write an object, replacing any previous one.
    pub async fn put(&self, path: &str, body: impl Into<PutPayload>) -> Result<(), StorageError> {
        let p = self.object_path(path)?;
        if let Some(journal) = &self.journal {
            journal.record(path);
        }
        let body = body.into();
        if let Some(deferred) = &self.deferred {
            if deferred.hold(self.absolute(path), path, Bytes::from(body)) {
                return self.flush().await;
            }
            return Ok(());
        }
        self.retrying(path, || self.store.put(&p, body.clone()))
            .await
            .map(|_| ())
            .map_err(|e| self.backend_error(path, e))
    }

    /// Write an object only if nothing is there yet; never overwrites.
    pub async fn put_if_absent(
        &self,
        path: &str,
        body: impl Into<PutPayload>,
    ) -> Result<PutOutcome, StorageError> {
        let entry = self.journal.as_ref().and_then(|j| j.record(path));
        let outcome = self.create(path, body.into()).await;
        // Already there: someone else's. Created, or an error (the paths journaled are
        // unique to their writer, so an object there after an error is its own): kept.
        if let (Some(journal), Ok(PutOutcome::AlreadyExists)) = (&self.journal, &outcome) {
            journal.strike(entry);
        }
        outcome
    }

    async fn create(&self, path: &str, body: PutPayload) -> Result<PutOutcome, StorageError> {
        let p = self.object_path(path)?;
        let outcome = self
            .retrying(path, || {
                let opts = PutOptions::from(PutMode::Create);
                self.store.put_opts(&p, body.clone(), opts)
            })
            .await;
        match outcome {
            Ok(_) => Ok(PutOutcome::Created),
            // The object there may be our own: a request resent after a reply lost on
            // the way back (by these retries, or by object_store's own on a 5xx) hears
            // that it exists. The bytes tell (callers write fresh ids).
            Err(object_store::Error::AlreadyExists { .. }) => {
                if same(&self.get(path).await?, &body) {
                    Ok(PutOutcome::Created)
                } else {
                    Ok(PutOutcome::AlreadyExists)
                }
            }
            Err(
                e
                @ (object_store::Error::NotImplemented | object_store::Error::NotSupported { .. }),
            ) => {
                if !self.single_writer {
                    return Err(StorageError::NoPutIfAbsent {
                        location: self.absolute(path),
                        reason: e.to_string(),
                    });
                }
                if self.size(path).await?.is_some() {
                    return Ok(PutOutcome::AlreadyExists);
                }
                self.put(path, body).await?;
                Ok(PutOutcome::Created)
            }
            Err(e) => Err(self.backend_error(path, e)),
        }
    }

    /// Delete an object; deleting a missing object is not an error.
    pub async fn delete(&self, path: &str) -> Result<(), StorageError> {
        let p = self.object_path(path)?;
        if let Some(deferred) = &self.deferred {
            deferred.forget(&self.absolute(path));
        }
        if let Some(file) = self.local_staged_upload(path) {
            return match std::fs::remove_file(file) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(self.backend_error(path, io_error(path, e))),
            };
        }
        match self.retrying(path, || self.store.delete(&p)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.backend_error(path, e)),
        }
    }

    /// On a local root, the file at table-relative `path` when it is one of object_store's
    /// staged uploads (`<name>#<n>`, what a write killed before its rename left), which
    /// its local backend refuses to name: [`Self::delete`] removes it directly.
    fn local_staged_upload(&self, path: &str) -> Option<std::path::PathBuf> {
        let root = self.local_root.as_ref()?;
        let name = path.rsplit('/').next()?;
        let rel = self.relative(path)?;
        local_list::staged_upload(name).then(|| root.join(rel.trim_matches('/')))
    }

    /// Objects directly under a table-relative directory (not recursive), sorted by path.
    pub async fn list_dir(&self, dir: &str) -> Result<Vec<Entry>, StorageError> {
        if let Some(mut listed) = self.local_listing(dir, local_list::entries).await? {
            // Names in a folder are unique: an unstable sort orders them alike, faster.
            listed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let folder = dir.trim_end_matches('/');
            return Ok(listed
                .into_iter()
                .map(|(name, (size, stamp))| Entry {
                    path: format!("{folder}/{name}"),
                    size,
                    modified_ms: stamp.modified_ms,
                    e_tag: stamp.e_tag,
                })
                .collect());
        }
        let p = self.object_path(dir)?;
        let listing = match self
            .retrying(dir, || self.store.list_with_delimiter(Some(&p)))
            .await
        {
            Ok(listing) => listing,
            Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(self.backend_error(dir, e)),
        };
        let mut entries: Vec<Entry> = listing
            .objects
            .into_iter()
            .map(|meta| Entry {
                path: format!(
                    "{}/{}",
                    dir.trim_end_matches('/'),
                    meta.location.filename().unwrap_or_default()
                ),
                size: meta.size,
                modified_ms: meta.last_modified.timestamp_millis(),
                e_tag: tag_of(&meta),
            })
            .collect();
        entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }

    /// [`Self::list_dir`] from `from` on: the objects directly under `dir` whose names
    /// sort after `from` (a name that starts with it is after it), sorted by path. On an object store one listing that starts
    /// there (S3's `start-after`; object_store's `list_with_offset`), so its cost follows
    /// what is listed, not what the folder holds (the listing is recursive there: objects
    /// in subfolders are read past, not returned). With `times` false a local folder's
    /// entries are not stat-ed (sizes and times 0).
    pub async fn list_dir_from(
        &self,
        dir: &str,
        from: &str,
        times: bool,
    ) -> Result<Vec<Entry>, StorageError> {
        let folder = dir.trim_end_matches('/');
        if self.local_root.is_some() {
            let mut entries = match times {
                true => self.list_dir(dir).await?,
                false => self.list_dir_by_name(dir).await?,
            };
            let start = format!("{folder}/{from}");
            entries.retain(|e| e.path > start);
            return Ok(entries);
        }
        let p = self.object_path(dir)?;
        let offset = self.object_path(&format!("{folder}/{from}"))?;
        let listed: Result<Vec<object_store::ObjectMeta>, object_store::Error> = self
            .retrying(dir, || async {
                self.store
                    .list_with_offset(Some(&p), &offset)
                    .try_collect()
                    .await
            })
            .await;
        let metas = match listed {
            Ok(metas) => metas,
            Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(self.backend_error(dir, e)),
        };
        let mut entries: Vec<Entry> = metas
            .into_iter()
            .filter(|m| {
                m.location
                    .prefix_match(&p)
                    .is_some_and(|rest| rest.count() == 1)
            })
            .map(|meta| Entry {
                path: format!("{folder}/{}", meta.location.filename().unwrap_or_default()),
                size: meta.size,
                modified_ms: meta.last_modified.timestamp_millis(),
                e_tag: tag_of(&meta),
            })
            .collect();
        entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }

    /// [`Self::list_dir`] with sizes and times where the listing gives them for nothing
    /// (an object store's), else by name alone (a local folder's entries are not
    /// stat-ed: sizes and times 0), as [`Self::list_dir_from`] lists without `times`.
    pub async fn list_dir_by_name(&self, dir: &str) -> Result<Vec<Entry>, StorageError> {
        if self.local_root.is_none() {
            return self.list_dir(dir).await;
        }
        let folder = dir.trim_end_matches('/');
        let mut entries: Vec<Entry> = self
            .list_names(dir)
            .await?
            .iter()
            .map(|name| Entry {
                path: format!("{folder}/{name}"),
                size: 0,
                modified_ms: 0,
                e_tag: None,
            })
            .collect();
        entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }

    /// The names directly under `dir` that start with an ASCII digit and sort after `from`
    /// (a Hudi timeline's instant files from an instant time on), in no particular order.
    /// On a store opened by URL (they list in lexicographic order) one listing from
    /// `from` that stops at the first name that sorts after the digits: what sorts after
    /// every digit-named file (`archived/`, `metadata/`, `hoodie.properties`, `history/`)
    /// is not fetched, though the listing is recursive there. S3 and GCS start the listing
    /// after `from` on the server; Azure's (no offset on its server) starts at the
    /// folder's first name and object_store skips to `from`; S3 directory buckets do not
    /// list in order. So the Hudi source asks only S3 and GCS general-purpose buckets.
    /// Elsewhere (local disk, whose order is the folder's own; a store built by the caller)
    /// the folder is listed whole and filtered.
    pub async fn list_digit_names_from(
        &self,
        dir: &str,
        from: &str,
    ) -> Result<Names, StorageError> {
        let digit = |name: &str| name.starts_with(|c: char| c.is_ascii_digit());
        if self.local_root.is_some() || self.identity.is_none() {
            let names = self.list_names(dir).await?;
            return Ok(names.iter().filter(|n| digit(n) && *n > from).collect());
        }
        self.list_names_after(dir, from, |name| match digit(name) {
            true => Step::Take,
            // Names before the digits (`.aux/`) when `from` is short; after them,
            // nothing more to find.
            false if name < "0" => Step::Skip,
            false => Step::Stop,
        })
        .await
    }

    /// The names directly under `dir` that start with `prefix` (a Hudi instant's files,
    /// by its instant time), in no particular order. On a store opened by URL one listing
    /// that starts at `prefix` and stops at the first name that does not start with it:
    /// one request while the names fit its first page. Elsewhere the folder is listed
    /// whole and filtered.
    pub async fn list_names_starting(
        &self,
        dir: &str,
        prefix: &str,
    ) -> Result<Names, StorageError> {
        if self.local_root.is_some() || self.identity.is_none() || prefix.is_empty() {
            let names = self.list_names(dir).await?;
            return Ok(names.iter().filter(|n| n.starts_with(prefix)).collect());
        }
        self.list_names_after(dir, prefix, |name| match name.starts_with(prefix) {
            true => Step::Take,
            false => Step::Stop,
        })
        .await
    }

    /// The names directly under `dir` after `from`, by one listing from that offset on a
    /// store opened by URL, each taken, skipped or ending the listing as `step` says.
    async fn list_names_after(
        &self,
        dir: &str,
        from: &str,
        step: impl Fn(&str) -> Step,
    ) -> Result<Names, StorageError> {
        let folder = dir.trim_end_matches('/');
        let p = self.object_path(dir)?;
        let offset = self.object_path(&format!("{folder}/{from}"))?;
        let listed = self
            .retrying(dir, || async {
                let mut names = Names::default();
                let mut stream = self.store.list_with_offset(Some(&p), &offset);
                while let Some(meta) = stream.try_next().await? {
                    let mut rest = meta.location.prefix_match(&p).into_iter().flatten();
                    let Some(first) = rest.next() else { continue };
                    match step(first.as_ref()) {
                        Step::Take => {}
                        Step::Skip => continue,
                        Step::Stop => break,
                    }
                    if rest.next().is_none() {
                        names.push(first.as_ref());
                    }
                }
                Ok(names)
            })
            .await;
        match listed {
            Ok(names) => Ok(names),
            Err(object_store::Error::NotFound { .. }) => Ok(Names::default()),
            Err(e) => Err(self.backend_error(dir, e)),
        }
    }

    /// The names of the objects directly under a table-relative directory (not
    /// recursive), in no particular order: what [`Self::list_dir`] lists, without sizes
    /// and times. On a local root opened by path the folder is read directly, its entries
    /// are not stat-ed and its names not sorted (thousands of instant files in a Hudi
    /// timeline, whose reader orders them by what the names mean); elsewhere it is
    /// [`Self::list_dir`].
    pub async fn list_names(&self, dir: &str) -> Result<Names, StorageError> {
        match self.local_listing(dir, local_list::names).await? {
            Some(names) => Ok(names),
            None => self.names_of(dir).await,
        }
    }

    /// On a local root opened by path, the files directly in a table-relative folder,
    /// read directly by `read` (`local_list`'s entries or names, in the order the folder
    /// gives them). `None` elsewhere (other stores, a store built by the caller, an
    /// absolute location outside the table).
    async fn local_listing<T: Default + Send + 'static>(
        &self,
        dir: &str,
        read: fn(&std::path::Path) -> std::io::Result<T>,
    ) -> Result<Option<T>, StorageError> {
        let Some(root) = &self.local_root else {
            return Ok(None);
        };
        self.object_path(dir)?;
        let Some(rel) = self.relative(dir) else {
            return Ok(None);
        };
        let folder = root.join(rel.trim_matches('/'));
        // A folder of one block (a small table's `_delta_log/`, ~100 short names on ext4)
        // is read on the calling thread, as a small file is (`get_small`): handing it to a
        // blocking thread and back costs more than the read, once per table of a fleet's
        // no-op pass (issue 44). A larger one, whose read may take long, is handed off.
        let small = std::fs::metadata(&folder).is_ok_and(|m| m.is_dir() && m.len() <= ONE_BLOCK);
        let listed = match small {
            true => read(&folder),
            false => match tokio::task::spawn_blocking(move || read(&folder)).await {
                Ok(listed) => listed,
                Err(e) => Err(std::io::Error::other(e)),
            },
        };
        match listed {
            Ok(entries) => Ok(Some(entries)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Some(T::default())),
            Err(e) => Err(self.backend_error(
                dir,
                object_store::Error::Generic {
                    store: "LocalFileSystem",
                    source: Box::new(e),
                },
            )),
        }
    }

    /// [`Self::list_names`] through object_store's listing.
    async fn names_of(&self, dir: &str) -> Result<Names, StorageError> {
        let entries = self.list_dir(dir).await?;
        Ok(entries
            .iter()
            .filter_map(|e| e.path.rsplit('/').next())
            .collect())
    }

    /// [`Self::list_recursive`], with object_store's staged uploads (`<name>#<n>`: what a
    /// write killed before its rename left), and leaving out the files whose names
    /// object_store cannot name (not UTF-8 text, a control character such as a newline),
    /// which would end its local listing with an error: on a local root those are returned apart, relative to
    /// the table root and escaped (`metadata/new\nline`), with any linked folder (not
    /// entered). For a command that only looks at what it knows (`cleanup`, `inspect`: a
    /// stray file of an odd name is not theirs to refuse). Elsewhere (object names are
    /// text) it is [`Self::list_recursive`].
    pub async fn list_recursive_lenient(
        &self,
        dir: &str,
    ) -> Result<(Vec<Entry>, Vec<String>), StorageError> {
        let Some((files, unnamed)) = self.local_listing(dir, local_list::walk).await? else {
            return Ok((self.list_recursive(dir).await?, Vec::new()));
        };
        let folder = dir.trim_matches('/');
        let under = |rel: String| match folder.is_empty() {
            true => rel,
            false => format!("{folder}/{rel}"),
        };
        let mut entries: Vec<Entry> = files
            .into_iter()
            .map(|(rel, (size, stamp))| Entry {
                path: under(rel),
                size,
                modified_ms: stamp.modified_ms,
                e_tag: stamp.e_tag,
            })
            .collect();
        entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        Ok((entries, unnamed.into_iter().map(under).collect()))
    }

    /// Every object below a table-relative directory, recursively.
    pub async fn list_recursive(&self, dir: &str) -> Result<Vec<Entry>, StorageError> {
        let p = self.object_path(dir)?;
        let root_len = self.root.as_ref().len();
        let listed = self
            .retrying(dir, || self.store.list(Some(&p)).try_collect::<Vec<_>>())
            .await;
        let metas = match listed {
            Ok(metas) => metas,
            Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(self.backend_error(dir, e)),
        };
        let mut entries: Vec<Entry> = metas
            .into_iter()
            .map(|meta| Entry {
                path: meta.location.as_ref()[root_len..]
                    .trim_start_matches('/')
                    .to_string(),
                size: meta.size,
                modified_ms: meta.last_modified.timestamp_millis(),
                e_tag: tag_of(&meta),
            })
            .collect();
        entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }
}

/// An error reading the local file at `path` as object_store reports it: a missing file
/// or a folder is not found.
fn io_error(path: &str, e: std::io::Error) -> object_store::Error {
    match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory => {
            object_store::Error::NotFound {
                path: path.to_string(),
                source: Box::new(e),
            }
        }
        _ => object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(e),
        },
    }
}

/// A location as a local path: a `file:` URL or a plain path; `None` for other URLs.
fn local_path(location: &str) -> Option<std::path::PathBuf> {
    let trimmed = location.trim_end_matches('/');
    let trimmed = if trimmed.is_empty() && !location.is_empty() {
        "/"
    } else {
        trimmed
    };
    match Url::parse(trimmed) {
        Ok(url) if url.scheme() == "file" => url.to_file_path().ok(),
        Ok(url) if url.scheme().len() > 1 => None,
        // Lexically tidy: `a//b`, `a/./b` name `a/b`.
        _ => Some(std::path::Path::new(trimmed).components().collect()),
    }
}

/// A local path with symlinks resolved as far as it exists (a moved table's old path may
/// be gone, while a parent of it is a link).
fn canonical(path: &std::path::Path) -> std::path::PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |p, name| p.join(name));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// A remote location in comparable form: `scheme://authority/path`, the scheme lower case
/// with Hadoop's `s3a`/`s3n` read as `s3`, no trailing slash.
fn remote_key(location: &str) -> String {
    let trimmed = location.trim_end_matches('/');
    match Url::parse(trimmed) {
        Ok(url) => {
            let scheme = match url.scheme() {
                "s3a" | "s3n" => "s3",
                other => other,
            };
            format!(
                "{scheme}://{}{}",
                url.authority(),
                url.path().trim_end_matches('/')
            )
        }
        Err(_) => trimmed.to_string(),
    }
}

fn is_absolute(path: &str) -> bool {
    path.starts_with('/') || path.contains("://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_pause_is_drawn_between_half_and_all_of_its_bound() {
        let bound = Duration::from_millis(200);
        let pauses: Vec<Duration> = (0..64).map(|_| jittered(bound)).collect();
        assert!(
            pauses.iter().all(|p| *p >= bound / 2 && *p <= bound),
            "{pauses:?}"
        );
        assert!(
            pauses.iter().any(|p| *p != pauses[0]),
            "no jitter: {pauses:?}"
        );
        assert_eq!(jittered(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn a_body_in_parts_is_told_from_other_bytes() {
        let parts: PutPayload = [&b"ab"[..], b"", b"cde"]
            .into_iter()
            .map(Bytes::from_static)
            .collect();
        assert!(same(&Bytes::from_static(b"abcde"), &parts));
        for other in [&b"abcdf"[..], b"abcd", b"abcdef", b""] {
            assert!(!same(&Bytes::from_static(other), &parts), "{other:?}");
        }
    }

    /// The listing that stops at the first name without a leading digit (a store opened
    /// by URL, which lists in order) names what the whole listing filtered names.
    #[tokio::test]
    async fn digit_names_from_an_offset_are_the_filtered_whole_listing() {
        let memory = Arc::new(object_store::memory::InMemory::new());
        let keys = [
            "t/.hoodie/.aux/1.x",
            "t/.hoodie/1.commit",
            "t/.hoodie/2.commit",
            "t/.hoodie/2.inflight",
            "t/.hoodie/20/nested.commit",
            "t/.hoodie/3.commit",
            "t/.hoodie/archived/4.commit",
            "t/.hoodie/hoodie.properties",
            "t/.hoodie/metadata/5.commit",
            "t/other/6.commit",
        ];
        for key in keys {
            memory
                .put(&Path::from(key), PutPayload::from_static(b"x"))
                .await
                .unwrap();
        }
        let open = |ordered: bool| {
            let mut store = TableStore::from_store(
                memory.clone(),
                Path::from("t"),
                "mem://t".into(),
                "".into(),
            );
            store.identity = ordered.then(|| "mem://".to_string());
            store
        };
        for from in ["", "1", "2", "3", "9"] {
            let names = |n: Names| {
                let mut v: Vec<String> = n.iter().map(String::from).collect();
                v.sort();
                v
            };
            let ordered = names(
                open(true)
                    .list_digit_names_from(".hoodie", from)
                    .await
                    .unwrap(),
            );
            let whole = names(
                open(false)
                    .list_digit_names_from(".hoodie", from)
                    .await
                    .unwrap(),
            );
            assert_eq!(ordered, whole, "from {from:?}");
        }
        let from_2 = open(true)
            .list_digit_names_from(".hoodie", "2")
            .await
            .unwrap();
        let mut got: Vec<&str> = from_2.iter().collect();
        got.sort_unstable();
        assert_eq!(got, ["2.commit", "2.inflight", "3.commit"]);
    }

    #[tokio::test]
    async fn put_if_absent_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let first = store
            .put_if_absent("metadata/v1.metadata.json", Bytes::from_static(b"one"))
            .await
            .unwrap();
        let second = store
            .put_if_absent("metadata/v1.metadata.json", Bytes::from_static(b"two"))
            .await
            .unwrap();
        assert_eq!(first, PutOutcome::Created);
        assert_eq!(second, PutOutcome::AlreadyExists);
        let read = store.get("metadata/v1.metadata.json").await.unwrap();
        assert_eq!(&read[..], b"one");
    }

    #[tokio::test]
    async fn a_journal_records_what_its_handle_wrote_but_not_what_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        store.put("theirs", Bytes::from_static(b"x")).await.unwrap();
        let (journaled, journal) = store.journaled();
        journaled.put("a", Bytes::from_static(b"a")).await.unwrap();
        let mark = journal.len();
        let outcomes = (
            journaled
                .put_if_absent("b", Bytes::from_static(b"b"))
                .await
                .unwrap(),
            journaled
                .put_if_absent("theirs", Bytes::from_static(b"y"))
                .await
                .unwrap(),
        );
        assert_eq!(outcomes, (PutOutcome::Created, PutOutcome::AlreadyExists));
        store.put("c", Bytes::from_static(b"c")).await.unwrap();
        assert_eq!(journal.since(0), ["a", "b"]);
        assert_eq!(journal.since(mark), ["b"]);
        assert!(journal.since(9).is_empty());
    }

    /// A store opened on the folder `dir` by path (read and listed directly), and one on
    /// the same folder built by the caller (through object_store's own local reader).
    fn local_and_wrapped(dir: &std::path::Path) -> (TableStore, TableStore) {
        let root = dir.to_str().unwrap();
        let wrapped = TableStore::from_store(
            Arc::new(LocalFileSystem::new()),
            Path::from_filesystem_path(dir).unwrap(),
            root.to_string(),
            String::new(),
        );
        (TableStore::open(root).unwrap(), wrapped)
    }

    /// A file's stamp is the same by its listing, its read and its lookup, read directly
    /// or through object_store; a file written again at its path with its time kept (a
    /// copy with `cp -p`), of the same size, has the same time and another tag.
    #[tokio::test]
    async fn a_file_written_again_with_its_time_kept_has_another_tag() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t/a");
        std::fs::create_dir(dir.path().join("t")).unwrap();
        std::fs::write(&file, b"x").unwrap();
        let (local, wrapped) = local_and_wrapped(dir.path());
        for store in [&local, &wrapped] {
            let listed = store.list_dir("t").await.unwrap()[0].stamp();
            assert!(listed.e_tag.is_some(), "{listed:?}");
            let (_, read) = store.get_timed("t/a").await.unwrap();
            assert_eq!(read.as_ref(), Some(&listed));
            assert_eq!(store.stamp("t/a").await.unwrap(), Some(listed));
        }
        let before = local.stamp("t/a").await.unwrap().unwrap();
        let time = std::fs::metadata(&file).unwrap().modified().unwrap();
        // Past the clock tick of the first write: a file's times are given in ticks.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, b"y").unwrap();
        let f = std::fs::File::options().write(true).open(&file).unwrap();
        f.set_modified(time).unwrap();
        let after = local.stamp("t/a").await.unwrap().unwrap();
        assert_eq!(after.modified_ms, before.modified_ms);
        assert_ne!(after.e_tag, before.e_tag);
        assert_eq!(local.list_dir("t").await.unwrap()[0].stamp(), after);
        assert_eq!(local.stamp("t/missing").await.unwrap(), None);
    }

    /// A local file's change is its status change time, looked up: a copy with its times
    /// kept onto it (`cp -p`: the inode, size and times kept) moves it; a file gone since
    /// the listing is named. Elsewhere the listing's time and tag, with no request.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_local_file_copied_onto_with_its_times_kept_has_changed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t/a");
        std::fs::create_dir(dir.path().join("t")).unwrap();
        std::fs::write(&file, b"x").unwrap();
        let (local, wrapped) = local_and_wrapped(dir.path());
        let listed = local.list_recursive("t").await.unwrap();
        let before = local.changes(&listed).await.unwrap();
        let time = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&file, b"y").unwrap();
        let f = std::fs::File::options().write(true).open(&file).unwrap();
        f.set_modified(time).unwrap();
        let after = local.changes(&listed).await.unwrap();
        assert!(after[0].at_ns > before[0].at_ns, "{before:?} {after:?}");
        assert_ne!(after[0].tag, before[0].tag);
        let by_listing = wrapped.list_recursive("t").await.unwrap();
        let expected: Vec<Change> = by_listing.iter().map(Change::listed).collect();
        assert_eq!(wrapped.changes(&by_listing).await.unwrap(), expected);
        std::fs::remove_file(&file).unwrap();
        let gone = local.changes(&listed).await.unwrap_err();
        assert!(gone.to_string().contains("t/a"), "{gone}");
    }

    /// A folder `t/` of every kind of entry a listing meets: files below a linked folder,
    /// a linked file, an empty file, a file older than 1970, a staged upload, a socket, a
    /// dangling link (and a file `top` beside it). The socket lives as long as the
    /// listener returned.
    #[cfg(unix)]
    fn every_kind(dir: &std::path::Path) -> std::os::unix::net::UnixListener {
        let at = |name: &str| dir.join(name);
        let names = [
            "t/a",
            "t/sub/b",
            "t/sub/deep/c",
            "t/up#1",
            "t/a#b",
            "t/old",
            "top",
        ];
        for name in names {
            std::fs::create_dir_all(at(name).parent().unwrap()).unwrap();
            std::fs::write(at(name), b"x").unwrap();
        }
        std::fs::write(at("t/empty"), b"").unwrap();
        let old = std::time::UNIX_EPOCH - Duration::from_micros(1500);
        let f = std::fs::File::options().write(true).open(at("t/old"));
        f.unwrap().set_modified(old).unwrap();
        std::os::unix::fs::symlink(at("t/a"), at("t/link")).unwrap();
        std::os::unix::fs::symlink(at("t/sub"), at("t/dirlink")).unwrap();
        std::os::unix::fs::symlink(at("t/gone"), at("t/dangling")).unwrap();
        std::os::unix::net::UnixListener::bind(at("t/socket")).unwrap()
    }

    /// A folder's files with their changes are those object_store lists, with the entries
    /// it gives and the changes [`TableStore::changes`] looks up after it (a linked file's
    /// link too), found by one walk; not a staged upload, a socket or a dangling link.
    /// Elsewhere the listing's, with no request.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_listing_with_changes_is_object_stores_with_changes_looked_up() {
        let dir = tempfile::tempdir().unwrap();
        let _socket = every_kind(dir.path());
        let (local, wrapped) = local_and_wrapped(dir.path());
        let walked = local_tree::walk(dir.path(), &dir.path().join("t"));
        assert_eq!(
            walked.map(|found| found.len()),
            Some(9),
            "walked, not listed through object_store"
        );
        for folder in ["t", ""] {
            let files = local.list_recursive(folder).await.unwrap();
            let changes = local.changes(&files).await.unwrap();
            let expected: Vec<(Entry, Change)> = files.into_iter().zip(changes).collect();
            let listed = local.list_recursive_changes(folder, |_| true).await;
            assert_eq!(listed.unwrap(), expected);
        }
        let listed = local.list_recursive_changes("t", |_| true).await.unwrap();
        let paths: Vec<&str> = listed.iter().map(|(e, _)| e.path.as_str()).collect();
        let expected = ["t/a", "t/a#b", "t/dirlink/b", "t/dirlink/deep/c", "t/empty"];
        assert_eq!(
            paths,
            [
                &expected[..],
                &["t/link", "t/old", "t/sub/b", "t/sub/deep/c"]
            ]
            .concat()
        );
        let by_listing = wrapped.list_recursive("t").await.unwrap();
        let expected: Vec<(Entry, Change)> = by_listing
            .iter()
            .map(|e| (e.clone(), Change::listed(e)))
            .collect();
        let listed = wrapped.list_recursive_changes("t", |_| true).await;
        assert_eq!(listed.unwrap(), expected);
    }

    /// A file kept outside the handle's confinement fails the listing with its changes
    /// (as [`TableStore::changes`] fails), one not kept does not; where object_store's
    /// listing fails (a name it cannot take, a link loop) it fails too, with its error.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_listing_with_changes_refuses_and_fails_as_object_stores() {
        let dir = tempfile::tempdir().unwrap();
        let _socket = every_kind(dir.path());
        let at = |name: &str| dir.path().join(name);
        let confined = TableStore::open(dir.path().to_str().unwrap())
            .unwrap()
            .confined(Confinement::new(|p| !p.ends_with("/t/link")));
        let refused = confined.list_recursive_changes("t", |_| true).await;
        assert!(
            matches!(refused, Err(StorageError::Outside { .. })),
            "{refused:?}"
        );
        let kept = |e: &Entry| e.path != "t/link";
        let listed = confined.list_recursive_changes("t", kept).await.unwrap();
        assert_eq!(listed.len(), 8, "a file not kept is not refused");
        std::fs::write(at("t/sub/new\nline"), b"x").unwrap();
        std::fs::create_dir(at("u")).unwrap();
        std::os::unix::fs::symlink(at("u/loop"), at("u/loop")).unwrap();
        assert_eq!(local_tree::walk(dir.path(), &at("t")), None);
        let (local, _) = local_and_wrapped(dir.path());
        for folder in ["t", "u"] {
            let theirs = local.list_recursive(folder).await.unwrap_err().to_string();
            let ours = local.list_recursive_changes(folder, |_| true).await;
            assert_eq!(ours.unwrap_err().to_string(), theirs);
        }
    }

    /// A file's status changing (`chmod`, a hard link a backup tool makes) is no new
    /// file: its stamp stays, by its listing, its read and its lookup (hostile review hr7:
    /// the status change time in the tag made each sync read the table's id again until a
    /// new version was mirrored, and the job's shortcut skip no pass after it).
    #[cfg(unix)]
    #[tokio::test]
    async fn a_file_whose_status_changed_keeps_its_tag() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t/a");
        std::fs::create_dir(dir.path().join("t")).unwrap();
        std::fs::write(&file, b"x").unwrap();
        let (local, _) = local_and_wrapped(dir.path());
        let before = local.stamp("t/a").await.unwrap().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::hard_link(&file, dir.path().join("backup")).unwrap();
        assert_eq!(local.stamp("t/a").await.unwrap(), Some(before.clone()));
        assert_eq!(local.list_dir("t").await.unwrap()[0].stamp(), before);
        assert_eq!(local.get_timed("t/a").await.unwrap().1, Some(before));
    }

    #[tokio::test]
    async fn names_are_listed_as_object_store_lists_them() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["t/2.commit", "t/1.commit", "t/sub/x", "t/up#1", "t/a#b"] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"x").unwrap();
        }
        std::os::unix::fs::symlink(dir.path().join("t/1.commit"), dir.path().join("t/3.link"))
            .unwrap();
        std::os::unix::fs::symlink(dir.path().join("t/sub"), dir.path().join("t/dirlink")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("t/gone"), dir.path().join("t/dangling"))
            .unwrap();
        let (local, wrapped) = local_and_wrapped(dir.path());
        let sorted = |names: Names| {
            let mut names: Vec<String> = names.iter().map(String::from).collect();
            names.sort();
            names
        };
        let names = sorted(local.list_names("t").await.unwrap());
        assert_eq!(names, ["1.commit", "2.commit", "3.link", "a#b"]);
        assert_eq!(sorted(wrapped.list_names("t").await.unwrap()), names);
        // With sizes and times: the same entries as object_store's own listing, each
        // tagged (by a tag of its own, which a copy with its times kept does not keep).
        let fast = local.list_dir("t").await.unwrap();
        let untagged = |entries: Vec<Entry>| -> Vec<(String, u64, i64)> {
            assert!(entries.iter().all(|e| e.e_tag.is_some()), "{entries:?}");
            let plain = entries.into_iter().map(|e| (e.path, e.size, e.modified_ms));
            plain.collect()
        };
        let listed = wrapped.list_dir("t").await.unwrap();
        assert_eq!(untagged(fast.clone()), untagged(listed));
        assert_eq!(fast.len(), 4);
        assert!(fast.iter().all(|e| e.size == 1 && e.modified_ms > 0));
        assert!(local.list_dir("missing").await.unwrap().is_empty());
        // An absolute location inside the table lists the same folder.
        let absolute = format!("{}/t", local.location());
        assert_eq!(sorted(local.list_names(&absolute).await.unwrap()), names);
        assert!(local.list_names("missing").await.unwrap().is_empty());
        assert!(wrapped.list_names("missing").await.unwrap().is_empty());
    }

    /// A local root reads files directly, as object_store reads them: the same bytes
    /// (also through a link and by absolute location), not found for a missing file or
    /// a folder, an error for a path through a file; paths object_store maps otherwise
    /// than as written are left to it.
    #[tokio::test]
    async fn files_are_read_as_object_store_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("t/sub")).unwrap();
        std::fs::write(dir.path().join("t/a.json"), b"{}").unwrap();
        std::fs::write(dir.path().join("t/empty"), b"").unwrap();
        std::os::unix::fs::symlink(dir.path().join("t/a.json"), dir.path().join("t/l")).unwrap();
        // Large enough to be mapped by `get_written_once`.
        let big: Vec<u8> = (0..local_read::MAP_MIN + 5).map(|i| i as u8).collect();
        std::fs::write(dir.path().join("t/big"), &big).unwrap();
        let (local, wrapped) = local_and_wrapped(dir.path());
        let absolute = format!("{}/t/a.json", local.location());
        // Plain paths are read directly, copied or mapped.
        for path in ["t/a.json", "t/empty", "t/l", "t/big", absolute.as_str()] {
            assert!(local.local_get(path, Whole::Read).await.is_some(), "{path}");
            let slow = wrapped.get(path).await.unwrap();
            assert_eq!(local.get(path).await.unwrap(), slow, "{path}");
            assert_eq!(local.get_written_once(path).await.unwrap(), slow, "{path}");
        }
        for path in ["t/missing", "t/sub", "nothing/here"] {
            let found = |r: Result<Bytes, StorageError>| match r {
                Err(StorageError::NotFound { location }) => location,
                other => panic!("{path}: {other:?}"),
            };
            let location = found(local.get(path).await);
            assert_eq!(location, found(wrapped.get(path).await));
            assert_eq!(location, found(local.get_written_once(path).await));
        }
        // Elsewhere object_store reads them.
        std::fs::write(dir.path().join("t/up#1"), b"partial").unwrap();
        let doubled = format!("{}//t/a.json", local.location());
        // (A staged upload is refused by object_store as transient: retried, not read.)
        assert!(local.local_get("t/up#1", Whole::Read).await.is_none());
        for path in ["t/./a.json", "t/../t/a.json", "t//a.json", "t/a.json/"] {
            assert!(local.local_get(path, Whole::Read).await.is_none(), "{path}");
            let (fast, slow) = (local.get(path).await, wrapped.get(path).await);
            assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{path}");
        }
        assert!(local.local_get(&doubled, Whole::Read).await.is_none());
        assert_eq!(
            local.get(&doubled).await.unwrap(),
            wrapped.get(&doubled).await.unwrap()
        );
        for store in [&local, &wrapped] {
            let read = store.get("t/a.json/x").await;
            assert!(
                matches!(read, Err(StorageError::Backend { .. })),
                "{read:?}"
            );
        }
    }

    #[tokio::test]
    async fn paths_resolve_relative_and_absolute() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        store
            .put("a/b.txt", Bytes::from_static(b"x"))
            .await
            .unwrap();
        let abs = store.absolute("a/b.txt");
        assert!(abs.starts_with('/'));
        assert_eq!(store.relative(&abs), Some("a/b.txt"));
        assert_eq!(&store.get(&abs).await.unwrap()[..], b"x");
        assert_eq!(store.size("a/b.txt").await.unwrap(), Some(1));
        assert_eq!(store.size("a/missing").await.unwrap(), None);
        let listed = store.list_dir("a").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].path.as_str(), listed[0].size), ("a/b.txt", 1));
        assert!(listed[0].modified_ms > 0);
        assert_eq!(store.list_recursive("").await.unwrap().len(), 1);
        assert!(matches!(
            store.get("a/missing").await,
            Err(StorageError::NotFound { .. })
        ));
    }

    #[test]
    fn file_urls_of_both_styles_name_local_paths() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap();
        for location in [
            format!("file://{path}"),
            format!("file:{path}"),
            path.to_string(),
        ] {
            assert_eq!(
                TableStore::open(&location).unwrap().location(),
                path,
                "{location}"
            );
        }
    }

    #[test]
    fn a_location_is_here_in_any_spelling_and_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let path = real.to_str().unwrap();
        let store = TableStore::open(path).unwrap();
        for same in [
            path.to_string(),
            format!("{path}/"),
            format!("file://{path}"),
            format!("file:{path}/"),
            format!("{}/./real", dir.path().display()),
            link.to_str().unwrap().to_string(),
        ] {
            assert!(store.is_here(&same), "{same}");
        }
        // Opened through the link, the recorded real path is here too.
        assert!(TableStore::open(link.to_str().unwrap())
            .unwrap()
            .is_here(path));
        for other in [
            format!("{path}-copy"),
            dir.path().join("gone/t").to_str().unwrap().to_string(),
            format!("s3://bucket{path}"),
        ] {
            assert!(!store.is_here(&other), "{other}");
        }
        // A moved table: its old place no longer exists.
        let moved = dir.path().join("moved");
        std::fs::rename(&real, &moved).unwrap();
        let store = TableStore::open(moved.to_str().unwrap()).unwrap();
        assert!(!store.is_here(path));
    }

    /// A recorded spelling that opens as this very handle's location (`/d/sub/../t`, a
    /// relative `t`) is no other spelling: `sync` would re-open the table as it is and ask
    /// again, without end (hostile review 4: a stack overflow).
    #[test]
    fn a_spelling_that_opens_as_this_location_is_not_another() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let store = TableStore::open(real.to_str().unwrap()).unwrap();
        let climbing = format!("{}/sub/../real", dir.path().display());
        assert!(store.is_here(&climbing));
        assert!(store.spelled_as(&climbing).is_none(), "{climbing}");
        // Another spelling still is one, and spelled as itself it is no other.
        let linked = store.spelled_as(link.to_str().unwrap()).unwrap();
        assert_eq!(linked.location(), link.to_str().unwrap());
        assert!(linked.spelled_as(link.to_str().unwrap()).is_none());
        assert!(linked.spelled_as(&format!("{}/", link.display())).is_none());
    }

    #[test]
    fn remote_locations_compare_by_scheme_authority_and_path() {
        let key = |l: &str| remote_key(l);
        assert_eq!(key("s3://b/t/"), key("s3a://b/t"));
        assert_eq!(key("s3n://b/t"), key("S3://b/t"));
        assert_ne!(key("s3://b/t"), key("s3://b/t2"));
        assert_ne!(key("s3://b/t"), key("s3://c/t"));
        assert_ne!(key("s3://b/t"), key("gs://b/t"));
    }

    /// A store over `dir` through a [`faults::FaultyStore`], named as a remote location
    /// when `remote` (so the put-if-absent probe runs).
    fn drill(dir: &std::path::Path, mode: faults::PutIfAbsent, remote: bool) -> TableStore {
        let inner = Arc::new(LocalFileSystem::new());
        let store = Arc::new(faults::FaultyStore::new(inner).put_if_absent(mode));
        let root = Path::from_filesystem_path(dir).unwrap();
        let (location, origin) = if remote {
            (format!("drill://t/{root}"), "drill://t".to_string())
        } else {
            (dir.to_str().unwrap().to_string(), String::new())
        };
        TableStore::from_store(store, root, location, origin)
    }

    #[tokio::test]
    async fn a_store_without_put_if_absent_is_refused_unless_single_writer() {
        let dir = tempfile::tempdir().unwrap();
        let store = drill(dir.path(), faults::PutIfAbsent::Unsupported, false);
        let err = store
            .put_if_absent("metadata/v1.metadata.json", Bytes::from_static(b"one"))
            .await
            .unwrap_err();
        assert!(matches!(err, StorageError::NoPutIfAbsent { .. }), "{err}");
        assert!(err.to_string().contains("--single-writer"), "{err}");
        assert_eq!(store.size("metadata/v1.metadata.json").await.unwrap(), None);

        let single = store.with_single_writer(true);
        let put = |b: &'static [u8]| {
            let single = single.clone();
            async move {
                single
                    .put_if_absent("metadata/v1.metadata.json", Bytes::from_static(b))
                    .await
                    .unwrap()
            }
        };
        assert_eq!(put(b"one").await, PutOutcome::Created);
        assert_eq!(put(b"two").await, PutOutcome::AlreadyExists);
        assert_eq!(
            &single.get("metadata/v1.metadata.json").await.unwrap()[..],
            b"one"
        );
    }

    #[tokio::test]
    async fn a_store_that_ignores_put_if_absent_fails_the_probe() {
        let dir = tempfile::tempdir().unwrap();
        let honest = drill(dir.path(), faults::PutIfAbsent::Honoured, true);
        honest.verify_put_if_absent().await.unwrap();
        let liar = drill(dir.path(), faults::PutIfAbsent::Ignored, true);
        let err = liar.verify_put_if_absent().await.unwrap_err();
        assert!(
            err.to_string().contains("second conditional write"),
            "{err}"
        );
        // The probe leaves nothing behind, and single-writer skips it.
        assert!(liar.list_recursive("").await.unwrap().is_empty());
        liar.with_single_writer(true)
            .verify_put_if_absent()
            .await
            .unwrap();
    }

    #[test]
    fn remote_scheme_without_feature_is_refused_clearly() {
        if cfg!(feature = "cloud") {
            return;
        }
        for scheme in ["s3", "gs", "az", "abfss"] {
            let err = TableStore::open(&format!("{scheme}://bucket/t")).unwrap_err();
            assert!(
                err.to_string().contains("built with `--features cloud`"),
                "{err}"
            );
        }
    }

    #[test]
    fn two_spellings_of_one_location_normalize_alike() {
        let cwd = std::env::current_dir().unwrap();
        let n = |l: &str| TableStore::normalized_location(l).unwrap();
        assert_eq!(n("t/"), n(cwd.join("t").to_str().unwrap()));
        assert_eq!(n("file:///data/t"), n("/data/t/"));
        assert_eq!(n("s3://b/t/"), "s3://b/t");
        assert_eq!(n("tbl:1"), cwd.join("tbl:1").to_str().unwrap());
    }

    #[test]
    fn only_scheme_colon_slash_slash_makes_a_url() {
        let err = TableStore::open("tbl:1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid table location tbl:1: no such folder",
            "a path, not a URL"
        );
        assert_eq!(url_scheme("S3://b/t").as_deref(), Some("s3"));
        assert_eq!(url_scheme("file:/t").as_deref(), Some("file"));
        assert_eq!(url_scheme("C://x"), None);
        assert_eq!(url_scheme("1x://y"), None);
    }

    #[test]
    fn unsupported_schemes_say_what_would_support_them() {
        let said = |l: &str| TableStore::open(l).unwrap_err().to_string();
        assert!(said("hdfs://nn/t").contains("not supported by any xlake build"));
        assert!(said("wasbs://c@a/t").contains("az://"));
        assert!(said("ftp://h/t").contains("unknown scheme ftp://"));
        assert!(said("").contains("not a table folder"));
    }

    #[test]
    fn a_file_is_not_a_table_root_and_a_missing_folder_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.txt");
        std::fs::write(&file, b"x").unwrap();
        let err = TableStore::open(file.to_str().unwrap()).unwrap_err();
        assert!(err.to_string().contains("a file, not a folder"), "{err}");
        let err = TableStore::open(dir.path().join("nope").to_str().unwrap()).unwrap_err();
        assert!(err.to_string().contains("no such folder"), "{err}");
    }

    #[tokio::test]
    async fn refusals_of_the_local_file_system_are_not_retried() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), b"x").unwrap();
        // The error the local backend really returns for a path through a file.
        let local = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let err = local.head(&Path::from("f.txt/x")).await.unwrap_err();
        assert!(matches!(err, object_store::Error::Generic { .. }), "{err}");
        assert!(!transient(&err), "{err}");
        // Its own refusal of a name, with no operating system's reason inside.
        let err = local.delete(&Path::from("f.txt#1")).await.unwrap_err();
        assert!(!transient(&err), "{err}");
        let injected = object_store::Error::Generic {
            store: "x",
            source: "connection reset".into(),
        };
        assert!(transient(&injected));
        let denied = object_store::Error::Generic {
            store: "x",
            source: Box::new(std::io::Error::from(std::io::ErrorKind::PermissionDenied)),
        };
        assert!(!transient(&denied));
    }
}
