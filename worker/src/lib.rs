//! The worker: conversation writers, and the background duties.
//!
//! A worker owns some of the ingest partitions (`partitions`), runs one
//! writer per owned partition (`writer`, which also owns the commands'
//! JetStream acks through its feed task), and each writer sequences its
//! conversations (`sequencer`): it is the only place where `seq` is
//! assigned, where membership is checked for a send, and where a message
//! becomes durable. Gateways never write messages themselves.
//!
//! Besides, every worker runs the background duties (`duties`): due
//! scheduled messages and erasure requests on every worker; archiving,
//! message expiry, inbox expiry, erasure jobs, the report count, presence
//! notices and the ingest leaders' balance on the leader only.

mod config;
mod ctx;
mod duties;
mod error;
mod fence;
pub mod metrics;
mod partitions;
pub mod policy;
pub mod sequencer;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use switchboard_nats::definitions::{LAST_SEEN_BUCKET, PRESENCE_BUCKET, WORKERS_BUCKET};
use switchboard_store::Store;

pub use config::{ArchiveConfig, EventStream, WorkerConfig, WorkerStatus};
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
        writer::index_feed::IndexFeed::start(js.clone(), &config.worker_id, config.search_feed);
    // Shadow bans (v1.3), which the writers apply at each send. Loaded
    // before any partition is taken, so no writer stores a message of a
    // user shadow-banned before it started for all to see; followed for
    // as long as the process runs.
    let bans = switchboard_nats::records::bans::BanBook::default();
    let _follower = bans.follow(&js, Arc::new(|_, _, _| {})).await?;
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
        bans,
        config,
        expired_through: Default::default(),
        erased_through: Default::default(),
        archive_expired: Default::default(),
    });
    let routing_table = ctx.sessions.routing_table().clone();
    let last_seen = ctx
        .js
        .get_key_value(LAST_SEEN_BUCKET)
        .await
        .map_err(|e| WorkerError::nats(format!("bucket {LAST_SEEN_BUCKET}"), e))?;
    tracing::info!(worker = %ctx.config.worker_id, partitions = ctx.config.partitions, "worker started");
    let duties = duties::Duties::start(&ctx, routing_table, last_seen);
    let result = partitions::run(ctx.clone(), bucket, shutdown).await;
    ctx.sessions.withdraw().await;
    duties.stop();
    result
}
