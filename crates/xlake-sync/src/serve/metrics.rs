//! The service's Prometheus metrics, per table (label `table`: its normalised location),
//! encoded in the Prometheus text format (0.0.4) by `prometheus-client`.

use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::{CheckReport, SyncError};

type Labels = Vec<(&'static str, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Every metric the service exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pending: Family<Labels, Gauge>,
    lag_commits: Family<Labels, Gauge>,
    lag_seconds: Family<Labels, FloatGauge>,
    last_success: Family<Labels, FloatGauge>,
    snapshots: Family<Labels, Counter>,
    failures: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
    check_result: Family<Labels, Gauge>,
    callbacks: Family<Labels, Counter>,
    refused: Family<Labels, Counter>,
}

fn table(location: &str) -> Labels {
    vec![("table", location.to_string())]
}

fn duration_histogram() -> Histogram {
    // 10 ms .. ~160 s.
    Histogram::new(exponential_buckets(0.01, 2.0, 15))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Empty metrics, registered.
    pub fn new() -> Self {
        let mut m = Self {
            registry: Registry::with_prefix("xlake"),
            pending: Family::default(),
            lag_commits: Family::default(),
            lag_seconds: Family::default(),
            last_success: Family::default(),
            snapshots: Family::default(),
            failures: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            check_result: Family::default(),
            callbacks: Family::default(),
            refused: Family::default(),
        };
        let r = &mut m.registry;
        r.register(
            "source_commits_pending",
            "Completed source commits without a snapshot, as of the last check",
            m.pending.clone(),
        );
        r.register(
            "lag_commits",
            "Source commits completed after the newest mirrored one, as of the last check",
            m.lag_commits.clone(),
        );
        r.register("lag_seconds", "Time from the newest mirrored source commit to the newest completed one, as of the last check", m.lag_seconds.clone());
        r.register(
            "last_success_timestamp_seconds",
            "Unix time of the last successful sync or callback",
            m.last_success.clone(),
        );
        r.register(
            "snapshots_written",
            "Iceberg snapshots written",
            m.snapshots.clone(),
        );
        r.register(
            "failures",
            "Failed syncs, callbacks and checks, by kind",
            m.failures.clone(),
        );
        r.register(
            "sync_duration_seconds",
            "Duration of syncs and callback mirrors",
            m.duration.clone(),
        );
        r.register("check_result", "Result of the last periodic check: 0 consistent, 1 violations or lag, 2 could not check", m.check_result.clone());
        r.register(
            "callbacks",
            "Callbacks answered, by HTTP status",
            m.callbacks.clone(),
        );
        r.register(
            "callbacks_refused",
            "Callbacks counted under no table: no table there (no_table), too many tables (too_many_tables), too many callbacks (busy)",
            m.refused.clone(),
        );
        r.register_collector(Box::new(ProcessCounter {
            name: "storage_retries",
            help: "Storage requests sent again after a transient failure (a reset, a timeout, a 5xx such as 503 SlowDown), all tables",
            read: xlake_storage::retries,
        }));
        r.register_collector(Box::new(ProcessCounter {
            name: "catalog_retries",
            help: "Network catalog requests (REST, Glue) sent again after a transient failure (unreachable, reset, timed out, 429, 503)",
            read: xlake_catalog::uri::retries,
        }));
        m
    }

    /// A sync or a callback's mirror finished.
    pub fn sync_done(&self, location: &str, took: Duration, result: Result<usize, &str>) {
        let labels = table(location);
        self.duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        match result {
            Ok(written) => {
                self.snapshots.get_or_create(&labels).inc_by(written as u64);
                self.last_success.get_or_create(&labels).set(now_seconds());
            }
            Err(kind) => self.failure(location, kind),
        }
    }

    /// A whole-table sync succeeded: nothing is pending any more.
    pub fn caught_up(&self, location: &str) {
        let labels = table(location);
        self.pending.get_or_create(&labels).set(0);
        self.lag_commits.get_or_create(&labels).set(0);
        self.lag_seconds.get_or_create(&labels).set(0.0);
    }

    /// One failure of `kind` (see [`failure_kind`]).
    pub fn failure(&self, location: &str, kind: &str) {
        let mut labels = table(location);
        labels.push(("kind", kind.to_string()));
        self.failures.get_or_create(&labels).inc();
    }

    /// A periodic check finished: its lag and result (0, 1, or 2 for an error).
    pub fn checked(&self, location: &str, report: Result<&CheckReport, &SyncError>) {
        let labels = table(location);
        let code = match report {
            Ok(r) => {
                self.pending
                    .get_or_create(&labels)
                    .set(gauge(r.missing.len()));
                self.lag_commits
                    .get_or_create(&labels)
                    .set(gauge(r.lag_commits));
                self.lag_seconds
                    .get_or_create(&labels)
                    .set(r.lag_ms as f64 / 1000.0);
                i64::from(!r.consistent())
            }
            Err(e) => {
                self.failure(location, &format!("check_{}", failure_kind(e)));
                2
            }
        };
        self.check_result.get_or_create(&labels).set(code);
    }

    /// A callback was answered with `status`.
    pub fn callback(&self, status: u16) {
        self.callbacks
            .get_or_create(&vec![("status", status.to_string())])
            .inc();
    }

    /// A callback counted under no table, for `reason` (one of a fixed few).
    pub fn refused(&self, reason: &'static str) {
        self.refused
            .get_or_create(&vec![("reason", reason.to_string())])
            .inc();
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_text::encode(&mut text, &self.registry);
        text
    }
}

/// A process-wide counter kept by another crate, read at each scrape: the retries of
/// storage requests (`xlake_storage_retries_total`, [`xlake_storage::retries`]) and of
/// network catalog requests (`xlake_catalog_retries_total`, [`xlake_catalog::uri::retries`]).
#[derive(Debug)]
struct ProcessCounter {
    name: &'static str,
    help: &'static str,
    read: fn() -> u64,
}

impl Collector for ProcessCounter {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counter = ConstCounter::new((self.read)());
        let metric =
            encoder.encode_descriptor(self.name, self.help, None, counter.metric_type())?;
        counter.encode(metric)
    }
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The `kind` label of a failure.
pub fn failure_kind(e: &SyncError) -> &'static str {
    match e {
        SyncError::Storage(_) => "storage",
        SyncError::Source(_) => "source",
        SyncError::UnknownFormat { .. } => "unknown_format",
        SyncError::FormatMismatch { .. } | SyncError::SameFormat { .. } => "format_mismatch",
        SyncError::UnknownTarget { .. } | SyncError::NotForTarget { .. } => "target_choice",
        SyncError::Target(e) if e.is_conflict() => "commit_conflict",
        SyncError::Target(_) => "iceberg_target",
        SyncError::NotATable { .. } | SyncError::NoTable { .. } => "not_a_table",
        SyncError::Rebuild { .. } => "rebuild",
        SyncError::Catalog(_) => "catalog",
        SyncError::NotMirrored { .. } => "not_mirrored",
        SyncError::GoneUnmirrored { .. } => "gone_unmirrored",
        SyncError::Service(_) => "service",
    }
}
