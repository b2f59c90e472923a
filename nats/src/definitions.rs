//! The streams, consumers and buckets Switchboard needs, defined by the
//! JSON files in `nats/` (the same JSON `nats stream add --config` and
//! `nats consumer add --config` accept), created or updated at start-up.
//! The files are compiled in, so the binary and the operator guide can
//! never disagree.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use serde::Deserialize;

use crate::BackboneError;
use crate::subject::token;
use switchboard_protocol::TenantId;

pub const INGEST_STREAM_TEMPLATE_JSON: &str = include_str!("../streams/SB_INGEST.template.json");
pub const PUSH_STREAM_JSON: &str = include_str!("../streams/SB_PUSH.json");
pub const PUSH_DEAD_STREAM_JSON: &str = include_str!("../streams/SB_PUSH_DEAD.json");
pub const PARKED_STREAM_JSON: &str = include_str!("../streams/SB_PARKED.json");
pub const SCHEDULED_STREAM_JSON: &str = include_str!("../streams/SB_SCHEDULED.json");
pub const SCHEDULER_CONSUMER_JSON: &str = include_str!("../consumers/scheduler.json");
pub const EVENTS_STREAM_JSON: &str = include_str!("../streams/SB_EVENTS.json");
pub const EVENTS_DEAD_STREAM_JSON: &str = include_str!("../streams/SB_EVENTS_DEAD.json");
pub const WEBHOOKS_CONSUMER_TEMPLATE_JSON: &str =
    include_str!("../consumers/webhooks.template.json");
pub const INDEX_STREAM_JSON: &str = include_str!("../streams/SB_INDEX.json");
pub const AUDIT_STREAM_JSON: &str = include_str!("../streams/SB_AUDIT.json");
pub const AUDIT_EVENTS_CONSUMER_JSON: &str = include_str!("../consumers/audit-events.json");
pub const PUSH_MSG_CONSUMER_JSON: &str = include_str!("../consumers/push-msg.json");
pub const PUSH_SEND_CONSUMER_JSON: &str = include_str!("../consumers/push-send.json");
pub const PUSH_TOKENS_BUCKET_JSON: &str = include_str!("../kv/sb_push_tokens.json");
pub const PUSH_COLLAPSE_BUCKET_JSON: &str = include_str!("../kv/sb_push_collapse.json");
pub const REFUSED_BUCKET_JSON: &str = include_str!("../kv/sb_refused.json");
pub const WRITER_CONSUMER_TEMPLATE_JSON: &str = include_str!("../consumers/writer.template.json");
pub const NODES_BUCKET_JSON: &str = include_str!("../kv/sb_nodes.json");
pub const WORKERS_BUCKET_JSON: &str = include_str!("../kv/sb_workers.json");
pub const PRESENCE_BUCKET_JSON: &str = include_str!("../kv/sb_presence.json");
pub const LAST_SEEN_BUCKET_JSON: &str = include_str!("../kv/sb_last_seen.json");
pub const PLUGINS_BUCKET_JSON: &str = include_str!("../kv/sb_plugins.json");
pub const KEYS_BUCKET_JSON: &str = include_str!("../kv/sb_keys.json");
pub const TENANTS_BUCKET_JSON: &str = include_str!("../kv/sb_tenants.json");
pub const TENANT_BANS_BUCKET_JSON: &str = include_str!("../kv/sb_tenant_bans.json");
pub const ERASURES_BUCKET_JSON: &str = include_str!("../kv/sb_erasures.json");
pub const PREVIEWS_BUCKET_JSON: &str = include_str!("../kv/sb_previews.json");
pub const PREVIEWS_CONSUMER_JSON: &str = include_str!("../consumers/previews.json");
pub const PLUGIN_CODE_STORE_JSON: &str = include_str!("../objects/sb_plugin_code.json");
pub const PLUGIN_UPLOADS_STORE_JSON: &str = include_str!("../objects/sb_plugin_uploads.json");
pub const PLUGIN_COMPILED_STORE_JSON: &str = include_str!("../objects/sb_plugin_compiled.json");

