//! Outbound webhooks (v1.2): the events writers store on `SB_EVENTS`
//! (`switchboard_nats::events`) POSTed to each tenant's endpoints.
//!
//! One worker at a time dispatches: the holder of the `webhooks` lease in
//! `sb_workers`. It keeps one consumer per tenant with webhooks
//! (`webhooks_<tenant>`, created when the tenant gets its first webhook,
//! deleted when it has none) and one reader per consumer (`reader.rs`),
//! which gives each conversation a lane (`lane.rs`) that delivers its
//! events in order, retrying one with a growing delay (1 s, 2 s ... up to
//! a minute) for `max_attempts`, then keeping it in `SB_EVENTS_DEAD`,
//! before the next.
//!
//! Tenants share nothing they could exhaust for each other: each has its
//! own events in progress (its consumer's `max_ack_pending`), its own
//! calls at once (within a bound of all), its own bound on `SB_EVENTS`
//! and the dead letters (per-subject limits), and an endpoint failing
//! most of its calls is given up on for a while (`breaker.rs`). Memory is
//! bounded by the tenants with webhooks times their events in progress.
//! A dispatcher that loses its lease stops; the next holder gets every
//! event not acked, once its ack wait passes.
//!
//! Calls go through `switchboard_outbound`'s clients, as the push
//! providers' do: no private target unless the operator allows it, every
//! answer read within a bound. (A "hook" elsewhere is a plugin's:
//! moderation, edit policy, fan-out.)

mod breaker;
mod call;
mod counters;
mod lane;
mod reader;
mod shared;

pub use breaker::TripRule;
pub use call::signature_header;
pub use counters::{WEBHOOK_DELIVERIES, WEBHOOK_HELD, WEBHOOK_LAG, describe_metrics};

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{DeliverPolicy, PullConsumer};
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use async_nats::jetstream::{self, stream::Stream};
use bytes::Bytes;
use futures::TryStreamExt;
use switchboard_nats::definitions::{
    EVENTS_STREAM, LEGACY_WEBHOOKS_CONSUMER, WORKERS_BUCKET, webhooks_consumer,
    webhooks_consumer_name, webhooks_consumer_tenant,
};
use switchboard_nats::lease::Lease;
use switchboard_nats::records::tenants::TenantBook;
use switchboard_protocol::TenantId;
use tokio::task::JoinHandle;

use shared::Shared;
pub use shared::WebhooksConfig;
use switchboard_outbound::Clients;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How often the dispatcher compares its readers with the tenants that
/// have webhooks (and restarts a reader that stopped).
const RECONCILE: Duration = Duration::from_secs(2);
/// How far back a new tenant consumer starts: the tenant's writers may
/// have seen its first webhook, and stored events, a moment before the
/// dispatcher did.
const NEW_CONSUMER_LOOKBACK: Duration = Duration::from_secs(60);

/// Starts this process's dispatcher: it dispatches while the process
/// holds the `webhooks` lease and waits for it otherwise, until the task
/// is aborted. Fails only if the HTTP clients cannot be built (a CA file
/// that does not parse).
pub fn start(
    js: jetstream::Context,
    tenants: TenantBook,
    config: WebhooksConfig,
) -> Result<JoinHandle<()>, reqwest::Error> {
    let clients = Clients::new(&config.calls, "switchboard-webhooks")?;
    let holder = format!("webhooks:{}:{}", std::process::id(), random_hex());
    Ok(tokio::spawn(run(js, tenants, clients, config, holder)))
}

/// 16 random hex digits: a process's lease value names it alone.
fn random_hex() -> String {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 8];
    let _ = ring::rand::SystemRandom::new().fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Dispatches while this process holds the `webhooks` lease, and waits
