//! Prometheus metrics for the whole process, and the listener that serves
//! them with health to a scraper or an orchestrator (`--metrics-listen`).
//!
//! Each crate names and counts its own metrics with the `metrics` facade
//! (`gateway/src/metrics.rs`, `worker/src/metrics.rs`,
//! `store/src/metrics.rs`); this module installs the one exporter, adds
//! the process's own gauges (resident memory, open file descriptors, CPU
//! time) at each scrape and its `switchboard_build_info`, and renders the
//! text format.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::http::StatusCode;
use axum::routing::get;
use futures::future::BoxFuture;
use metrics::{describe_gauge, gauge};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use switchboard_gateway::metrics::{CONTENT_TYPE, Exposition};

/// Latencies: from half a millisecond (a pub-ack on loopback) to ten
/// seconds (a queue under overload).
const SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Sizes of batches and groups, in powers of two up to a writer's batch.
const COUNT_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

const RESIDENT_MEMORY: &str = "process_resident_memory_bytes";
const OPEN_FDS: &str = "process_open_fds";
const CPU_SECONDS: &str = "process_cpu_seconds_total";
const START_TIME: &str = "process_start_time_seconds";
const BUILD_INFO: &str = "switchboard_build_info";

/// Installs the process's exporter (once per process) and describes every
/// metric; returns what renders them.
pub fn install(process: &str) -> anyhow::Result<Exposition> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full(switchboard_store::metrics::COMMIT_JOBS.into()),
                COUNT_BUCKETS,
            )
        })
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full(switchboard_worker::metrics::BATCH_COMMANDS.into()),
                COUNT_BUCKETS,
            )
        })
        .context("metric buckets")?
        .add_global_label("process", process)
        .install_recorder()
        .context("installing the metrics exporter")?;
    switchboard_gateway::metrics::describe();
    switchboard_worker::metrics::describe();
    switchboard_store::metrics::describe();
    switchboard_store_scylla::metrics::describe();
    switchboard_plugin_host::metrics::describe();
    switchboard_push::describe_metrics();
    switchboard_webhooks::describe_metrics();
    switchboard_previews::describe_metrics();
    switchboard_search::metrics::describe();
    describe_gauge!(
        RESIDENT_MEMORY,
        metrics::Unit::Bytes,
        "Resident memory of the process."
    );
    describe_gauge!(OPEN_FDS, "Open file descriptors of the process.");
    describe_gauge!(
        CPU_SECONDS,
        metrics::Unit::Seconds,
        "User and system CPU time the process has used (only grows)."
    );
    describe_gauge!(
        START_TIME,
        metrics::Unit::Seconds,
        "When the process started, in seconds since the Unix epoch."
    );
    describe_gauge!(
        BUILD_INFO,
        "Always 1; its labels say which release the process runs."
    );
    gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        gauge!(START_TIME).set(now.as_secs_f64());
    }
    // Histograms keep their samples until upkeep folds them in; scrapes
    // do it too, but a process nobody scrapes must not grow.
    let upkept = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(5));
        loop {
            every.tick().await;
            upkept.run_upkeep();
        }
    });
    Ok(Exposition(Arc::new(move || render(&handle))))
}

fn render(handle: &PrometheusHandle) -> String {
    if let Some(bytes) = resident_memory() {
        gauge!(RESIDENT_MEMORY).set(bytes as f64);
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        gauge!(OPEN_FDS).set(fds.count() as f64);
    }
    if let Some(seconds) = cpu_seconds() {
        gauge!(CPU_SECONDS).set(seconds);
    }
    handle.render()
}

/// User plus system CPU time from `/proc/self/stat` (Linux; `None`
/// elsewhere).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    cpu_seconds_of(&stat)
}

/// The 14th and 15th fields (utime, stime) in clock ticks. The command
/// name (field 2) is in parentheses and may hold spaces, so the fields
/// are counted after its closing one.
fn cpu_seconds_of(stat: &str) -> Option<f64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    // USER_HZ is 100 on every Linux ABI this runs on; the kernel scales
    // what it reports here to it whatever its internal tick rate.
    Some((user + system) as f64 / 100.0)
}

/// Resident set size from `/proc/self/statm` (Linux; `None` elsewhere).
fn resident_memory() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // The page size is 4 KiB on every Linux this runs on (x86-64, and
    // arm64 as configured by the common distributions).
    Some(pages * 4096)
}

/// What `/readyz` checks, and its answer: whether ready, and the checks
/// by name.
pub type Readiness = Arc<dyn Fn() -> BoxFuture<'static, (bool, serde_json::Value)> + Send + Sync>;

/// Serves `/metrics`, `/healthz` and `/readyz` on `addr` until the process
/// ends; returns once listening.
pub async fn serve(
    addr: SocketAddr,
    exposition: Exposition,
    readiness: Readiness,
) -> anyhow::Result<SocketAddr> {
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move || async move {
                (
                    [(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)],
                    (exposition.0)(),
                )
            }),
        )
        .route(
            "/healthz",
            get(|| async { axum::Json(serde_json::json!({ "status": "ok" })) }),
        )
        .route(
            "/readyz",
            get(move || {
                let readiness = readiness.clone();
                async move {
                    let (ready, checks) = readiness().await;
                    let status = if ready {
                        StatusCode::OK
                    } else {
                        StatusCode::SERVICE_UNAVAILABLE
                    };
                    (status, axum::Json(checks))
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening for metrics on {addr}"))?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the metrics listener stopped");
        }
    });
    Ok(bound)
}

/// A process's `/readyz` on its metrics listener: NATS connected, the
/// store answering within 2 s, and for a worker, partitions held or free
/// to take (`WorkerStatus::ready`).
pub fn readiness(
    client: &async_nats::Client,
    store: &Arc<dyn switchboard_store::Store>,
    worker: Option<Arc<switchboard_worker::WorkerStatus>>,
) -> Readiness {
    let (client, store) = (client.clone(), store.clone());
    Arc::new(move || {
        let (client, store, worker) = (client.clone(), store.clone(), worker.clone());
        Box::pin(async move {
            let nats = client.connection_state() == async_nats::connection::State::Connected;
            let store = matches!(
                tokio::time::timeout(Duration::from_secs(2), store.ping()).await,
                Ok(Ok(()))
            );
            // The lease loop goes round every half second.
            let partitions = worker
                .as_ref()
                .map(|w| (w.ready(Duration::from_secs(3)), w.partitions()));
            let ready = nats && store && partitions.is_none_or(|(ready, _)| ready);
            let mut checks = serde_json::json!({
                "status": if ready { "ready" } else { "unavailable" },
                "nats": if nats { "connected" } else { "disconnected" },
                "store": if store { "ok" } else { "unavailable" },
            });
            if let Some((ready, held)) = partitions {
                checks["partitions"] = serde_json::json!({
                    "status": if ready { "held or free to take" } else { "not taking" },
                    "held": held,
                });
            }
            (ready, checks)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::cpu_seconds_of;

    #[test]
    fn cpu_time_is_read_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (tokio (rt) w) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 9 0";
        assert_eq!(cpu_seconds_of(stat), Some(3.0));
        assert_eq!(cpu_seconds_of("4242 (x) S 1"), None);
        assert_eq!(cpu_seconds_of("no parenthesis"), None);
    }

    #[test]
    fn this_process_has_used_some_cpu_time() {
        assert!(super::cpu_seconds().is_some_and(|s| s >= 0.0));
    }
}