/// The one ingest stream of releases before per-partition streams; see
/// [`retire_legacy_ingest`].
pub const LEGACY_INGEST_STREAM: &str = "SB_INGEST";
pub const PUSH_STREAM: &str = "SB_PUSH";
pub const PUSH_DEAD_STREAM: &str = "SB_PUSH_DEAD";
pub const PARKED_STREAM: &str = "SB_PARKED";
pub const SCHEDULED_STREAM: &str = "SB_SCHEDULED";
pub const EVENTS_STREAM: &str = "SB_EVENTS";
pub const EVENTS_DEAD_STREAM: &str = "SB_EVENTS_DEAD";
pub const INDEX_STREAM: &str = "SB_INDEX";
pub const AUDIT_STREAM: &str = "SB_AUDIT";
pub const PUSH_TOKENS_BUCKET: &str = "sb_push_tokens";
pub const PUSH_COLLAPSE_BUCKET: &str = "sb_push_collapse";
pub const REFUSED_BUCKET: &str = "sb_refused";
pub const NODES_BUCKET: &str = "sb_nodes";
pub const WORKERS_BUCKET: &str = "sb_workers";
pub const PRESENCE_BUCKET: &str = "sb_presence";
pub const LAST_SEEN_BUCKET: &str = "sb_last_seen";
pub const PLUGINS_BUCKET: &str = "sb_plugins";
pub const KEYS_BUCKET: &str = "sb_keys";
pub const TENANTS_BUCKET: &str = "sb_tenants";
pub const TENANT_BANS_BUCKET: &str = "sb_tenant_bans";
pub const ERASURES_BUCKET: &str = "sb_erasures";
pub const PREVIEWS_BUCKET: &str = "sb_previews";
pub const PLUGIN_CODE_STORE: &str = "sb_plugin_code";
pub const PLUGIN_UPLOADS_STORE: &str = "sb_plugin_uploads";
pub const PLUGIN_COMPILED_STORE: &str = "sb_plugin_compiled";

/// Settings an operator may change without editing the JSON.
#[derive(Debug, Clone)]
pub struct BackboneConfig {
    /// Replicas of every stream and bucket: 1 on one server, 3 in a cluster.
    pub replicas: usize,
    /// Number of ingest partitions. Fixed for the life of a deployment:
    /// changing it moves conversations to other writers.
    pub partitions: u16,
    /// Overrides the ingest stream's `duplicate_window` (tests shorten it).
    pub duplicate_window: Option<Duration>,
    /// Overrides the `sb_presence` bucket's TTL.
    pub presence_ttl: Option<Duration>,
    /// Whether this process creates and updates the streams and buckets
    /// (`ensure`), or only checks that they exist: a process whose NATS
    /// user may not manage JetStream (a gateway of the secured setup in
    /// `nats/server/secure/`) only checks.
    pub define: bool,
}

impl Default for BackboneConfig {
    fn default() -> Self {
        Self {
            replicas: 1,
            partitions: 16,
            duplicate_window: None,
            presence_ttl: None,
            define: true,
        }
    }
}

/// The shape of the bucket files: the settings of `nats kv add`.
#[derive(Debug, Deserialize)]
struct BucketFile {
    bucket: String,
    description: String,
    history: i64,
    /// Nanoseconds, like every duration in JetStream JSON.
    max_age: u64,
    storage: stream::StorageType,
    num_replicas: usize,
    /// Nanoseconds to keep the marker of a key that expired (markers let
    /// watchers see expiries); absent for buckets that need none.
    #[serde(default)]
    limit_markers: Option<u64>,
    /// Bytes the bucket holds at most (a cache's bound); absent (0): no
    /// bound.
    #[serde(default)]
    max_bytes: i64,
    /// The largest value; absent (0): the server's.
    #[serde(default)]
    max_value_size: i32,
    /// Whether the bucket's stream takes `Nats-Rollup` headers (`nats kv
    /// add` turns them on; `nats stream edit KV_<bucket> --no-allow-rollup`
    /// turns them off). Off for the buckets gateways write: a rollup of
    /// the whole stream is a purge that no subject permission can stop.
    #[serde(default = "rollups_allowed")]
    allow_rollup_hdrs: bool,
}

fn rollups_allowed() -> bool {
    true
}

fn parse<T: serde::de::DeserializeOwned>(name: &str, json: &str) -> Result<T, BackboneError> {
    serde_json::from_str(json).map_err(|e| BackboneError::Definition {
        name: name.to_owned(),
        source: crate::cause(e),
    })
}

