//! Composes the library crates into running processes.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_nats::jetstream;
use switchboard_blob::local::LocalBlobs;
use switchboard_blob::s3::S3Blobs;
use switchboard_blob::token::Signer;
use switchboard_blob::{BlobError, BlobStore};
use switchboard_gateway::{
    BatchLimits, Gateway, GatewayConfig, GatewayParts, Hub, HubParts, Ingest, KeyDirectory,
    MediaStore, Presence, TenantDirectory, start_collector,
};
use switchboard_nats::definitions::{self, BackboneConfig, NODES_BUCKET};
use switchboard_nats::node_id::IdGenerator;
use switchboard_nats::node_id::IdSource;
use switchboard_nats::records::bans::TenantBans;
use switchboard_nats::records::push_tokens::PushTokens;
use switchboard_nats::records::refusals::Refusals;
use switchboard_nats::records::tenants::{OnChange, TenantBook, TenantRegistry};
use switchboard_nats::sessions::Sessions;
use switchboard_nats::{NatsConfig, connect};
use switchboard_plugin_host::deploy::Deployer;
use switchboard_plugin_host::deploy_service::PluginAdmin;
use switchboard_plugin_host::{PluginHost, Plugins};
use switchboard_store::archive::{ArchiveObjects, Tiered};
use switchboard_store::embedded::{EmbeddedConfig, EmbeddedStore};
use switchboard_store::{Store, StoreError};
use switchboard_store_remote::{self as store_service, RemoteStore};
use switchboard_store_scylla::ScyllaStore;
use switchboard_worker::WorkerConfig;
use tokio::sync::watch;

use crate::config::{BlobBackend, FileConfig, StoreKind};

/// How long a graceful shutdown may take before the process exits anyway
/// (it waits on NATS, which may be gone).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// A shutdown signal every component can wait on.
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// Resolves on SIGINT or SIGTERM; the returned value can be cloned.
    /// A second signal, or [`SHUTDOWN_GRACE`] without finishing, ends the
    /// process at once: everything acked is already durable.
    pub fn on_signals() -> Self {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("shutting down (a second Ctrl-C stops at once)");
            let _ = tx.send(true);
            tokio::select! {
                _ = wait_for_signal() => tracing::warn!("second signal: stopping now"),
                _ = tokio::time::sleep(SHUTDOWN_GRACE) => {
                    tracing::warn!(grace = ?SHUTDOWN_GRACE, "graceful shutdown is taking too long; stopping now");
                }
            }
            std::process::exit(130);
        });
        Self(rx)
    }

    pub async fn wait(mut self) {
        while !*self.0.borrow() {
            if self.0.changed().await.is_err() {
                return;
            }
        }
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Connects to NATS and makes sure every stream and bucket exists,
/// retrying while JetStream starts up.
pub async fn backbone(
    nats: &NatsConfig,
    config: &BackboneConfig,
) -> anyhow::Result<async_nats::Client> {
    let client = connect(nats).await?;
    define(&client, config).await?;
    Ok(client)
}

/// Makes sure every stream and bucket exists, retrying for 30 s while
/// JetStream starts up or elects leaders.
pub async fn define(client: &async_nats::Client, config: &BackboneConfig) -> anyhow::Result<()> {
    // A request to a stream electing a leader gets no answer at all: a
    // short timeout asks again soon after the election instead of waiting
    // out the default 5 s per request (a process restarted beside a lost
    // NATS node waited 10 s so).
    let js = jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(2))
        .build(client.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match definitions::ensure(&js, config).await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() < deadline => {
                tracing::info!(error = %e, "waiting for JetStream");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => return Err(e).context("setting up JetStream streams and buckets"),
        }
    }
}

/// How long a start-up step asks JetStream again: as long as [`define`]
/// waits for it.
const JETSTREAM_SETTLE: Duration = Duration::from_secs(30);

