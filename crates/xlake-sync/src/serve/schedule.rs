//! The service's background work: the scheduled sync of the config's tables (`--every`),
//! each under the same per-table lock as callbacks, and the periodic check (`--check-every`)
//! of every table the service knows (listed, or seen in a callback).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::metrics::{failure_kind, Metrics};
use super::{off_thread, ServiceState};
use crate::access::normalise;
use crate::check::check;
use crate::job::{sync_entry, TableEntry, TableResult};

/// Start the background loops the config asks for; they end when `stop` turns true
/// (after the cycle in progress).
pub(crate) fn start(state: Arc<ServiceState>, stop: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    if let (Some(every), Some(jobs)) = (state.config.every, state.config.jobs.clone()) {
        let (state, mut stop) = (state.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                cycle(&state, &jobs.tables).await;
                if stopped_within(&mut stop, every).await {
                    break;
                }
            }
        }));
    }
    if let Some(every) = state.config.check_every {
        let mut stop = stop;
        tasks.push(tokio::spawn(async move {
            loop {
                if stopped_within(&mut stop, every).await {
                    break;
                }
                check_all(&state).await;
            }
        }));
    }
    tasks
}

/// Wait `interval`; true if the service is stopping.
async fn stopped_within(stop: &mut watch::Receiver<bool>, interval: Duration) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        () = tokio::time::sleep(interval) => *stop.borrow(),
        _ = stop.changed() => true,
    }
}

/// One scheduled cycle: every listed table, each under its lock.
async fn cycle(state: &ServiceState, tables: &[TableEntry]) {
    let results: Vec<TableResult> = futures::stream::iter(tables.iter().cloned())
        .map(|entry| async move {
            let key = normalise(&entry.location).unwrap_or_else(|_| entry.location.clone());
            let entered = state.tables.listed(&key);
            let _table = entered.lock().lock().await;
            let _permit = state.permits.acquire().await;
            let location = entry.location.clone();
            match off_thread("sync", move || async move { Ok(sync_entry(entry).await) }).await {
                Ok(r) => r,
                Err(e) => TableResult {
                    location,
                    outcome: Err(e),
                    expired: None,
                    took: Duration::ZERO,
                },
            }
        })
        .buffer_unordered(state.config.concurrency.max(1))
        .collect()
        .await;
    let failed = results.iter().filter(|r| r.outcome.is_err()).count();
    for r in &results {
        record(&state.metrics, r);
    }
    tracing::info!(tables = results.len(), failed, "scheduled cycle done");
}

/// Record one table's result of a cycle.
pub(crate) fn record(metrics: &Metrics, r: &TableResult) {
    let table = normalise(&r.location).unwrap_or_else(|_| r.location.clone());
    match &r.outcome {
        Ok(report) => {
            metrics.sync_done(&table, r.took, Ok(report.written.len()));
            metrics.caught_up(&table);
        }
        Err(e) => {
            tracing::error!(table = %r.location, error = %e, "scheduled sync failed");
            metrics.sync_done(&table, r.took, Err(failure_kind(e)));
        }
    }
}

/// Check every known table once and record lag and result.
async fn check_all(state: &ServiceState) {
    for (table, location, options) in state.known() {
        let at = location.clone();
        let report = off_thread(
            "check",
            move || async move { check(&at, &options, false).await },
        )
        .await;
        if let Err(e) = &report {
            tracing::warn!(table = %location, error = %e, "periodic check could not check");
        }
        state.metrics.checked(&table, report.as_ref());
    }
}