/// The ingest stream of one partition, `SB_INGEST_<p>`.
///
/// One stream per partition, not one for all: a stream is a Raft group
/// with one leader, and when the NATS node that leads it dies, the stream
/// takes no command until its followers elect a new leader (4 to 9 s).
/// With a stream per partition the leaders spread over the nodes, and
/// losing one node stalls only the partitions it led.
pub fn ingest_stream(
    config: &BackboneConfig,
    partition: u16,
) -> Result<stream::Config, BackboneError> {
    let json = INGEST_STREAM_TEMPLATE_JSON.replace("{partition}", &partition.to_string());
    let mut s: stream::Config = parse("SB_INGEST.template.json", &json)?;
    s.num_replicas = config.replicas;
    if let Some(window) = config.duplicate_window {
        s.duplicate_window = window;
    }
    Ok(s)
}

pub fn ingest_stream_name(partition: u16) -> String {
    format!("SB_INGEST_{partition}")
}

/// Deletes the single `SB_INGEST` stream of earlier releases, whose
/// subjects overlap the per-partition streams, once it is empty. While it
/// still holds commands, start-up stops with the way out: let the previous
/// release's workers drain it first (`nats stream info SB_INGEST`).
async fn retire_legacy_ingest(js: &jetstream::Context) -> Result<(), BackboneError> {
    retire_when_empty(js, LEGACY_INGEST_STREAM, |_| true).await
}

/// Deletes an ingest stream of an earlier release that was a work queue,
/// once it is empty, so that `ensure` creates it again with limits
/// retention (NATS cannot change a stream's retention to or from work
/// queue). While it holds commands, start-up stops with the same way out.
async fn retire_work_queue(js: &jetstream::Context, name: &str) -> Result<(), BackboneError> {
    retire_when_empty(js, name, |config| {
        config.retention == stream::RetentionPolicy::WorkQueue
    })
    .await
}

/// Deletes the stream `name`, if it exists and `retired` says so of its
/// configuration, once it holds no message; fails naming it while it does.
async fn retire_when_empty(
    js: &jetstream::Context,
    name: &str,
    retired: impl Fn(&stream::Config) -> bool,
) -> Result<(), BackboneError> {
    let Ok(mut existing) = js.get_stream(name).await else {
        return Ok(());
    };
    let info = existing
        .info()
        .await
        .map_err(|e| BackboneError::nats(format!("stream {name}"), e))?;
    if !retired(&info.config) {
        return Ok(());
    }
    if info.state.messages > 0 {
        return Err(BackboneError::LegacyStreamNotEmpty {
            stream: name.to_owned(),
            messages: info.state.messages,
        });
    }
    js.delete_stream(name)
        .await
        .map_err(|e| BackboneError::nats(format!("deleting {name}"), e))?;
    tracing::info!("deleted the empty stream {name} of an earlier release");
    Ok(())
}

fn replicated(
    name: &str,
    json: &str,
    config: &BackboneConfig,
) -> Result<stream::Config, BackboneError> {
    let mut s: stream::Config = parse(name, json)?;
    s.num_replicas = config.replicas;
    Ok(s)
}

pub fn push_stream(config: &BackboneConfig) -> Result<stream::Config, BackboneError> {
    replicated("SB_PUSH.json", PUSH_STREAM_JSON, config)
}

pub fn push_dead_stream(config: &BackboneConfig) -> Result<stream::Config, BackboneError> {
    replicated("SB_PUSH_DEAD.json", PUSH_DEAD_STREAM_JSON, config)
}

/// Commands a writer set aside (`worker/src/writer/park.rs`).
pub fn parked_stream(config: &BackboneConfig) -> Result<stream::Config, BackboneError> {
    replicated("SB_PARKED.json", PARKED_STREAM_JSON, config)
}

/// Scheduled messages (`scheduled.rs`).
pub fn scheduled_stream(config: &BackboneConfig) -> Result<stream::Config, BackboneError> {
    replicated("SB_SCHEDULED.json", SCHEDULED_STREAM_JSON, config)
}

/// The workers' consumer of scheduled messages that came due.
pub fn scheduler_consumer() -> Result<consumer::pull::Config, BackboneError> {
    parse("scheduler.json", SCHEDULER_CONSUMER_JSON)
}

/// Outbound events (v1.2, `events.rs`) and their dead letters.
pub fn events_stream(config: &BackboneConfig) -> Result<stream::Config, BackboneError> {
    replicated("SB_EVENTS.json", EVENTS_STREAM_JSON, config)
}