/// for it otherwise; runs until aborted. `holder` names this process
/// uniquely.
async fn run(
    js: jetstream::Context,
    tenants: TenantBook,
    clients: Clients,
    config: WebhooksConfig,
    holder: String,
) {
    let shared = Arc::new(Shared::new(js, tenants, clients, config));
    loop {
        if let Err(e) = hold_and_dispatch(&shared, &holder).await {
            tracing::warn!(error = %e, "the webhook dispatcher stopped; starting again");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn hold_and_dispatch(shared: &Arc<Shared>, holder: &str) -> Result<(), BoxError> {
    let bucket = shared.js.get_key_value(WORKERS_BUCKET).await?;
    let ttl = bucket.status().await?.max_age();
    let Some(mut lease) =
        Lease::try_acquire(&bucket, "webhooks", Bytes::from(holder.to_owned()), ttl).await?
    else {
        return Ok(());
    };
    tracing::info!("this worker dispatches the webhooks");
    let stream = shared.js.get_stream(EVENTS_STREAM).await?;
    forget_stale_consumers(&stream, &shared.tenants).await?;
    let mut readers = Readers::default();
    let mut renew = tokio::time::interval(lease.renew_interval());
    let mut reconcile = tokio::time::interval(RECONCILE);
    let result = loop {
        tokio::select! {
            _ = reconcile.tick() => {
                let (all_read, legacy) = readers.reconcile(shared, &stream).await;
                if all_read && legacy {
                    // Every tenant reads on from where it stood.
                    match stream.delete_consumer(LEGACY_WEBHOOKS_CONSUMER).await {
                        Ok(_) => tracing::info!("the shared webhooks consumer of older releases is replaced by one per tenant"),
                        Err(e) => tracing::warn!(error = %e, "deleting the shared webhooks consumer"),
                    }
                }
            }
            _ = renew.tick() => {
                if let Err(e) = lease.renew().await {
                    tracing::warn!(error = %e, "the webhooks lease was lost; another worker dispatches");
                    break Ok(());
                }
            }
        }
    };
    drop(readers);
    if lease.is_valid() {
        lease.release().await;
    }
    result
}

/// The running reader of each tenant with webhooks; aborted when dropped.
#[derive(Default)]
struct Readers(HashMap<TenantId, JoinHandle<()>>);

impl Drop for Readers {
    fn drop(&mut self) {
        for task in self.0.values() {
            task.abort();
        }
    }
}

impl Readers {
    /// Starts a reader for each tenant with webhooks that has none
    /// running, and stops (and deletes the consumer of) each tenant that
    /// has no webhook any more. Answers whether every tenant has its
    /// reader, and whether a new consumer started where the shared
    /// consumer of older releases stood.
    async fn reconcile(&mut self, shared: &Arc<Shared>, stream: &Stream) -> (bool, bool) {
        let wanted: HashSet<TenantId> = shared.tenants.with_webhooks().into_iter().collect();
        let gone: Vec<TenantId> = self
            .0
            .keys()
            .filter(|t| !wanted.contains(*t))
            .cloned()
            .collect();
        for tenant in gone {
            if let Some(task) = self.0.remove(&tenant) {
                task.abort();
            }
            if let Err(e) = stream
                .delete_consumer(&webhooks_consumer_name(&tenant))
                .await
            {
                tracing::warn!(%tenant, error = %e, "deleting the webhook consumer of a tenant without webhooks");
            }
        }
        let (mut all_read, mut legacy) = (true, false);
        for tenant in wanted {
            if self.0.get(&tenant).is_some_and(|task| !task.is_finished()) {
                continue;
            }
            match tenant_consumer(shared, stream, &tenant).await {
                Ok((consumer, from_legacy)) => {
                    legacy |= from_legacy;
                    let task = tokio::spawn(reader::run(shared.clone(), consumer));
                    self.0.insert(tenant, task);
                }
                Err(e) => {
                    all_read = false;
                    tracing::warn!(%tenant, error = %e, "the tenant's webhook consumer is not ready; trying again");
                }
            }
        }
        (all_read, legacy)
    }
}

/// The tenant's consumer: the one it has, with the configured share of
/// events in progress, or a new one, which starts where the shared
/// consumer of older releases stood if there is one (then answered
/// `true`), else a minute ago.
async fn tenant_consumer(
    shared: &Shared,
    stream: &Stream,
    tenant: &TenantId,
) -> Result<(PullConsumer, bool), BoxError> {
    let mut config = webhooks_consumer(tenant)?;
    config.max_ack_pending = shared.config.tenant_in_flight.max(1);
    let name = webhooks_consumer_name(tenant);
    match stream.consumer_info(&name).await {
        Ok(info) if info.config.max_ack_pending == config.max_ack_pending => {
            Ok((stream.get_consumer(&name).await?, false))
        }
        Ok(info) => {
            config.deliver_policy = info.config.deliver_policy;
            Ok((stream.update_consumer(config).await?, false))
        }
        Err(e) if e.kind() == ConsumerInfoErrorKind::NotFound => {
            let legacy = legacy_floor(stream).await?;
            config.deliver_policy = match legacy {
                Some(floor) => DeliverPolicy::ByStartSequence {
                    start_sequence: floor + 1,
                },
                None => DeliverPolicy::ByStartTime {
                    start_time: time::OffsetDateTime::now_utc() - NEW_CONSUMER_LOOKBACK,
                },
            };
            Ok((stream.create_consumer(config).await?, legacy.is_some()))
        }
        Err(e) => Err(e.into()),
    }
}

/// Where the shared consumer of older releases stood (its ack floor), if
/// it is still there.
async fn legacy_floor(stream: &Stream) -> Result<Option<u64>, BoxError> {
    match stream.consumer_info(LEGACY_WEBHOOKS_CONSUMER).await {
        Ok(info) => Ok(Some(info.ack_floor.stream_sequence)),
        Err(e) if e.kind() == ConsumerInfoErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the consumers of tenants that lost their webhooks (or were
/// deleted) while no dispatcher ran.
async fn forget_stale_consumers(stream: &Stream, tenants: &TenantBook) -> Result<(), BoxError> {
    let wanted: HashSet<TenantId> = tenants.with_webhooks().into_iter().collect();
    let names: Vec<String> = stream.consumer_names().try_collect().await?;
    for name in names {
        let Some(tenant) = webhooks_consumer_tenant(&name) else {
            continue;
        };
        if !wanted.contains(&tenant)
            && let Err(e) = stream.delete_consumer(&name).await
        {
            tracing::warn!(consumer = %name, error = %e, "deleting a stale webhook consumer");
        }
    }
    Ok(())
}
