//! `xlake serve`: the long-running service. One listener answers Hudi's write-commit
//! callback (`hoodie.write.commit.callback.http.url`) by mirroring the commit before it
//! answers, and serves `/healthz`, `/readyz` and `/metrics`; with a job config the same
//! process runs the scheduled sync and the periodic check of the listed tables.
//!
//! | module | what it does |
//! |---|---|
//! | [`access`](crate::access) | the API key, allowed locations, path normalisation (the crate's module, which `sync --allow` shares) |
//! | [`callback`] | one callback: authenticate, parse, authorise, mirror under the table's lock, answer |
//! | [`metrics`] | the Prometheus metrics |
//! | [`schedule`] | the scheduled sync cycle and the periodic check |
//! | [`tables`] | the tables known: their locks, which have series, the `--max-tables` cap |
//!
//! HTTP/1.1 keep-alive on hyper, routing by axum; a connection that does not send its
//! headers within the header timeout, or its body within the body timeout, is closed;
//! bodies over the limit are answered 413 unread. On shutdown the listener closes, idle
//! connections are closed, and requests in flight (their mirrors) finish and are answered.

pub mod callback;
pub mod metrics;
pub mod schedule;
mod tables;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State as Shared;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::access::{self, Allowed, Key};
use crate::job::JobConfig;
use crate::{SyncError, SyncOptions};
use metrics::Metrics;
use tables::Tables;

/// Callbacks past their key and location check that may be in flight or queued at once,
/// per `--concurrency` permit; past that a callback is answered 503 with `Retry-After`
/// before any work. Each one whose client has gone runs on to its end, so without a
/// bound they queued without one.
pub const CALLBACKS_PER_PERMIT: usize = 16;

/// How the service runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The key callbacks must present.
    pub key: Key,
    /// Where callbacks may point.
    pub allowed: Allowed,
    /// Sync options for callback tables.
    pub options: SyncOptions,
    /// Tables mirrored at once (callbacks and the scheduled cycle together).
    pub concurrency: usize,
    /// Time a client has to send a request's headers.
    pub header_timeout: Duration,
    /// Time a client has to send a request's body.
    pub body_timeout: Duration,
    /// Largest request body, bytes.
    pub max_body: usize,
    /// The most tables outside `jobs` that callbacks may add (each gets its own series
    /// on `/metrics`); callbacks naming a new one past that are answered 503.
    pub max_tables: usize,
    /// Tables of a job config: synced every `every`, checked every `check_every`.
    pub jobs: Option<JobConfig>,
    /// Interval of the scheduled sync of the config's tables.
    pub every: Option<Duration>,
    /// Interval of the periodic check of every known table.
    pub check_every: Option<Duration>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            key: Key::none(),
            allowed: Allowed::default(),
            options: SyncOptions::default(),
            concurrency: 4,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_body: 64 << 20,
            max_tables: 10_000,
            jobs: None,
            every: None,
            check_every: None,
        }
    }
}

/// What every request and background task shares.
#[derive(Debug)]
pub(crate) struct ServiceState {
    config: ServeConfig,
    metrics: Arc<Metrics>,
    tables: Tables,
    permits: Semaphore,
    /// Places for callbacks in flight or queued ([`CALLBACKS_PER_PERMIT`]).
    queue: Semaphore,
    ready: AtomicBool,
    /// Callbacks in flight, their clients gone or not: a shutdown waits for them
    /// (hostile review hr15: one whose client had gone was cut short by a SIGTERM).
    callbacks: watch::Sender<usize>,
    /// Tables the periodic check covers: normalised location -> (location, options).
    known: Mutex<BTreeMap<String, (String, SyncOptions)>>,
}

impl ServiceState {
    fn new(config: ServeConfig) -> Self {
        let concurrency = config.concurrency.max(1);
        let listed = config.jobs.iter().flat_map(|j| &j.tables);
        let listed = listed.filter_map(|t| access::normalise(&t.location).ok());
        Self {
            tables: Tables::new(listed, config.max_tables),
            permits: Semaphore::new(concurrency),
            queue: Semaphore::new(concurrency.saturating_mul(CALLBACKS_PER_PERMIT)),
            metrics: Arc::new(Metrics::new()),
            ready: AtomicBool::new(true),
            callbacks: watch::Sender::new(0),
            known: Mutex::default(),
            config,
        }
    }

    fn remember(&self, table: &str, location: &str, options: &SyncOptions) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known
            .entry(table.to_string())
            .or_insert_with(|| (location.to_string(), options.clone()));
    }

    fn known(&self) -> Vec<(String, String, SyncOptions)> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known
            .iter()
            .map(|(k, (l, o))| (k.clone(), l.clone(), o.clone()))
            .collect()
    }
}

/// Run a future that is not `Send` (the engine holds delta-kernel iterators across
/// awaits) to completion on a blocking thread of its own, on this runtime.
pub(crate) async fn off_thread<T, Fut>(
    what: &str,
    make: impl FnOnce() -> Fut + Send + 'static,
) -> Result<T, SyncError>
where
    Fut: Future<Output = Result<T, SyncError>>,
    T: Send + 'static,
{
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || handle.block_on(make()))
        .await
        .unwrap_or_else(|e| Err(SyncError::Service(format!("{what} stopped: {e}"))))
}