pub fn events_dead_stream(config: &BackboneConfig) -> Result<stream::Config, BackboneError> {
    replicated("SB_EVENTS_DEAD.json", EVENTS_DEAD_STREAM_JSON, config)
}

/// The search index feed (v1.2, `search.rs`).
pub fn index_stream(config: &BackboneConfig) -> Result<stream::Config, BackboneError> {
    replicated("SB_INDEX.json", INDEX_STREAM_JSON, config)
}

/// Tenants' moderation audit logs (v1.3, `audit.rs`).
pub fn audit_stream(config: &BackboneConfig) -> Result<stream::Config, BackboneError> {
    replicated("SB_AUDIT.json", AUDIT_STREAM_JSON, config)
}

/// The workers' relay of audit entries to webhook events.
pub fn audit_events_consumer() -> Result<consumer::pull::Config, BackboneError> {
    parse("audit-events.json", AUDIT_EVENTS_CONSUMER_JSON)
}

/// The webhook dispatcher's consumer of one tenant's events.
pub fn webhooks_consumer(tenant: &TenantId) -> Result<consumer::pull::Config, BackboneError> {
    let json = WEBHOOKS_CONSUMER_TEMPLATE_JSON.replace("{tenant}", &token(tenant.as_str()));
    pull_consumer("webhooks.template.json", &json)
}

/// The name of [`webhooks_consumer`]: `webhooks_<tenant>`.
pub fn webhooks_consumer_name(tenant: &TenantId) -> String {
    format!("{WEBHOOKS_CONSUMER_PREFIX}{}", token(tenant.as_str()))
}

/// Whose tenant's consumer `name` is, if it is one of the dispatcher's.
pub fn webhooks_consumer_tenant(name: &str) -> Option<TenantId> {
    let tenant = name.strip_prefix(WEBHOOKS_CONSUMER_PREFIX)?;
    TenantId::new(tenant.replace("%2E", ".")).ok()
}

pub const WEBHOOKS_CONSUMER_PREFIX: &str = "webhooks_";
/// The one consumer of every tenant's events of older releases: the
/// dispatcher starts the tenants' consumers where it stood, then deletes it.
pub const LEGACY_WEBHOOKS_CONSUMER: &str = "webhooks";

/// The push stage's consumers: `push-msg` (delivery checks) and
/// `push-send` (provider calls).
pub fn push_consumers() -> Result<[consumer::pull::Config; 2], BackboneError> {
    Ok([
        parse("push-msg.json", PUSH_MSG_CONSUMER_JSON)?,
        parse("push-send.json", PUSH_SEND_CONSUMER_JSON)?,
    ])
}

/// The link previews stage's consumer (v1.3), on `SB_PUSH`.
pub fn previews_consumer() -> Result<consumer::pull::Config, BackboneError> {
    parse("previews.json", PREVIEWS_CONSUMER_JSON)
}

pub fn previews_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_previews.json", PREVIEWS_BUCKET_JSON, config)
}

pub fn push_tokens_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_push_tokens.json", PUSH_TOKENS_BUCKET_JSON, config)
}

pub fn push_collapse_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_push_collapse.json", PUSH_COLLAPSE_BUCKET_JSON, config)
}

pub fn refused_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_refused.json", REFUSED_BUCKET_JSON, config)
}

/// Whether the bucket file `json` lets the bucket's stream take rollups.
fn takes_rollups(name: &str, json: &str) -> Result<bool, BackboneError> {
    Ok(parse::<BucketFile>(name, json)?.allow_rollup_hdrs)
}

/// The stream behind the bucket `b`, as `nats kv add` makes it (one
/// subject per key, direct gets, deletes only by marker), with rollups
/// as its file says. `ensure` creates the stream itself rather than
/// through the client's `create_or_update_key_value`, which would turn
/// rollups back on at every start.
fn bucket_stream(b: &kv::Config, rollups: bool) -> stream::Config {
    stream::Config {
        name: format!("KV_{}", b.bucket),
        description: Some(b.description.clone()),
        subjects: vec![format!("$KV.{}.>", b.bucket)],
        max_messages_per_subject: b.history.max(1),
        max_bytes: b.max_bytes,
        max_age: b.max_age,
        max_message_size: b.max_value_size,
        storage: b.storage,
        allow_rollup: rollups,
        deny_delete: true,
        deny_purge: false,
        allow_direct: true,
        num_replicas: b.num_replicas.max(1),
        discard: stream::DiscardPolicy::New,
        allow_message_ttl: b.limit_markers.is_some(),
        subject_delete_marker_ttl: b.limit_markers,
        ..Default::default()
    }
}