/// Runs `attempt` until it succeeds or [`JETSTREAM_SETTLE`] has passed:
/// after a NATS node is lost, a bucket's stream may still be electing its
/// leader when [`define`] has seen every stream exist, and one request
/// that found no leader must not end a process's start (a worker
/// restarted beside a lost node once exited so).
pub(crate) async fn settled<T, Fut>(
    what: &'static str,
    mut attempt: impl FnMut() -> Fut,
) -> anyhow::Result<T>
where
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let deadline = Instant::now() + JETSTREAM_SETTLE;
    loop {
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(e) if Instant::now() < deadline => {
                tracing::info!(error = format!("{e:#}"), what, "waiting for JetStream");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e.context(what)),
        }
    }
}

/// The process's view of `sb_tenants` (F21), following changes for as long
/// as the process runs: its one follower, shared by its worker, push
/// stage, plugin host and gateway. A gateway's token keys (`keys`) take
/// every change too, and the tenant-wide bans of `sb_tenant_bans`.
pub async fn tenants(
    client: &async_nats::Client,
    keys: Option<Arc<TenantDirectory>>,
) -> anyhow::Result<TenantBook> {
    let tenants = TenantBook::default();
    let js = jetstream::new(client.clone());
    let on_change: OnChange = match &keys {
        Some(keys) => {
            let keys = keys.clone();
            Arc::new(move |id, record| keys.apply_record(id, record))
        }
        None => Arc::new(|_, _| {}),
    };
    // The followers run as long as the process; their handles are not
    // needed.
    let _follower = settled("loading tenants", || async {
        Ok(tenants.follow(&js, on_change.clone()).await?)
    })
    .await?;
    if let Some(keys) = keys {
        settled("loading tenant bans", || async {
            Ok(TenantDirectory::follow_bans(&keys, &js).await?)
        })
        .await?;
    }
    Ok(tenants)
}

