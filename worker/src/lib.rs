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
mod expiry;
pub mod metrics;
mod partitions;
pub mod policy;
mod presence;
pub mod sequencer;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use switchboard_backbone::BackboneError;
use switchboard_backbone::definitions::{LAST_SEEN_BUCKET, PRESENCE_BUCKET, WORKERS_BUCKET};
use switchboard_store::{Store, StoreError};

pub use archive::ArchiveConfig;
pub use switchboard_backbone::node_id::IdSource;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Unique per process; shown as the holder of its leases.
    pub worker_id: String,
    /// Ingest partitions in the deployment (the backbone's setting).
    pub partitions: u16,
    /// The `sb_workers` bucket's TTL: how long a dead worker's partitions
    /// stay unowned.
    pub lease_ttl: Duration,
    /// Most commands one store commit takes.
    pub max_batch: usize,
    /// Conversation states a writer keeps in memory.
    pub cache_limit: usize,
    /// Who may edit or delete what.
    pub edit_policy: policy::EditPolicy,
    /// Where conversations fan out on write and where on read.
    pub fanout: switchboard_plugin_host::fanout::FanOutPolicy,
    /// Who may be put into groups unasked.
    pub consent: policy::ConsentPolicy,
    /// How long an undelivered inbox entry waits for its device.
    pub inbox_ttl: Duration,
    /// How often the leader sweeps expired inbox entries.
    pub inbox_sweep_every: Duration,
    /// Moving old buckets to the blob store (F14); `None` keeps everything
    /// in the store.
    pub archive: Option<ArchiveConfig>,
    /// What the worker reports about itself (`/readyz`); shared with
    /// whoever holds a clone of this config.
    pub status: Arc<WorkerStatus>,
    /// Requests each backbone service of this worker (the session
    /// registry's sync, the plugin admin service) takes at once, in all
    /// and per caller.
    pub services: switchboard_backbone::admission::AdmissionLimits,
}

/// Whether the worker can take its share of the partitions: its lease
/// loop runs, and it is announced in `sb_workers` (it then holds
/// partitions, or takes free ones at the next rebalance).
#[derive(Debug, Default)]
pub struct WorkerStatus {
    announced: std::sync::atomic::AtomicBool,
    partitions: std::sync::atomic::AtomicUsize,
    /// When the lease loop last went round, in ms since the Unix epoch.
    ticked_at_ms: std::sync::atomic::AtomicI64,
}

impl WorkerStatus {
    fn ticked(&self, announced: bool, partitions: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.announced.store(announced, Relaxed);
        self.partitions.store(partitions, Relaxed);
        self.ticked_at_ms
            .store(switchboard_protocol::Timestamp::now().unix_ms(), Relaxed);
    }

    /// Ready: the lease loop went round within the last `within`, and the
    /// worker is announced.
    pub fn ready(&self, within: Duration) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let since =
            switchboard_protocol::Timestamp::now().unix_ms() - self.ticked_at_ms.load(Relaxed);
        self.announced.load(Relaxed) && since >= 0 && (since as u128) <= within.as_millis()
    }

    /// Partitions held at the last round.
    pub fn partitions(&self) -> usize {
        self.partitions.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl WorkerConfig {
    pub fn new(worker_id: String, partitions: u16) -> Self {
        Self {
            worker_id,
            partitions,
            lease_ttl: Duration::from_secs(10),
            max_batch: 1024,
            cache_limit: 100_000,
            edit_policy: policy::EditPolicy::default(),
            fanout: switchboard_plugin_host::fanout::FanOutPolicy::default(),
            consent: policy::ConsentPolicy::default(),
            inbox_ttl: Duration::from_secs(30 * 24 * 3600),
            inbox_sweep_every: Duration::from_secs(3600),
            archive: None,
            status: Arc::default(),
            services: Default::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The writer saw its consumer lose or skip deliveries, or end: it
    /// starts over. There is no underlying error; the message says what
    /// was seen.
    #[error("NATS: {0}")]
    StartOver(String),
    /// The refused-sends bucket could not be opened. (It reads "NATS: NATS:
    /// ...", as it did when the backbone error was turned into this string.)
    #[error("NATS: {0}")]
    Refusals(#[source] BackboneError),
    #[error(transparent)]
    Backbone(#[from] BackboneError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("partition lease no longer valid")]
    LeaseLost,
}

impl WorkerError {
    /// A failed NATS call, as the backbone's own error (which reads "NATS:
    /// {context}: {source}", as this crate's did).
    pub(crate) fn nats(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Backbone(BackboneError::nats(context, source))
    }
}

pub(crate) struct Ctx {
    pub client: async_nats::Client,
    /// Whether this worker holds partition 0, which makes it the one that
    /// announces presence.
    pub leader: std::sync::atomic::AtomicBool,
    pub js: jetstream::Context,
    pub store: Arc<dyn Store>,
    pub ids: Arc<dyn IdSource>,
    /// Tenants' plugins (edit and fan-out policy); `None` runs the
    /// built-in policies only.
    pub plugins: Option<Arc<switchboard_plugin_host::Plugins>>,
    /// Tenants' quotas, following `sb_tenants`.
    pub tenants: switchboard_backbone::records::tenants::TenantBook,
    /// Refused sends, for the gateways to answer resends with.
    pub refusals: switchboard_backbone::records::refusals::Refusals,
    /// The session registry: which gateways hold the users events are for.
    pub sessions: Arc<switchboard_backbone::sessions::Sessions>,
    pub config: WorkerConfig,
}

/// Runs a worker until `shutdown` resolves. The backbone's streams and
/// buckets must exist (`definitions::ensure`); `tenants` must be following
/// `sb_tenants` (the process shares one book).
pub async fn run(
    config: WorkerConfig,
    client: async_nats::Client,
    store: Arc<dyn Store>,
    ids: Arc<dyn IdSource>,
    plugins: Option<Arc<switchboard_plugin_host::Plugins>>,
    tenants: switchboard_backbone::records::tenants::TenantBook,
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
    let refusals = switchboard_backbone::records::refusals::Refusals::open(&js)
        .await
        .map_err(WorkerError::Refusals)?;
    let registry = js
        .get_key_value(PRESENCE_BUCKET)
        .await
        .map_err(|e| WorkerError::nats(format!("bucket {PRESENCE_BUCKET}"), e))?;
    let sessions = switchboard_backbone::sessions::Sessions::start(
        client.clone(),
        registry,
        format!("worker:{}", config.worker_id),
        config.services,
    )
    .await?;
    let ctx = Arc::new(Ctx {
        leader: std::sync::atomic::AtomicBool::new(false),
        refusals,
        sessions,
        client,
        js,
        store,
        ids,
        plugins,
        tenants,
        config,
    });
    let open = |name: &'static str| {
        let js = ctx.js.clone();
        async move {
            js.get_key_value(name)
                .await
                .map_err(|e| WorkerError::nats(format!("bucket {name}"), e))
        }
    };
    let presence_view = ctx.sessions.view().clone();
    let last_seen = open(LAST_SEEN_BUCKET).await?;
    let notifier = {
        let ctx = ctx.clone();
        supervised("presence notifier", move || {
            presence::notify(ctx.clone(), presence_view.clone(), last_seen.clone())
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
    let balancer = {
        let ctx = ctx.clone();
        supervised("leader balancer", move || balance::run(ctx.clone()))
    };
    let result = partitions::run(ctx.clone(), bucket, shutdown).await;
    ctx.sessions.withdraw().await;
    notifier.abort();
    sweeper.abort();
    archiver.abort();
    balancer.abort();
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