pub fn writer_consumer(partition: u16) -> Result<consumer::pull::Config, BackboneError> {
    let json = WRITER_CONSUMER_TEMPLATE_JSON.replace("{partition}", &partition.to_string());
    pull_consumer("writer.template.json", &json)
}

/// A pull consumer from the JSON `nats consumer add --config` takes
/// (whose names, such as `mem_storage`, are the server's).
fn pull_consumer(name: &str, json: &str) -> Result<consumer::pull::Config, BackboneError> {
    use consumer::FromConsumer;
    let config: consumer::Config = parse(name, json)?;
    consumer::pull::Config::try_from_consumer_config(config).map_err(|e| {
        BackboneError::Definition {
            name: name.to_owned(),
            source: crate::cause(e),
        }
    })
}

pub fn writer_consumer_name(partition: u16) -> String {
    format!("writer-p{partition}")
}

/// Up to which stream sequence the writer consumer of `partition` acked,
/// on its ingest stream `stream`: every command up to it is handled.
/// `None` when the partition has no writer consumer.
pub async fn writer_acked_floor(
    stream: &jetstream::stream::Stream,
    partition: u16,
) -> Result<Option<u64>, jetstream::context::ConsumerInfoError> {
    match stream.consumer_info(writer_consumer_name(partition)).await {
        Ok(info) => Ok(Some(info.ack_floor.stream_sequence)),
        Err(e) if e.kind() == jetstream::context::ConsumerInfoErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn bucket(name: &str, json: &str, config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    let f: BucketFile = parse(name, json)?;
    Ok(kv::Config {
        bucket: f.bucket,
        description: f.description,
        history: f.history,
        max_age: Duration::from_nanos(f.max_age),
        storage: f.storage,
        num_replicas: config.replicas.max(f.num_replicas),
        limit_markers: f.limit_markers.map(Duration::from_nanos),
        max_bytes: f.max_bytes,
        max_value_size: f.max_value_size,
        ..Default::default()
    })
}

pub fn nodes_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_nodes.json", NODES_BUCKET_JSON, config)
}

pub fn workers_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_workers.json", WORKERS_BUCKET_JSON, config)
}

pub fn presence_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    let mut b = bucket("sb_presence.json", PRESENCE_BUCKET_JSON, config)?;
    if let Some(ttl) = config.presence_ttl {
        b.max_age = ttl;
    }
    Ok(b)
}

pub fn last_seen_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_last_seen.json", LAST_SEEN_BUCKET_JSON, config)
}

pub fn plugins_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_plugins.json", PLUGINS_BUCKET_JSON, config)
}

pub fn keys_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_keys.json", KEYS_BUCKET_JSON, config)
}

/// Erasure jobs (v1.2, `records::erasures`).
pub fn erasures_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_erasures.json", ERASURES_BUCKET_JSON, config)
}

pub fn tenants_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_tenants.json", TENANTS_BUCKET_JSON, config)
}

/// Tenant-wide bans (v1.3, `records::bans`).
pub fn tenant_bans_bucket(config: &BackboneConfig) -> Result<kv::Config, BackboneError> {
    bucket("sb_tenant_bans.json", TENANT_BANS_BUCKET_JSON, config)
}

/// The shape of the object store files: the settings of `nats object add`.
#[derive(Debug, Deserialize)]
struct ObjectStoreFile {
    bucket: String,
    description: String,
    storage: stream::StorageType,
    num_replicas: usize,
    max_bytes: i64,
    /// In nanoseconds, as the NATS CLI writes it; 0 keeps objects.
    #[serde(default)]
    max_age: u64,
    /// S2 compression of the stream (`nats object add --compression`).
    #[serde(default)]
    compression: bool,
}

fn object_store(
    config: &BackboneConfig,
    name: &str,
    json: &str,
) -> Result<object_store::Config, BackboneError> {
    let f: ObjectStoreFile = parse(name, json)?;
    Ok(object_store::Config {
        bucket: f.bucket,
        description: Some(f.description),
        storage: f.storage,
        num_replicas: config.replicas.max(f.num_replicas),
        max_bytes: f.max_bytes,
        max_age: Duration::from_nanos(f.max_age),
        compression: f.compression,
        ..Default::default()
    })
}

