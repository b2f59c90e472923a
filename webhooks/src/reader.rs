//! One tenant's events, read from its own consumer (`webhooks_<tenant>`)
//! and handed to a lane per conversation. The consumer's
//! `max_ack_pending` is the tenant's share of events in progress: when
//! its endpoints are slow or failing, its own events wait in JetStream,
//! and no other tenant's reader notices.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::consumer::pull::MessagesErrorKind;
use futures::StreamExt;
use switchboard_protocol::ConversationId;
use switchboard_protocol::webhooks::WebhookEvent;

use super::lane::{self, Held, Lane};
use super::shared::Shared;

/// How long a lane without events lives on.
const LANE_IDLE: Duration = Duration::from_secs(30);
/// How often events waiting in lanes are kept in progress: well within
/// the consumer's ack wait (60 s).
const KEEP_IN_PROGRESS: Duration = Duration::from_secs(15);

/// The tenant's lanes by conversation (`None`: its tenant-wide events).
/// Dropped with the reader, whether it returns or is aborted, and ends
/// every lane with it.
#[derive(Default)]
struct Lanes(HashMap<Option<ConversationId>, (Arc<Lane>, tokio::task::JoinHandle<()>)>);

impl Drop for Lanes {
    fn drop(&mut self) {
        for (_, (lane, task)) in self.0.drain() {
            task.abort();
            lane.clear();
        }
    }
}

/// Reads until the consumer goes away or the task is aborted; the lanes
/// end with it, and what they held is handed out again after its ack
/// wait.
pub(super) async fn run(shared: Arc<Shared>, consumer: PullConsumer) {
    let name = consumer.cached_info().name.clone();
    let mut lanes = Lanes::default();
    if let Err(e) = read(&shared, consumer, &mut lanes).await {
        tracing::warn!(consumer = %name, error = %e, "a tenant's webhook reader stopped; it starts again");
    }
}

async fn read(
    shared: &Arc<Shared>,
    consumer: PullConsumer,
    lanes: &mut Lanes,
) -> Result<(), async_nats::Error> {
    let mut events = consumer.messages().await?;
    let mut progress = tokio::time::interval(KEEP_IN_PROGRESS);
    loop {
        tokio::select! {
            next = events.next() => {
                let message = match next {
                    None => return Ok(()),
                    Some(Ok(m)) => m,
                    Some(Err(e)) => match e.kind() {
                        MessagesErrorKind::ConsumerDeleted
                        | MessagesErrorKind::PushBasedConsumer
                        | MessagesErrorKind::RequestLimitExceeded => return Err(e.into()),
                        _ => {
                            tracing::debug!(error = %e, "reading a tenant's events");
                            continue;
                        }
                    },
                };
                let Ok(info) = message.info() else { continue };
                let seq = info.stream_sequence;
                let event: WebhookEvent = match serde_json::from_slice(&message.payload) {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::error!(error = %e, subject = %message.subject, "an event does not decode; skipped");
                        let _ = message.ack().await;
                        continue;
                    }
                };
                lanes.0.retain(|_, (_, task)| !task.is_finished());
                let key = event.conversation_id.clone();
                let mut held = Held { seq, message, event: Arc::new(event) };
                loop {
                    let (lane, _) = lanes.0.entry(key.clone()).or_insert_with(|| {
                        let lane = Arc::new(Lane::default());
                        let task = tokio::spawn(lane::run(shared.clone(), lane.clone(), LANE_IDLE));
                        (lane, task)
                    });
                    match lane.push(held) {
                        lane::Pushed::Queued | lane::Pushed::Held => break,
                        // It ended between the check above and now.
                        lane::Pushed::Closed(back) => {
                            held = *back;
                            lanes.0.remove(&key);
                        }
                    }
                }
            }
            _ = progress.tick() => {
                for (lane, _) in lanes.0.values() {
                    lane.keep_in_progress().await;
                }
            }
        }
    }
}
