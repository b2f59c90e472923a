//! What a worker is told (`WorkerConfig`, filled in by the binary) and
//! what it tells about itself (`WorkerStatus`, read by `/readyz`).

use std::sync::Arc;
use std::time::Duration;

use crate::policy;

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
    /// How often the leader asks the writers to expire messages past
    /// their conversation's retention or disappearing time (v1.2): a
    /// message goes at most this long after its time.
    pub expiry_pass_every: Duration,
    /// How often the leader asks the writers to expire messages of every
    /// conversation of the tenants with a default retention (v1.2): such
    /// a message goes at most this long after its time. Slower than
    /// `expiry_pass_every`: it visits every conversation of the tenant.
    pub tenant_retention_pass_every: Duration,
    /// Which events go to `SB_EVENTS` (file: `event_stream`).
    pub event_stream: EventStream,
    /// Moving old buckets to the blob store (F14); `None` keeps everything
    /// in the store.
    pub archive: Option<ArchiveConfig>,
    /// What the worker reports about itself (`/readyz`); shared with
    /// whoever holds a clone of this config.
    pub status: Arc<WorkerStatus>,
    /// Requests each backbone service of this worker (the session
    /// registry's sync, the plugin admin service) takes at once, in all
    /// and per caller.
    pub services: switchboard_nats::admission::AdmissionLimits,
    /// Whether writers feed the search index (`SB_INDEX`, v1.2): off for
    /// a deployment that runs no search, which then pays nothing for it.
    pub search_feed: bool,
    /// Whether writers hand texts with links to the link previews stage
    /// (v1.3; `[previews] enabled`): off, no job is published.
    pub link_previews: bool,
    /// The deployment's content limits (`[limits]`), which each tenant's
    /// `max_message_bytes` lowers: what a scheduled send's moderator may
    /// rewrite it to (`switchboard_plugin_host::screen`).
    pub content: switchboard_protocol::ContentLimits,
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
    pub(crate) fn ticked(&self, announced: bool, partitions: usize) {
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
            search_feed: true,
            link_previews: true,
            content: switchboard_protocol::ContentLimits::default(),
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
            expiry_pass_every: Duration::from_secs(60),
            tenant_retention_pass_every: Duration::from_secs(3600),
            event_stream: EventStream::default(),
            archive: None,
            status: Arc::default(),
            services: Default::default(),
        }
    }
}

/// Which events writers store on `SB_EVENTS`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventStream {
    /// Those of the types some webhook of their tenant wants (what the
    /// webhooks need).
    #[default]
    Webhooks,
    /// Every event of every tenant, for operators who consume the stream
    /// themselves (`nats consumer add SB_EVENTS ...`).
    All,
}

/// The archiver's settings.
#[derive(Debug, Clone)]
pub struct ArchiveConfig {
    /// A bucket is archived once its day is this many days old (today's
    /// bucket is 0 days old). Keep it above the inbox lifetime: archiving
    /// removes the inbox entries of what it moves.
    pub after_days: u32,
    /// How often the leader scans.
    pub every: Duration,
    /// Most buckets one scan requests (the rest wait for the next scan).
    pub max_per_scan: usize,
}