pub fn plugin_code_store(config: &BackboneConfig) -> Result<object_store::Config, BackboneError> {
    object_store(config, "sb_plugin_code.json", PLUGIN_CODE_STORE_JSON)
}

/// Components uploaded to a gateway, waiting for a worker to deploy them.
pub fn plugin_uploads_store(
    config: &BackboneConfig,
) -> Result<object_store::Config, BackboneError> {
    object_store(config, "sb_plugin_uploads.json", PLUGIN_UPLOADS_STORE_JSON)
}

/// Components compiled to machine code, shared so that each is compiled
/// once.
pub fn plugin_compiled_store(
    config: &BackboneConfig,
) -> Result<object_store::Config, BackboneError> {
    object_store(
        config,
        "sb_plugin_compiled.json",
        PLUGIN_COMPILED_STORE_JSON,
    )
}

/// Checks that every stream and bucket exists, for a process that may not
/// define them; the error names the first one missing.
async fn check_defined(
    js: &jetstream::Context,
    config: &BackboneConfig,
) -> Result<(), BackboneError> {
    let missing =
        |what: String, e: Box<dyn std::error::Error + Send + Sync>| BackboneError::NotDefined {
            what,
            source: crate::cause(e),
        };
    for p in 0..config.partitions.max(1) {
        let name = ingest_stream_name(p);
        js.get_stream(&name)
            .await
            .map_err(|e| missing(format!("stream {name}"), e.into()))?;
    }
    for name in [
        PUSH_STREAM,
        PUSH_DEAD_STREAM,
        PARKED_STREAM,
        SCHEDULED_STREAM,
        EVENTS_STREAM,
        EVENTS_DEAD_STREAM,
        INDEX_STREAM,
        AUDIT_STREAM,
    ] {
        js.get_stream(name)
            .await
            .map_err(|e| missing(format!("stream {name}"), e.into()))?;
    }
    for name in [
        NODES_BUCKET,
        WORKERS_BUCKET,
        PRESENCE_BUCKET,
        LAST_SEEN_BUCKET,
        PLUGINS_BUCKET,
        KEYS_BUCKET,
        TENANTS_BUCKET,
        TENANT_BANS_BUCKET,
        PUSH_TOKENS_BUCKET,
        PUSH_COLLAPSE_BUCKET,
        REFUSED_BUCKET,
        ERASURES_BUCKET,
        PREVIEWS_BUCKET,
    ] {
        js.get_key_value(name)
            .await
            .map_err(|e| missing(format!("bucket {name}"), e.into()))?;
    }
    // Not `sb_plugin_compiled`: a cache, which a process goes without
    // (compiling instead) until a worker has defined it.
    for name in [PLUGIN_CODE_STORE, PLUGIN_UPLOADS_STORE] {
        js.get_object_store(name)
            .await
            .map_err(|e| missing(format!("object store {name}"), e.into()))?;
    }
    Ok(())
}

