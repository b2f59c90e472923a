//! Outbound webhooks (v1.2): the events writers store on `SB_EVENTS`
//! (`switchboard_nats::events`) POSTed to each tenant's endpoints.
//!
//! One worker at a time dispatches: the holder of the `webhooks` lease in
//! `sb_workers`. It reads the shared consumer `webhooks` and gives each
//! conversation a lane (`lane.rs`) that delivers its events in order,
//! retrying one with a growing delay (1 s, 2 s ... up to a minute) for
//! `max_attempts`, then keeping it in `SB_EVENTS_DEAD`, before the next.
//! Lanes of different conversations run side by side, within a bound of
//! calls in all and per tenant, so a slow or failing endpoint holds up its
//! own conversations only. Memory is bounded by the consumer's
//! `max_ack_pending`: the server hands out no more events than that until
//! some are acked. A dispatcher that loses its lease stops; the next
//! holder gets every event not acked, once its ack wait passes.

mod breaker;
mod call;
mod lane;
mod shared;

pub use call::signature_header;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use bytes::Bytes;
use futures::StreamExt;
use switchboard_nats::definitions::{EVENTS_STREAM, WORKERS_BUCKET, webhooks_consumer};
use switchboard_nats::lease::Lease;
use switchboard_nats::records::tenants::TenantBook;
use tokio::sync::Semaphore;

use crate::providers::Clients;
use lane::Lane;
pub use shared::HooksConfig;
use shared::Shared;

/// How long a lane without events lives on.
const LANE_IDLE: Duration = Duration::from_secs(30);
/// How often events waiting in lanes are kept in progress: well within
/// the consumer's ack wait (60 s).
const KEEP_IN_PROGRESS: Duration = Duration::from_secs(15);

/// Dispatches while this process holds the `webhooks` lease, and waits
/// for it otherwise; runs until aborted. `holder` names this process
/// uniquely.
pub async fn run(
    js: jetstream::Context,
    tenants: TenantBook,
    clients: Clients,
    config: HooksConfig,
    holder: String,
) {
    let shared = Arc::new(Shared {
        calls: Arc::new(Semaphore::new(config.concurrency.max(1))),
        per_tenant: Mutex::default(),
        breakers: breaker::Breakers::new(config.give_up_after, config.cool_down),
        js,
        tenants,
        clients,
        config,
    });
    loop {
        if let Err(e) = hold_and_dispatch(&shared, &holder).await {
            tracing::warn!(error = %e, "the webhook dispatcher stopped; starting again");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn hold_and_dispatch(
    shared: &Arc<Shared>,
    holder: &str,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let bucket = shared.js.get_key_value(WORKERS_BUCKET).await?;
    let ttl = bucket.status().await?.max_age();
    let Some(mut lease) =
        Lease::try_acquire(&bucket, "webhooks", Bytes::from(holder.to_owned()), ttl).await?
    else {
        return Ok(());
    };
    tracing::info!("this worker dispatches the webhooks");
    let stream = shared.js.get_stream(EVENTS_STREAM).await?;
    let config = webhooks_consumer()?;
    let name = config.durable_name.clone().unwrap_or_default();
    let consumer: consumer::PullConsumer = stream.get_or_create_consumer(&name, config).await?;
    let mut events = consumer.messages().await?;
    let mut lanes: HashMap<String, (Arc<Lane>, tokio::task::JoinHandle<()>)> = HashMap::new();
    let mut renew = tokio::time::interval(lease.renew_interval());
    let mut progress = tokio::time::interval(KEEP_IN_PROGRESS);
    let result = loop {
        tokio::select! {
            next = events.next() => {
                let Some(next) = next else { break Ok(()) };
                let message = next?;
                let Ok(info) = message.info() else { continue };
                let seq = info.stream_sequence;
                let key = message.subject.to_string();
                lanes.retain(|_, (_, task)| !task.is_finished());
                let mut message = message;
                loop {
                    let (lane, _) = lanes.entry(key.clone()).or_insert_with(|| {
                        let lane = Arc::new(Lane::default());
                        let task = tokio::spawn(lane::run(shared.clone(), lane.clone(), LANE_IDLE));
                        (lane, task)
                    });
                    match lane.push(message, seq) {
                        lane::Pushed::Queued | lane::Pushed::Held => break,
                        // It ended between the check above and now.
                        lane::Pushed::Closed(back) => {
                            message = *back;
                            lanes.remove(&key);
                        }
                    }
                }
                crate::counters::webhook_held(lanes.values().map(|(l, _)| l.len()).sum());
            }
            _ = renew.tick() => {
                if let Err(e) = lease.renew().await {
                    tracing::warn!(error = %e, "the webhooks lease was lost; another worker dispatches");
                    break Ok(());
                }
            }
            _ = progress.tick() => {
                for (lane, _) in lanes.values() {
                    lane.keep_in_progress().await;
                }
            }
        }
    };
    for (_, (_, task)) in lanes {
        task.abort();
    }
    if lease.is_valid() {
        lease.release().await;
    }
    result
}