/// `switchboard dev`'s demo tenant as a record in `sb_tenants`, so that it
/// is a tenant like any other (its admins set webhooks; the operator API
/// and `switchboard tenant` see it), its HS256 secret the one dev tokens
/// are signed with. A record kept from an earlier run that lacks the
/// secret (`SWITCHBOARD_DEMO_SECRET` changed) has its HS256 secrets
/// replaced by it; anything else in it stays.
pub async fn demo_tenant_record(client: &async_nats::Client, secret: &str) -> anyhow::Result<()> {
    use switchboard_nats::records::tenants::{TenantError, TenantRecord};
    let registry = TenantRegistry::open(&jetstream::new(client.clone())).await?;
    let id = switchboard_protocol::TenantId::new(crate::config::DEMO_TENANT)?;
    let mut record = TenantRecord::new(id.clone());
    record.hs256_secrets = vec![secret.to_owned()];
    match registry.create(record).await {
        Ok(_) => Ok(()),
        Err(TenantError::Exists(_)) => {
            let kept = registry.get(&id).await?;
            if !kept.hs256_secrets.iter().any(|s| s == secret) {
                registry
                    .update(&id, |r| {
                        r.hs256_secrets = vec![secret.to_owned()];
                        Ok(())
                    })
                    .await?;
            }
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// The gateway's token keys: the configuration file's tenants, replaced
/// by their `sb_tenants` records as `tenants` follows them.
pub fn token_keys(config: &GatewayConfig) -> anyhow::Result<Arc<TenantDirectory>> {
    // Tokens are accepted as long past `exp` as sessions outlive it.
    let leeway = config.limits.token_expiry_grace_ms.div_ceil(1000);
    Ok(Arc::new(
        TenantDirectory::from_config(&config.tenants, leeway)?
            .with_max_lifetime(config.limits.max_token_lifetime_secs)
            .with_jwks(switchboard_gateway::auth::JwksSettings::from_limits(
                &config.limits,
            )),
    ))
}

/// What a gateway is made of beside its configuration and the process's
/// shared parts.
pub struct GatewayInputs {
    pub config: GatewayConfig,
    pub keys: Arc<TenantDirectory>,
    pub tenants: TenantBook,
    pub client: async_nats::Client,
    pub store: Arc<dyn Store>,
    pub ids: Arc<dyn IdSource>,
    pub plugins: Arc<Plugins>,
    pub media: MediaStore,
}

/// Builds a gateway's parts and starts what runs beside them: its
/// subscription to its own events, its place in the session registry and
/// presence, the hub, the ingest queues, the plugin admin, the key
/// directory, and the media collector.
pub async fn gateway_parts(inputs: GatewayInputs) -> anyhow::Result<Arc<Gateway>> {
    let GatewayInputs {
        config,
        keys,
        tenants,
        client,
        store,
        ids,
        plugins,
        media,
    } = inputs;
    let js = jetstream::context::ContextBuilder::new()
        .max_ack_inflight(config.jetstream_max_inflight.max(1))
        .build(client.clone());
    // This gateway's subject first: the registry may name it from the
    // first connection on.
    let deliveries = client
        .subscribe(switchboard_nats::subject::gateway_events(
            &config.gateway_id,
        ))
        .await
        .context("subscribing to this gateway's events")?;
    let registry = js
        .get_key_value(definitions::PRESENCE_BUCKET)
        .await
        .context("opening the session registry")?;
    let sessions = Sessions::start(
        client.clone(),
        registry,
        format!("gateway:{}", config.gateway_id),
        config.services,
    )
    .await?;
    let presence = Presence::start(
        &js,
        sessions.clone(),
        config.gateway_id.clone(),
        config.presence_ttl,
    )
    .await?;
    let hub = Hub::new(
        HubParts {
            client: client.clone(),
            deliveries,
            presence,
            sessions,
            sync_within: config.session_sync_timeout,
            coalesce_window: Duration::from_millis(config.limits.reaction_coalesce_ms),
        },
        store.clone(),
        config.fanout,
        plugins.clone(),
    );
    hub.follow_fan_out_changes();
    let deployer = PluginAdmin::open(&js, Deployer::open(&js, plugins.clone()).await?).await?;
    if let Some(local) = media.local.clone() {
        // Uploads a crash cut short leave `.part` files and claims;
        // a minute untouched is long past the body timeout.
        tokio::spawn(async move {
            match local.sweep_unfinished(Duration::from_secs(60)).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(files = n, "removed unfinished uploads"),
                Err(e) => tracing::warn!(error = %e, "sweeping unfinished uploads failed"),
            }
        });
    }
    let key_bucket = js
        .get_key_value(definitions::KEYS_BUCKET)
        .await
        .context("opening the key directory")?;
    let ingest = Ingest::start(
        &js,
        config.partitions,
        BatchLimits {
            sends: config.ingest_batch_max_sends.max(1),
            bytes: config.ingest_batch_max_bytes,
        },
    );
    // The tenants' JSON Web Key Sets, fetched as they fall due for as
    // long as the directory lives.
    tokio::spawn(TenantDirectory::follow_key_sets(Arc::downgrade(&keys)));
    let gateway = Gateway::new(GatewayParts {
        tenant_registry: TenantRegistry::open(&js).await?,
        tenant_bans: TenantBans::open(&js).await?,
        push_tokens: PushTokens::open(&js).await?,
        refusals: Refusals::open(&js).await?,
        keys: KeyDirectory::new(key_bucket),
        config,
        tenants: keys,
        book: tenants,
        store,
        client,
        js,
        ingest,
        hub,
        ids,
        plugins,
        deployer,
        media,
    })?;
    start_collector(&gateway);
    Ok(gateway)
}

/// Starts the plugin deploy service (`switchboard-plugins`): gateways
/// ask it to deploy, promote, roll back and remove tenants' plugins, which
/// they may not write themselves.
pub async fn plugin_deploys(
    client: &async_nats::Client,
    plugins: Arc<Plugins>,
    file: &FileConfig,
) -> anyhow::Result<()> {
    let js = jetstream::new(client.clone());
    let deployer = Arc::new(
        settled("opening the plugin buckets", || async {
            Ok(switchboard_plugin_host::deploy::Deployer::open(&js, plugins.clone()).await?)
        })
        .await?,
    );
    let limits = file.services.unwrap_or_default();
    tokio::spawn(async move {
        if let Err(e) = switchboard_plugin_host::deploy_service::serve(js, deployer, limits).await {
            tracing::error!(error = %e, "the plugin deploy service stopped");
        }
    });
    Ok(())
}

/// Starts the plugin host and installs every tenant's active plugins;
/// keeps following `sb_plugins` afterwards. One per process: `dev`'s
/// gateway and worker share it.
pub async fn plugins(
    client: &async_nats::Client,
    file: &FileConfig,
    tenants: &TenantBook,
    process: &str,
) -> anyhow::Result<Arc<Plugins>> {
    let limits = file.plugins.clone().unwrap_or_default();
    let host = PluginHost::new(limits).context("starting the plugin host")?;
    let js = jetstream::new(client.clone());
    // Tenants' plugin quotas lower their calls' limits (F21).
    host.follow_tenant_quotas(tenants.clone());
    let plugins = Plugins::new(host);
    // The followers run as long as the process; their handles are not
    // needed.
    let _follower = settled("loading tenant plugins", || async {
        Ok(plugins.follow(&js).await?)
    })
    .await?;
    // The admin API asks every process how it runs a hook (shadows).
    let _status = plugins
        .answer_status(client.clone(), process.to_owned())
        .await
        .context("answering plugin status requests")?;
    Ok(plugins)
}

pub async fn lease_ids(
    client: &async_nats::Client,
    owner: &str,
    config: &BackboneConfig,
) -> anyhow::Result<IdGenerator> {
    let js = jetstream::new(client.clone());
    let ttl = definitions::nodes_bucket(config)?.max_age;
    settled("leasing a node id", || async {
        let kv = js
            .get_key_value(NODES_BUCKET)
            .await
            .context("opening the node id bucket")?;
        Ok(IdGenerator::lease(kv, owner.to_owned(), ttl).await?)
    })
    .await
}

/// Opens the embedded store and serves it to other processes over NATS.
pub fn embedded_store(
    client: &async_nats::Client,
    data_dir: &Path,
    file: &FileConfig,
) -> anyhow::Result<Arc<dyn Store>> {
    let config = EmbeddedConfig::in_dir(&data_dir.join("store"));
    let embedded: Arc<dyn Store> = Arc::new(
        EmbeddedStore::open(&config)
            .with_context(|| format!("opening the store at {}", config.path.display()))?,
    );
    // Archived history is read back (and archiving done) here, where the
    // store is, with the blob store this process sees.
    let store: Arc<dyn Store> = Arc::new(Tiered::new(embedded, archive_objects(data_dir, file)?));
    let (client, served) = (client.clone(), store.clone());
    let limits = file.services.unwrap_or_default();
    tokio::spawn(async move {
        if let Err(e) = store_service::serve(client, served, limits).await {
            tracing::error!(error = %e, "the store service stopped");
        }
    });
    Ok(store)
}

pub async fn store(
    kind: StoreKind,
    client: &async_nats::Client,
    data_dir: &Path,
    file: &FileConfig,
) -> anyhow::Result<Arc<dyn Store>> {
    match kind {
        StoreKind::Embedded => embedded_store(client, data_dir, file),
        StoreKind::Nats => Ok(Arc::new(RemoteStore::new(
            client.clone(),
            file.store_request_timeout(),
        ))),
        StoreKind::Scylla => scylla_store(data_dir, file).await,
    }
}

/// Every process connects to Scylla itself; each reads (and, for the
/// writers, moves) archived history with its own view of the blob store,
/// which must then be S3 (or a directory every process shares).
async fn scylla_store(data_dir: &Path, file: &FileConfig) -> anyhow::Result<Arc<dyn Store>> {
    let config = scylla_config(file)?;
    let scylla: Arc<dyn Store> = Arc::new(
        ScyllaStore::connect(&config)
            .await
            .with_context(|| format!("connecting to Scylla at {:?}", config.nodes))?,
    );
    tracing::info!(nodes = ?config.nodes, keyspace = %config.keyspace, "store on Scylla");
    Ok(Arc::new(Tiered::new(
        scylla,
        archive_objects(data_dir, file)?,
    )))
}

/// The cluster of `[scylla]`, checked.
pub fn scylla_config(file: &FileConfig) -> anyhow::Result<switchboard_store_scylla::ScyllaConfig> {
    let mut config = file.scylla.clone().unwrap_or_default();
    if let Some(secs) = file.inbox_ttl_secs {
        config.inbox_ttl_secs = u32::try_from(secs).unwrap_or(u32::MAX);
    }
    config.validate().context("[scylla]")?;
    Ok(config)
}

pub fn worker_config(
    worker_id: String,
    backbone: &BackboneConfig,
    file: &FileConfig,
) -> anyhow::Result<WorkerConfig> {
    let mut config = WorkerConfig::new(worker_id, backbone.partitions);
    config.search_feed = file.search_enabled();
    config.link_previews = crate::previews_settings::enabled(file);
    config.content = file.limits.clone().unwrap_or_default().content;
    config.lease_ttl = definitions::workers_bucket(backbone)?.max_age;
    if let Some(b) = file.worker_max_batch {
        config.max_batch = b.max(1);
    }
    config.fanout = file.fanout();
    if let Some(secs) = file.edit_window_secs {
        config.edit_policy.edit_window = Duration::from_secs(secs);
    }
    if let Some(n) = file.unsolicited_groups_per_day {
        config.consent.unsolicited_groups_per_day = n;
    }
    if let Some(secs) = file.inbox_ttl_secs {
        config.inbox_ttl = Duration::from_secs(secs);
    }
    if let Some(secs) = file.inbox_sweep_secs {
        config.inbox_sweep_every = Duration::from_secs(secs.max(1));
    }
    if let Some(secs) = file.expiry_pass_secs {
        config.expiry_pass_every = Duration::from_secs(secs.max(1));
    }
    if let Some(secs) = file.tenant_retention_pass_secs {
        config.tenant_retention_pass_every = Duration::from_secs(secs.max(1));
    }
    if let Some(stream) = file.event_stream {
        config.event_stream = stream;
    }
    if let Some(archive) = &file.archive {
        if u64::from(archive.after_days) * 86_400 < config.inbox_ttl.as_secs() {
            tracing::warn!(
                after_days = archive.after_days,
                inbox_ttl_secs = config.inbox_ttl.as_secs(),
                "[archive] after_days is below the inbox lifetime: devices away that long catch up from history"
            );
        }
        config.archive = Some(switchboard_worker::ArchiveConfig {
            after_days: archive.after_days,
            every: Duration::from_secs(archive.every_secs.max(1)),
            max_per_scan: archive.max_per_scan.max(1),
        });
    }
    config.services = file.services.unwrap_or_default();
    Ok(config)
}

pub fn gateway_config(
    gateway_id: String,
    backbone: &BackboneConfig,
    file: &FileConfig,
) -> GatewayConfig {
    let mut config = GatewayConfig::new(gateway_id, file.tenants.clone());
    if let Some(limits) = &file.limits {
        config.limits = limits.clone();
    }
    config.partitions = backbone.partitions;
    config.operator_token = file.operator_token.clone();
    config.command_timeout = file.command_timeout();
    config.search_shards = file
        .search
        .as_ref()
        .and_then(|s| s.shards)
        .unwrap_or(1)
        .max(1);
    config.receipt_interval = file.receipt_interval();
    if let Some(ttl) = file.presence_ttl() {
        config.presence_ttl = ttl;
    }
    if let Some(ms) = file.session_sync_timeout_ms {
        config.session_sync_timeout = Duration::from_millis(ms.min(10_000));
    }
    config.fanout = file.fanout();
    if let Some(n) = file.jetstream_max_inflight {
        config.jetstream_max_inflight = n;
    }
    if let Some(n) = file.ingest_batch_max_sends {
        config.ingest_batch_max_sends = n.max(1);
    }
    if let Some(n) = file.ingest_batch_max_bytes {
        config.ingest_batch_max_bytes = n.min(512 * 1024);
    }
    if let Some(ms) = file.drain_timeout_ms {
        // Inside the shutdown grace, with room to withdraw presence.
        config.drain_timeout = Duration::from_millis(ms.min(15_000));
    }
    if let Some(media) = &file.media {
        config.media = media.clone();
    }
    config.services = file.services.unwrap_or_default();
    config.public_url = file.public_url.clone();
    config.allowed_hosts = file.allowed_hosts.clone();
    config
}

/// The blob store of `[blobs]` as the archive's object store (F14).
pub fn archive_objects(
    data_dir: &Path,
    file: &FileConfig,
) -> anyhow::Result<Arc<dyn ArchiveObjects>> {
    Ok(Arc::new(ArchiveBlobs(crate::blobs::blob_store(
        data_dir, file,
    )?)))
}

/// Archive objects kept in a [`BlobStore`].
struct ArchiveBlobs(Arc<dyn BlobStore>);

#[async_trait::async_trait]
impl ArchiveObjects for ArchiveBlobs {
    async fn put(&self, object: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.0
            .put_object(object, bytes)
            .await
            .map_err(|e| StoreError::Unavailable(format!("archive object {object}: {e}")))
    }

    async fn get(&self, object: &str) -> Result<Vec<u8>, StoreError> {
        self.0.get_object(object).await.map_err(|e| match e {
            BlobError::NotFound => StoreError::ArchiveUnreadable {
                object: object.to_owned(),
                reason: "the object is missing from the blob store".into(),
            },
            other => StoreError::Unavailable(format!("archive object {object}: {other}")),
        })
    }
}

/// Where media live: the S3 bucket of `[blobs]`, or the local directory
/// `<data_dir>/blobs` with URLs signed by `blob_url_secret` (or a secret
/// of this process's own).
pub fn media_store(data_dir: &Path, file: &FileConfig) -> anyhow::Result<MediaStore> {
    if let Some(blobs) = &file.blobs
        && blobs.backend == BlobBackend::S3
    {
        let s3 = blobs.s3()?;
        tracing::info!(bucket = %s3.bucket, endpoint = ?s3.endpoint, "media in S3");
        return Ok(MediaStore::remote(Arc::new(S3Blobs::new(&s3))));
    }
    Ok(MediaStore::local(LocalBlobs::new(
        data_dir.join("blobs"),
        blob_url_signer(file)?,
    )))
}

/// What signs local blob URLs: `blob_url_secret`, or a secret of this
/// process's own.
pub fn blob_url_signer(file: &FileConfig) -> anyhow::Result<Signer> {
    Ok(match &file.blob_url_secret {
        Some(secret) if secret.len() >= 16 => Signer::new(secret.as_bytes()),
        Some(_) => anyhow::bail!("blob_url_secret must be at least 16 bytes"),
        None => Signer::random()?,
    })
}

/// Serves a gateway on `listen` until `shutdown`. Prints the bound address
/// as `switchboard: listening on http://ADDR` (tests read this line).
pub async fn gateway(
    gateway: Arc<Gateway>,
    listen: SocketAddr,
    shutdown: Shutdown,
    on_listening: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let addr = listener.local_addr()?;
    println!("switchboard: listening on http://{addr}");
    on_listening(addr);
    let draining = gateway.clone();
    let stop_accepting = async move {
        shutdown.wait().await;
        tracing::info!("draining: closing connections once their sends are answered");
        draining.start_draining();
    };
    switchboard_gateway::serve(&gateway, listener, stop_accepting).await?;
    // Upgraded WebSockets outlive the HTTP server; they drain on their own.
    gateway.drained().await;
    gateway.shutdown().await;
    Ok(())
}
