//! One write-commit callback. Hudi POSTs a JSON `HoodieWriteCommitCallbackMessage`
//! (`commitTime`, `tableName`, `basePath`, ...) after each commit, with its API key in
//! the `HUDI-CALLBACK-KEY` header. In order: 401 without the key (the body is not read),
//! 400/408/413 for a body that is malformed, too slow or too large, 403 for a `basePath`
//! outside the allowed locations, 503 when too many callbacks are in flight or queued or
//! the table is new past `--max-tables`; then the commit is mirrored under the table's
//! lock and answered 200, or 500 naming the commit and why (never a path outside the
//! table). Every callback is logged at info level: peer, table, commit, status, duration.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use http_body_util::{BodyExt, LengthLimitError};
use serde::Deserialize;
use serde_json::{json, Value};
use tower_http::timeout::TimeoutError;

use super::metrics::failure_kind;
use super::{off_thread, Peer, ServiceState, CALLBACKS_PER_PERMIT};
use crate::access::KEY_HEADER;
use crate::locate::locate;
use crate::{mirror_commit, SyncError};
use xlake_storage::StorageError;

/// The fields of Hudi's callback message the endpoint needs.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallbackMessage {
    commit_time: String,
    base_path: String,
    #[serde(default)]
    table_name: Option<String>,
}

/// The longest `basePath` taken (Linux's `PATH_MAX`): a longer one names no table, and
/// each one answered became a `table` label of `/metrics` for good, so that one request
/// of 2 MB made every scrape 38 MB longer, and resolving its links took seconds of a
/// worker thread for every such request (hostile review hr14).
const MAX_BASE_PATH: usize = 4096;

/// The `Retry-After` of a callback refused because too many are in flight or queued.
const RETRY_AFTER_SECONDS: u32 = 5;

/// What the audit line and the answer need.
struct Outcome {
    status: StatusCode,
    body: Value,
    table: String,
    commit: String,
    retry_after: Option<u32>,
}

impl Outcome {
    fn answered(status: StatusCode, body: Value) -> Self {
        Self {
            status,
            body,
            table: String::new(),
            commit: String::new(),
            retry_after: None,
        }
    }

    fn refused(status: StatusCode, error: &str, message: &str) -> Self {
        let body = json!({"mirrored": false, "error": error, "message": message});
        Self::answered(status, body)
    }
}

/// Answer one request on the callback listener.
pub(crate) async fn answer(
    State(state): State<Arc<ServiceState>>,
    Extension(Peer(peer)): Extension<Peer>,
    request: Request,
) -> Response {
    // A task of its own, so that it runs to its end when the client goes away (Hudi's
    // callback client gives up after its timeout, 3 s by default): dropped with the
    // request, the answer released the table's lock and the concurrency permit while the
    // mirror ran on, so the next callback for the table raced it, and no audit line was
    // written (hostile review hr14).
    let in_flight = InFlight::new(&state);
    let task = tokio::spawn(async move {
        let _in_flight = in_flight;
        let started = Instant::now();
        let outcome = handle(&state, request).await;
        let ms = started.elapsed().as_millis();
        tracing::info!(%peer, table = %outcome.table, commit = %outcome.commit, status = outcome.status.as_u16(), ms, "callback");
        state.metrics.callback(outcome.status.as_u16());
        outcome
    });
    let outcome = task.await.unwrap_or_else(|e| {
        tracing::error!(%peer, error = %e, "callback: the answer's task stopped");
        Outcome::refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "service",
            "the callback's task stopped (see the log)",
        )
    });
    let body = serde_json::to_vec(&outcome.body).unwrap_or_default();
    let mut response = (
        outcome.status,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    if let Some(seconds) = outcome.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, seconds.into());
    }
    response
}

/// A callback counted in flight while this lives ([`ServiceState`]'s `callbacks`), so
/// that a shutdown waits for it when its client has gone.
struct InFlight(Arc<ServiceState>);

