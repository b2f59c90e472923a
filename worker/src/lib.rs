//! Conversation writers.
//!
//! A worker owns some of the ingest partitions (`partitions`), runs one
//! writer per owned partition (`writer`), and each writer sequences its
//! conversations (`sequencer`): it is the only place where `seq` is
//! assigned, where membership is checked for a send, and where a message
//! becomes durable. Gateways never write messages themselves. The leader
//! worker also keeps the ingest path's NATS Raft leaders spread over the
//! nodes (`balance`).

mod archive;
mod balance;
mod config;
mod ctx;
mod erasure;
mod error;
mod expiry;
mod fence;
mod index_feed;
mod maintenance;
pub mod metrics;
mod partitions;
pub mod policy;
mod presence;
mod report_count;
mod retention;
pub mod scheduler;
pub mod sequencer;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use switchboard_nats::definitions::{LAST_SEEN_BUCKET, PRESENCE_BUCKET, WORKERS_BUCKET};
use switchboard_store::Store;

pub use config::{ArchiveConfig, WorkerConfig, WorkerStatus};
use ctx::Ctx;
pub use error::WorkerError;
use fence::Leadership;
pub use switchboard_nats::node_id::IdSource;

/// Runs a worker until `shutdown` resolves. The backbone's streams and
/// buckets must exist (`definitions::ensure`); `tenants` must be following
/// `sb_tenants` (the process shares one book).
pub async fn run(
    config: WorkerConfig,
    client: async_nats::Client,
    store: Arc<dyn Store>,
    ids: Arc<dyn IdSource>,
    plugins: Option<Arc<switchboard_plugin_host::Plugins>>,
    tenants: switchboard_nats::records::tenants::TenantBook,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), WorkerError> {
    // JetStream requests answer in milliseconds when the cluster is well;
    // while a stream elects a leader they get no answer at all. A short
    // timeout lets a writer try again soon after the election rather than
    // wait out the default five seconds.
    let js = jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(2))
        .build(client.clone());
    let bucket = js
        .get_key_value(WORKERS_BUCKET)
        .await
        .map_err(|e| WorkerError::nats(format!("bucket {WORKERS_BUCKET}"), e))?;
    let refusals = switchboard_nats::records::refusals::Refusals::open(&js)
        .await
        .map_err(WorkerError::Refusals)?;
    let registry = js
        .get_key_value(PRESENCE_BUCKET)
        .await
        .map_err(|e| WorkerError::nats(format!("bucket {PRESENCE_BUCKET}"), e))?;
    let sessions = switchboard_nats::sessions::Sessions::start(
        client.clone(),
        registry,
        format!("worker:{}", config.worker_id),
        config.services,
    )
    .await?;
    let index_feed =
        index_feed::IndexFeed::start(js.clone(), &config.worker_id, config.search_feed);
    let ctx = Arc::new(Ctx {
        leader: Leadership::default(),
        index_feed,
        refusals,
        sessions,
        client,
        js,
        store,
        ids,
        plugins,
        tenants,
        config,
        expired_through: Default::default(),
        erased_through: Default::default(),
        archive_expired: Default::default(),
    });
    let open = |name: &'static str| {
        let js = ctx.js.clone();
        async move {
            js.get_key_value(name)
                .await
                .map_err(|e| WorkerError::nats(format!("bucket {name}"), e))
        }
    };
    let routing_table = ctx.sessions.routing_table().clone();
    let last_seen = open(LAST_SEEN_BUCKET).await?;
    let notifier = {
        let ctx = ctx.clone();
        supervised("presence notifier", move || {
            presence::notify(ctx.clone(), routing_table.clone(), last_seen.clone())
        })
    };
    tracing::info!(worker = %ctx.config.worker_id, partitions = ctx.config.partitions, "worker started");
    let sweeper = {
        let ctx = ctx.clone();
        supervised("inbox expiry", move || expiry::run(ctx.clone()))
    };
    let archiver = {
        let ctx = ctx.clone();
        supervised("archiver", move || archive::run(ctx.clone()))
    };
    let expirer = {
        let ctx = ctx.clone();
        supervised("message expiry", move || retention::run(ctx.clone()))
    };
    let eraser = {
        let ctx = ctx.clone();
        supervised("erasure jobs", move || erasure::run(ctx.clone()))
    };
    let erasure_requests = {
        let ctx = ctx.clone();
        supervised("erasure requests", move || {
            erasure::serve_gateways(ctx.clone())
        })
    };
    let report_counter = {
        let ctx = ctx.clone();
        supervised("report counter", move || report_count::run(ctx.clone()))
    };
    let scheduler = {
        let ctx = ctx.clone();
        supervised("scheduler", move || scheduler::run(ctx.clone()))
    };
    let balancer = {
        let ctx = ctx.clone();
        supervised("leader balancer", move || balance::run(ctx.clone()))
    };
    let result = partitions::run(ctx.clone(), bucket, shutdown).await;
    ctx.sessions.withdraw().await;
    notifier.abort();
    sweeper.abort();
    archiver.abort();
    report_counter.abort();
    eraser.abort();
    erasure_requests.abort();
    expirer.abort();
    balancer.abort();
    scheduler.abort();
    result
}

/// Runs one background part of the worker, and starts it again after a
/// second if it panics: a bug in one part must take neither the others
/// nor the process down. Aborting the returned handle stops the part.
fn supervised<F, Fut>(name: &'static str, make: F) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    /// Aborts the running part when the supervisor itself is aborted.
    struct AbortOnDrop(tokio::task::AbortHandle);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    tokio::spawn(async move {
        loop {
            let part = tokio::spawn(make());
            let guard = AbortOnDrop(part.abort_handle());
            let ended = part.await;
            drop(guard);
            match ended {
                Err(e) if e.is_panic() => {
                    tracing::error!(part = name, error = %e, "a worker part panicked; starting it again");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                _ => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_part_that_panics_is_started_again() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let part = supervised("test part", move || {
            let runs = counted.clone();
            async move {
                if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("a bug in the first run");
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(10), part)
            .await
            .expect("the part ended")
            .expect("the supervisor itself did not panic");
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }
}