/// Bind `address` (`host:port`; host names are resolved, port 0 picks a free port); the
/// error names the address.
pub async fn bind(address: &str) -> Result<TcpListener, SyncError> {
    TcpListener::bind(address)
        .await
        .map_err(|e| SyncError::Service(format!("cannot listen on {address}: {e}")))
}

/// The peer of a connection, for the audit log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub(crate) SocketAddr);

/// Run the service until `shutdown` completes, then stop gracefully: the listeners close,
/// requests in flight and the current scheduled cycle finish. `metrics_listener`, when
/// given, serves the health and metrics endpoints instead of the main listener.
pub async fn serve(
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SyncError> {
    if config.key.is_required() {
        tracing::info!(
            "callbacks must present the key in the {} header",
            access::KEY_HEADER
        );
    } else {
        tracing::warn!("INSECURE: --insecure-no-key: any client that reaches the port can make this service read and write the allowed tables");
    }
    let state = Arc::new(ServiceState::new(config));
    for entry in state.config.jobs.iter().flat_map(|j| &j.tables) {
        let options = crate::job::entry_options(entry);
        if let Ok(n) = access::normalise(&entry.location) {
            state.remember(&n, &entry.location, &options);
        }
    }
    let (stop_tx, stop) = watch::channel(false);
    let background = schedule::start(state.clone(), stop);
    let separate = metrics_listener.is_some();
    let main = router(state.clone(), !separate);
    let side = separate.then(|| health_router(state.clone()));
    accept(
        &listener,
        metrics_listener.as_ref(),
        &state,
        main,
        side,
        shutdown,
    )
    .await;
    drop(listener);
    drop(metrics_listener);
    let _ = stop_tx.send(true);
    for task in background {
        let _ = task.await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// Accept connections until `shutdown`, then wait for the open ones to finish.
async fn accept(
    listener: &TcpListener,
    metrics_listener: Option<&TcpListener>,
    state: &Arc<ServiceState>,
    main: Router,
    side: Option<Router>,
    shutdown: impl Future<Output = ()>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(state.config.header_timeout)
        .keep_alive(true);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (accepted, app) = tokio::select! {
            a = listener.accept() => (a, &main),
            a = accept_on(metrics_listener) => (a, side.as_ref().unwrap_or(&main)),
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = TowerToHyperService::new(app.clone().layer(Extension(Peer(peer))));
        let conn = http.serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection closed");
            }
        });
    }
    tracing::info!("shutting down: no new connections; finishing requests in flight");
    state.ready.store(false, Ordering::SeqCst);
    graceful.shutdown().await;
    // A callback whose client went away runs on in a task of its own, on no connection.
    let mut callbacks = state.callbacks.subscribe();
    let _ = callbacks.wait_for(|n| *n == 0).await;
}

async fn accept_on(
    listener: Option<&TcpListener>,
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// The main listener's routes: any POST is a callback.
fn router(state: Arc<ServiceState>, with_health: bool) -> Router {
    let limit = state.config.max_body;
    let body_timeout = state.config.body_timeout;
    let callbacks = Router::new()
        .fallback(callback::answer)
        .layer(RequestBodyLimitLayer::new(limit))
        .layer(RequestBodyTimeoutLayer::new(body_timeout))
        .with_state(state.clone());
    if with_health {
        health_router(state).merge(callbacks)
    } else {
        callbacks
    }
}

/// `/healthz`, `/readyz`, `/metrics`.
fn health_router(state: Arc<ServiceState>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(state)
}

async fn readyz(Shared(state): Shared<Arc<ServiceState>>) -> Response {
    if state.ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response()
    }
}

async fn metrics_text(Shared(state): Shared<Arc<ServiceState>>) -> Response {
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        state.metrics.encode(),
    )
        .into_response()
}

/// The health and metrics endpoints alone, for `xlake run --every --metrics-listen`.
#[derive(Debug, Clone)]
pub struct MetricsEndpoint {
    metrics: Arc<Metrics>,
}

impl MetricsEndpoint {
    /// Serve `/healthz`, `/readyz` and `/metrics` on `listener` in the background.
    pub fn start(listener: TcpListener) -> Self {
        let state = Arc::new(ServiceState::new(ServeConfig {
            concurrency: 1,
            ..ServeConfig::default()
        }));
        let metrics = state.metrics.clone();
        let app = health_router(state.clone());
        tokio::spawn(async move {
            accept(&listener, None, &state, app, None, std::future::pending()).await;
        });
        Self { metrics }
    }

    /// Record one table's result of a job cycle.
    pub fn record(&self, result: &crate::job::TableResult) {
        schedule::record(&self.metrics, result);
    }

    /// Record one table's check (lag, pending commits, result).
    pub fn checked(&self, location: &str, report: Result<&crate::CheckReport, &SyncError>) {
        let table = access::normalise(location).unwrap_or_else(|_| location.to_string());
        self.metrics.checked(&table, report);
    }
}