/// Creates or updates every stream and bucket. Safe to run from every
/// process at every start: the definitions are the same everywhere.
pub async fn ensure(js: &jetstream::Context, config: &BackboneConfig) -> Result<(), BackboneError> {
    if !config.define {
        return check_defined(js, config).await;
    }
    retire_legacy_ingest(js).await?;
    for p in 0..config.partitions.max(1) {
        retire_work_queue(js, &ingest_stream_name(p)).await?;
    }
    let mut streams = (0..config.partitions.max(1))
        .map(|p| ingest_stream(config, p))
        .collect::<Result<Vec<_>, _>>()?;
    streams.extend([
        push_stream(config)?,
        push_dead_stream(config)?,
        parked_stream(config)?,
        scheduled_stream(config)?,
        events_stream(config)?,
        events_dead_stream(config)?,
        index_stream(config)?,
        audit_stream(config)?,
    ]);
    for s in streams {
        let name = s.name.clone();
        js.create_or_update_stream(s)
            .await
            .map_err(|e| BackboneError::nats(format!("stream {name}"), e))?;
    }
    let buckets = [
        (nodes_bucket(config)?, NODES_BUCKET_JSON),
        (workers_bucket(config)?, WORKERS_BUCKET_JSON),
        (presence_bucket(config)?, PRESENCE_BUCKET_JSON),
        (last_seen_bucket(config)?, LAST_SEEN_BUCKET_JSON),
        (plugins_bucket(config)?, PLUGINS_BUCKET_JSON),
        (keys_bucket(config)?, KEYS_BUCKET_JSON),
        (tenants_bucket(config)?, TENANTS_BUCKET_JSON),
        (tenant_bans_bucket(config)?, TENANT_BANS_BUCKET_JSON),
        (push_tokens_bucket(config)?, PUSH_TOKENS_BUCKET_JSON),
        (push_collapse_bucket(config)?, PUSH_COLLAPSE_BUCKET_JSON),
        (refused_bucket(config)?, REFUSED_BUCKET_JSON),
        (erasures_bucket(config)?, ERASURES_BUCKET_JSON),
        (previews_bucket(config)?, PREVIEWS_BUCKET_JSON),
    ];
    for (b, json) in buckets {
        let name = b.bucket.clone();
        let stream = bucket_stream(&b, takes_rollups(&name, json)?);
        js.create_or_update_stream(stream)
            .await
            .map_err(|e| BackboneError::nats(format!("bucket {name}"), e))?;
    }
    // An object store's settings are fixed at creation; creating it again
    // is a no-op when it exists.
    for store in [plugin_code_store(config)?, plugin_uploads_store(config)?] {
        if js.get_object_store(&store.bucket).await.is_err() {
            let name = store.bucket.clone();
            js.create_object_store(store)
                .await
                .map_err(|e| BackboneError::nats(format!("object store {name}"), e))?;
        }
    }
    // A cache: a server that cannot hold it (its `max_file_store` taken by
    // the streams) runs without it, every process compiling instead.
    let compiled = plugin_compiled_store(config)?;
    if js.get_object_store(&compiled.bucket).await.is_err() {
        let name = compiled.bucket.clone();
        if let Err(e) = js.create_object_store(compiled).await {
            tracing::warn!(error = %e, "object store {name} not created: plugins are compiled by every process; see nats/README.md");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_definition_parses() {
        let c = BackboneConfig::default();
        let s = ingest_stream(&c, 7).unwrap();
        assert_eq!(s.name, ingest_stream_name(7));
        assert_eq!(s.subjects, ["sb.in.7.>"]);
        assert_eq!(s.retention, stream::RetentionPolicy::Limits);
        assert_eq!(s.storage, stream::StorageType::File);
        assert_eq!(s.duplicate_window, Duration::from_secs(120));
        let w = writer_consumer(7).unwrap();
        assert_eq!(w.durable_name.as_deref(), Some("writer-p7"));
        assert_eq!(w.filter_subject, "sb.in.7.>");
        assert_eq!(w.ack_policy, consumer::AckPolicy::All);
        assert!(w.memory_storage);
        let acme = TenantId::new("acme.eu").unwrap();
        let hooks = webhooks_consumer(&acme).unwrap();
        assert_eq!(hooks.durable_name.as_deref(), Some("webhooks_acme%2Eeu"));
        assert_eq!(
            hooks.filter_subjects,
            ["sb.events.acme%2Eeu", "sb.events.acme%2Eeu.>"]
        );
        assert_eq!(webhooks_consumer_name(&acme), "webhooks_acme%2Eeu");
        assert_eq!(webhooks_consumer_tenant("webhooks_acme%2Eeu"), Some(acme));
        assert_eq!(webhooks_consumer_tenant(LEGACY_WEBHOOKS_CONSUMER), None);
        let events = events_stream(&c).unwrap();
        assert_eq!(events.discard, stream::DiscardPolicy::New);
        assert!(events.max_messages_per_subject > 0, "bounded per tenant");
        assert_eq!(nodes_bucket(&c).unwrap().max_age, Duration::from_secs(30));
        let scheduled = scheduled_stream(&c).unwrap();
        assert!(scheduled.allow_message_schedules);
        assert!(
            scheduled.max_age > Duration::from_secs(31 * 24 * 3600),
            "a schedule 30 days ahead must outlive its wait"
        );
        assert_eq!(
            scheduler_consumer().unwrap().filter_subject,
            crate::scheduled::DUE_FILTER
        );
        let workers = workers_bucket(&c).unwrap();
        assert_eq!(workers.history, 1);
        assert!(
            workers.max_age * 4 / 5 - workers.max_age / 10 >= Duration::from_secs(10),
            "partition leases must outlast a NATS leader election (lease.rs)"
        );
        let presence = presence_bucket(&c).unwrap();
        assert_eq!(presence.max_age, Duration::from_secs(30));
        assert!(presence.limit_markers.is_some(), "expiries must be visible");
        assert_eq!(last_seen_bucket(&c).unwrap().max_age, Duration::ZERO);
        assert_eq!(plugins_bucket(&c).unwrap().history, 64);
        assert_eq!(keys_bucket(&c).unwrap().bucket, KEYS_BUCKET);
        assert_eq!(tenants_bucket(&c).unwrap().history, 16);
        // The buckets gateways write take no rollup (a purge by header);
        // the rest keep `nats kv add`'s default.
        for (name, json, rollups) in [
            ("sb_keys", KEYS_BUCKET_JSON, false),
            ("sb_presence", PRESENCE_BUCKET_JSON, false),
            ("sb_nodes", NODES_BUCKET_JSON, false),
            ("sb_push_tokens", PUSH_TOKENS_BUCKET_JSON, false),
            ("sb_tenant_bans", TENANT_BANS_BUCKET_JSON, false),
            ("sb_tenants", TENANTS_BUCKET_JSON, true),
            ("sb_plugins", PLUGINS_BUCKET_JSON, true),
        ] {
            assert_eq!(takes_rollups(name, json).unwrap(), rollups, "{name}");
        }
        let keys = bucket_stream(&keys_bucket(&c).unwrap(), false);
        assert_eq!(keys.name, "KV_sb_keys");
        assert_eq!(keys.subjects, ["$KV.sb_keys.>"]);
        assert!(!keys.allow_rollup && keys.deny_delete && keys.allow_direct);
        let presence = bucket_stream(&presence_bucket(&c).unwrap(), false);
        assert!(presence.allow_message_ttl);
        assert_eq!(
            presence.subject_delete_marker_ttl,
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            push_stream(&c).unwrap().retention,
            stream::RetentionPolicy::WorkQueue
        );
        assert_eq!(
            push_dead_stream(&c).unwrap().max_age,
            Duration::from_secs(14 * 86_400)
        );
        let audit = audit_stream(&c).unwrap();
        assert_eq!(audit.subjects, ["sb.audit.>"]);
        assert!(audit.max_messages_per_subject > 0, "bounded per tenant");
        assert_eq!(audit.discard, stream::DiscardPolicy::Old);
        assert_eq!(
            audit_events_consumer().unwrap().filter_subject,
            "sb.audit.>"
        );
        let [msg, send] = push_consumers().unwrap();
        assert_eq!(msg.filter_subject, "sb.push.msg.>");
        assert_eq!(send.filter_subject, "sb.push.send.>");
        assert_eq!(
            previews_consumer().unwrap().filter_subject,
            "sb.push.preview.>"
        );
        let previews = previews_bucket(&c).unwrap();
        assert_eq!(previews.max_age, Duration::from_secs(86_400));
        assert!(previews.max_bytes > 0, "a cache: it is bounded");
        assert_eq!(
            push_collapse_bucket(&c).unwrap().max_age,
            Duration::from_secs(3600)
        );
        assert_eq!(push_tokens_bucket(&c).unwrap().bucket, PUSH_TOKENS_BUCKET);
        assert_eq!(plugin_code_store(&c).unwrap().bucket, PLUGIN_CODE_STORE);
        let uploads = plugin_uploads_store(&c).unwrap();
        assert_eq!(uploads.bucket, PLUGIN_UPLOADS_STORE);
        assert_eq!(uploads.max_age, Duration::from_secs(900));
        assert!(uploads.max_bytes > 0, "gateways write here: it is bounded");
        let compiled = plugin_compiled_store(&c).unwrap();
        assert_eq!(compiled.bucket, PLUGIN_COMPILED_STORE);
        assert!(compiled.max_bytes > 0, "a cache: it is bounded");
        assert_eq!(compiled.max_age, Duration::from_secs(30 * 86_400));
        assert!(compiled.compression);
    }

    #[test]
    fn the_shipped_example_consumer_is_the_template_for_partition_zero() {
        let shipped = pull_consumer(
            "writer-p0.json",
            include_str!("../consumers/writer-p0.json"),
        )
        .unwrap();
        assert_eq!(shipped, writer_consumer(0).unwrap());
    }
}