impl InFlight {
    fn new(state: &Arc<ServiceState>) -> Self {
        state.callbacks.send_modify(|n| *n += 1);
        Self(state.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.callbacks.send_modify(|n| *n = n.saturating_sub(1));
    }
}

async fn handle(state: &ServiceState, request: Request) -> Outcome {
    let (parts, body) = request.into_parts();
    if parts.method != Method::POST {
        return Outcome::refused(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "callbacks are POST requests",
        );
    }
    if !state.config.key.accepts(presented_key(&parts.headers)) {
        return Outcome::refused(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            &format!(
                "missing or wrong {KEY_HEADER} header (hoodie.write.commit.callback.http.api.key)"
            ),
        );
    }
    let message = match read_message(body).await {
        Ok(m) => m,
        Err(refused) => return refused,
    };
    if message.base_path.len() > MAX_BASE_PATH {
        return Outcome::refused(
            StatusCode::BAD_REQUEST,
            "bad_request",
            &format!("basePath is longer than {MAX_BASE_PATH} bytes, which no table location is"),
        );
    }
    let commit = message.commit_time.clone();
    let with = |mut o: Outcome, table: &str| {
        o.commit = commit.clone();
        o.table = table.to_string();
        if let Some(b) = o.body.as_object_mut() {
            b.insert("commitTime".into(), json!(commit));
        }
        o
    };
    // The location checked is the one opened: a `file:` URL's `?` or `#`, or a relative
    // path's `..` after a link, once made the two differ (hostile review hr14).
    let location = open_location(&message.base_path);
    let Some(table) = state.config.allowed.table(&location) else {
        tracing::warn!(base_path = %message.base_path, commit = %commit, "refused: basePath outside the allowed locations");
        return with(
            Outcome::refused(
                StatusCode::FORBIDDEN,
                "forbidden",
                "basePath is outside the locations this service may serve",
            ),
            &message.base_path,
        );
    };
    if !state.ready.load(Ordering::SeqCst) {
        return with(
            Outcome::refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "the service is shutting down; run `xlake commit` or retry",
            ),
            &table,
        );
    }
    // Bounded before any work: each callback runs to its end, its client gone or not.
    let Ok(_queued) = state.queue.try_acquire() else {
        tracing::warn!(table = %table, commit = %commit, "refused: too many callbacks in flight or queued");
        state.metrics.refused("busy");
        let mut busy = Outcome::refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            &format!("too many callbacks in flight or queued (--concurrency x {CALLBACKS_PER_PERMIT}); retry later, or run `xlake commit`"),
        );
        busy.retry_after = Some(RETRY_AFTER_SECONDS);
        return with(busy, &table);
    };
    with(mirror(state, &message, &location, &table).await, &table)
}

/// The key header's bytes, if present.
fn presented_key(headers: &HeaderMap) -> Option<&[u8]> {
    headers.get(KEY_HEADER).map(|v| v.as_bytes())
}

/// The body as a callback message, or the answer refusing it.
async fn read_message(body: Body) -> Result<CallbackMessage, Outcome> {
    let bytes = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let inner = e.into_inner();
            let text = inner.to_string();
            let (status, kind) = if caused_by::<LengthLimitError>(inner.as_ref()) {
                (StatusCode::PAYLOAD_TOO_LARGE, "too_large")
            } else if caused_by::<TimeoutError>(inner.as_ref()) {
                (StatusCode::REQUEST_TIMEOUT, "body_timeout")
            } else {
                (StatusCode::BAD_REQUEST, "bad_request")
            };
            return Err(Outcome::refused(
                status,
                kind,
                &format!("reading the body: {text}"),
            ));
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        Outcome::refused(
            StatusCode::BAD_REQUEST,
            "bad_request",
            &format!("not a Hudi commit callback message (commitTime and basePath required): {e}"),
        )
    })
}

/// Whether `E` is `error` or one of its sources.
fn caused_by<E: std::error::Error + 'static>(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<E>() {
            return true;
        }
        next = e.source();
    }
    false
}

/// Mirror the commit under the table's lock and a concurrency permit.
async fn mirror(
    state: &ServiceState,
    message: &CallbackMessage,
    location: &str,
    table: &str,
) -> Outcome {
    let commit = &message.commit_time;
    let location = location.to_string();
    // A table of the job file mirrors with its own entry's options (view, catalog, format
    // version), as the scheduled cycle does; any other with the service's.
    let entry = state.config.jobs.as_ref().and_then(|jobs| {
        jobs.tables
            .iter()
            .find(|t| crate::access::normalise(&t.location).is_ok_and(|n| n == table))
    });
    let mut options = entry.map_or_else(|| state.config.options.clone(), crate::job::entry_options);
    options.data_roots = Some(state.config.allowed.data_roots(table));
    let Some(entered) = state.tables.admit(table) else {
        tracing::warn!(table = %table, commit = %commit, "refused: --max-tables reached");
        state.metrics.refused("too_many_tables");
        return Outcome::refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_tables",
            &format!("this service already serves {} tables named by callbacks (--max-tables); list the table in --config, or raise --max-tables", state.tables.max()),
        );
    };
    let _table = entered.lock().lock().await;
    let Ok(_permit) = state.permits.acquire().await else {
        return Outcome::refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the service is shutting down",
        );
    };
    let started = Instant::now();
    let (at, id) = (location.clone(), commit.clone());
    let options_for_check = options.clone();
    let result = off_thread("mirror", move || async move {
        mirror_commit(&at, &options, &id, |_| {}).await
    })
    .await;
    let took = started.elapsed();
    match result {
        Ok(report) => {
            // Checked periodically from now on (only tables that exist and mirrored once).
            state.remember(table, &location, &options_for_check);
            state.tables.track(table);
            state
                .metrics
                .sync_done(table, took, Ok(report.written.len()));
            Outcome::answered(
                StatusCode::OK,
                json!({
                    "mirrored": true,
                    "tableName": message.table_name,
                    "snapshotsWritten": report.written.len(),
                }),
            )
        }
        Err(e) => {
            tracing::error!(table = %table, commit = %commit, error = %e, "callback: mirroring failed");
            if state.tables.tracked(table) || !nothing_there(&location, &e).await {
                state.tables.track(table);
                state.metrics.sync_done(table, took, Err(failure_kind(&e)));
            } else {
                state.metrics.refused("no_table");
            }
            Outcome::answered(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({
                    "mirrored": false,
                    "tableName": message.table_name,
                    "error": failure_kind(&e),
                    "message": public_message(&e, &location, table),
                }),
            )
        }
    }
}

