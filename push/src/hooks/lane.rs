//! One conversation's events, delivered in their order: each to every
//! endpoint of its tenant that wants it, retried with a growing delay,
//! and dead-lettered after its last attempt; only then the next. Events
//! waiting behind a retry are kept in progress on the consumer, so none
//! is redelivered meanwhile.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::{self, AckKind};
use switchboard_nats::events::{HEADER_WEBHOOK_ERROR, HEADER_WEBHOOK_URL, dead_subject};
use switchboard_protocol::webhooks::{WebhookEndpoint, WebhookEvent};
use tokio::sync::{Notify, Semaphore};

use super::call::post;
use super::shared::Shared;
use crate::providers::Attempt;

/// The queue of one conversation's events, shared with the dispatcher
/// that fills it.
#[derive(Default)]
pub(super) struct Lane {
    queue: Mutex<Queue>,
    more: Notify,
}

#[derive(Default)]
struct Queue {
    events: VecDeque<(u64, jetstream::Message)>,
    /// The lane's task ended (idle): it takes nothing more, and the
    /// dispatcher makes a new lane. Set under the same lock as a push, so
    /// no event is handed to a task that is gone.
    closed: bool,
}

/// What became of an event handed to a lane.
pub(super) enum Pushed {
    Queued,
    /// Held already (a redelivery while it waits): nothing to do.
    Held,
    /// The lane ended: give the event to a new one.
    Closed(Box<jetstream::Message>),
}

impl Lane {
    pub(super) fn push(&self, message: jetstream::Message, seq: u64) -> Pushed {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.closed {
            return Pushed::Closed(Box::new(message));
        }
        if queue.events.iter().any(|(held, _)| *held == seq) {
            return Pushed::Held;
        }
        queue.events.push_back((seq, message));
        drop(queue);
        self.more.notify_one();
        Pushed::Queued
    }

    fn front(&self) -> Option<jetstream::Message> {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .front()
            .map(|(_, m)| m.clone())
    }

    fn pop(&self) {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .pop_front();
    }

    /// Closes the lane if it holds nothing; whether it did.
    fn close_if_empty(&self) -> bool {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.events.is_empty() {
            queue.closed = true;
        }
        queue.closed
    }

    pub(super) fn len(&self) -> usize {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .len()
    }

    /// Tells the consumer that every queued event is still being worked
    /// on, so none is redelivered while it waits its turn.
    pub(super) async fn keep_in_progress(&self) {
        let held: Vec<_> = self
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .iter()
            .map(|(_, m)| m.clone())
            .collect();
        for m in held {
            let _ = m.ack_with(AckKind::Progress).await;
        }
    }
}

/// Delivers the lane's events until it has been empty for `idle`.
pub(super) async fn run(shared: Arc<Shared>, lane: Arc<Lane>, idle: Duration) {
    loop {
        let Some(message) = lane.front() else {
            if tokio::time::timeout(idle, lane.more.notified())
                .await
                .is_err()
                && lane.close_if_empty()
            {
                return;
            }
            continue;
        };
        deliver(&shared, &message).await;
        if let Err(e) = message.ack().await {
            tracing::warn!(error = %e, "an event's ack failed; it may be delivered again");
        }
        lane.pop();
    }
}

/// One event to every endpoint that wants it.
async fn deliver(shared: &Shared, message: &jetstream::Message) {
    let event: WebhookEvent = match serde_json::from_slice(&message.payload) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(error = %e, subject = %message.subject, "an event does not decode; skipped");
            return;
        }
    };
    let endpoints: Vec<WebhookEndpoint> = shared
        .tenants
        .get(&event.tenant)
        .map(|t| {
            t.webhooks
                .iter()
                .filter(|w| w.wants(event.kind))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let lag = switchboard_protocol::Timestamp::now().unix_ms() - event.created_at.unix_ms();
    crate::counters::webhook_lag(lag.max(0) as f64 / 1000.0);
    for endpoint in endpoints {
        to_endpoint(shared, message, &event, &endpoint).await;
    }
}

async fn to_endpoint(
    shared: &Shared,
    message: &jetstream::Message,
    event: &WebhookEvent,
    endpoint: &WebhookEndpoint,
) {
    let (tenant, url) = (&event.tenant, endpoint.url.as_str());
    if shared.breakers.is_open(tenant, url, Instant::now()) {
        crate::counters::webhook_outcome("dead_letter");
        let why = "the endpoint failed its last events for good; its events go to SB_EVENTS_DEAD without a call until its cool-down passes";
        dead_letter(shared, message, event, endpoint, why).await;
        return;
    }
    let mut delay = shared.config.first_retry;
    let mut attempt = 1;
    loop {
        let outcome = {
            let _call = permit(&shared.calls).await;
            let _tenant = permit(&shared.tenant_calls(&event.tenant)).await;
            post(&shared.clients, endpoint, event, &message.payload).await
        };
        let why = match outcome {
            Attempt::Sent => {
                crate::counters::webhook_outcome("sent");
                shared.breakers.succeeded(tenant, url);
                return;
            }
            Attempt::Fatal(why) => why,
            Attempt::Retry(why) | Attempt::Gone(why) => {
                if attempt < shared.config.max_attempts {
                    crate::counters::webhook_outcome("retry");
                    tracing::debug!(url = %endpoint.url, attempt, %why, "webhook failed; trying again");
                    let _ = message.ack_with(AckKind::Progress).await;
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(shared.config.max_retry);
                    attempt += 1;
                    continue;
                }
                why
            }
        };
        crate::counters::webhook_outcome("dead_letter");
        tracing::warn!(url = %endpoint.url, id = %event.id, attempts = attempt, %why, "webhook failed for good; the event goes to SB_EVENTS_DEAD");
        if shared.breakers.failed(tenant, url, Instant::now()) {
            tracing::warn!(url = %endpoint.url, "the endpoint is given up on for its cool-down");
        }
        dead_letter(shared, message, event, endpoint, &why).await;
        return;
    }
}

async fn permit(semaphore: &Arc<Semaphore>) -> Option<tokio::sync::OwnedSemaphorePermit> {
    semaphore.clone().acquire_owned().await.ok()
}

async fn dead_letter(
    shared: &Shared,
    message: &jetstream::Message,
    event: &WebhookEvent,
    endpoint: &WebhookEndpoint,
    why: &str,
) {
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_WEBHOOK_URL, endpoint.url.as_str());
    let why: String = why.chars().filter(|c| !c.is_control()).take(300).collect();
    headers.insert(HEADER_WEBHOOK_ERROR, why.as_str());
    let stored = match shared
        .js
        .publish_with_headers(
            dead_subject(&event.tenant),
            headers,
            message.payload.clone(),
        )
        .await
    {
        Ok(ack) => ack.await.map(drop).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = stored {
        tracing::error!(error = %e, id = %event.id, "a dead letter was not stored");
    }
}