/// Whether a mirror that failed with `e` found no table at `location`: no source table,
/// no Iceberg mirror, or no folder at all. Such a location gets no series of its own.
async fn nothing_there(location: &str, e: &SyncError) -> bool {
    let no_folder =
        |e: &SyncError| matches!(e, SyncError::Storage(StorageError::InvalidLocation { .. }));
    if !(no_folder(e) || matches!(e, SyncError::NotATable { .. } | SyncError::NoTable { .. })) {
        return false;
    }
    let at = location.to_string();
    match off_thread("look", move || async move { locate(&at, None).await }).await {
        Ok(found) => found.format.is_none() && !found.iceberg,
        Err(e) => no_folder(&e),
    }
}

/// The location to open, and to check: local paths made absolute with `.`/`..` resolved
/// as text (not symlinks, so metadata keeps the path Hudi uses; a relative path left to
/// the opening had its `..` resolved after a link), a `file:` URL's path taken as written
/// (a `?` or `#` in it is part of a folder name, as Hadoop writes it), other URLs as sent.
fn open_location(base_path: &str) -> String {
    let file = base_path
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("file:"));
    if file {
        let p = &base_path[5..];
        return lexical_path(p.strip_prefix("//").unwrap_or(p));
    }
    if base_path.contains("://") {
        return base_path.to_string();
    }
    match std::path::absolute(base_path) {
        Ok(abs) => lexical_path(&abs.to_string_lossy()),
        Err(_) => base_path.to_string(),
    }
}

fn lexical_path(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            p => out.push(p),
        }
    }
    format!("/{}", out.join("/"))
}

/// The error as the caller may see it: which commit and why, with paths inside the table
/// made relative, any other path and any byte count replaced. The log has it all.
pub(crate) fn public_message(e: &SyncError, location: &str, table: &str) -> String {
    if let SyncError::NotMirrored { commit, reason, .. } = e {
        return redact(
            &format!("source commit {commit} is not mirrored: {reason}"),
            location,
            table,
        );
    }
    redact(&e.to_string(), location, table)
}

fn redact(text: &str, location: &str, table: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let mut out = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        let inside = [location, table]
            .iter()
            .filter(|t| !t.is_empty())
            .find_map(|t| w.strip_prefix(*t));
        let next = words.get(i + 1).copied().unwrap_or_default();
        let prev = if i > 0 { words[i - 1] } else { "" };
        let digits = !w.is_empty()
            && w.trim_end_matches([',', ':', ';', ')'])
                .chars()
                .all(|c| c.is_ascii_digit());
        let word = if let Some(rest) = inside {
            format!("<table>{rest}")
        } else if w.contains("://") || w.trim_start_matches(['(', '"', '\'']).starts_with('/') {
            "<path outside the table>".to_string()
        } else if digits && (next.starts_with("bytes") || prev == "has") {
            "<n>".to_string()
        } else {
            (*w).to_string()
        };
        out.push(word);
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_name_no_path_outside_the_table_nor_sizes() {
        let text = "/lake/t: source commit 3: data file /etc/hostname: the source records 10 bytes, storage has 13";
        let r = redact(text, "/lake/t", "/lake/t");
        assert_eq!(r, "<table>: source commit 3: data file <path outside the table> the source records <n> bytes, storage has <n>");
        assert_eq!(
            redact("s3://b/t/x.parquet: not found", "s3://b/t", "s3://b/t"),
            "<table>/x.parquet: not found"
        );
        assert_eq!(open_location("file:/a/./b/../c/"), "/a/c");
        assert_eq!(open_location("s3a://b/t"), "s3a://b/t");
        assert_eq!(open_location("file:///a/b?/../../c"), "/c");
        assert_eq!(open_location("FILE:/a/b#/../x"), "/a/x");
        let here = std::env::current_dir().unwrap();
        let parent = here.parent().unwrap().to_string_lossy().to_string();
        assert_eq!(open_location("l/../.."), parent);
    }
}
