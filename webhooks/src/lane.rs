//! One conversation's events, delivered in their order: each to every
//! endpoint of its tenant that wants it, retried with a growing delay,
//! and dead-lettered after its last attempt; only then the next. Events
//! waiting behind a retry are kept in progress on the tenant's consumer,
//! so none is redelivered meanwhile. A retry's wait holds no call: the
//! tenant's other conversations, and other tenants, go on.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::{self, AckKind};
use switchboard_nats::events::{HEADER_WEBHOOK_ERROR, HEADER_WEBHOOK_URL, Kept, dead_subject};
use switchboard_nats::publish::publish_stored;
use switchboard_protocol::webhooks::{WebhookEndpoint, WebhookEvent};
use tokio::sync::Notify;

use super::call::post;
use super::shared::Shared;
use switchboard_outbound::Attempt;

/// The queue of one conversation's events, shared with the dispatcher
/// that fills it.
#[derive(Default)]
pub(super) struct Lane {
    queue: Mutex<Queue>,
    more: Notify,
}

/// An event as the consumer handed it, and as it reads.
#[derive(Clone)]
pub(super) struct Held {
    pub(super) seq: u64,
    pub(super) message: jetstream::Message,
    pub(super) event: Arc<WebhookEvent>,
}

#[derive(Default)]
struct Queue {
    events: VecDeque<Held>,
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
    Closed(Box<Held>),
}

impl Lane {
    pub(super) fn push(&self, held: Held) -> Pushed {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.closed {
            return Pushed::Closed(Box::new(held));
        }
        if queue.events.iter().any(|h| h.seq == held.seq) {
            return Pushed::Held;
        }
        queue.events.push_back(held);
        drop(queue);
        crate::counters::webhook_held(1.0);
        self.more.notify_one();
        Pushed::Queued
    }

    fn front(&self) -> Option<Held> {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .front()
            .cloned()
    }

    fn pop(&self) {
        let popped = self
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .pop_front();
        if popped.is_some() {
            crate::counters::webhook_held(-1.0);
        }
    }

    /// Drops what the lane holds (its reader stops; the consumer hands
    /// the events out again).
    pub(super) fn clear(&self) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        crate::counters::webhook_held(-(queue.events.len() as f64));
        queue.events.clear();
        queue.closed = true;
    }

    /// Closes the lane if it holds nothing; whether it did.
    fn close_if_empty(&self) -> bool {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.events.is_empty() {
            queue.closed = true;
        }
        queue.closed
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
            .map(|h| h.message.clone())
            .collect();
        for m in held {
            let _ = m.ack_with(AckKind::Progress).await;
        }
    }
}

/// Delivers the lane's events until it has been empty for `idle`.
pub(super) async fn run(shared: Arc<Shared>, lane: Arc<Lane>, idle: Duration) {
    loop {
        let Some(held) = lane.front() else {
            if tokio::time::timeout(idle, lane.more.notified())
                .await
                .is_err()
                && lane.close_if_empty()
            {
                return;
            }
            continue;
        };
        deliver(&shared, &held).await;
        if let Err(e) = held.message.ack().await {
            tracing::warn!(error = %e, "an event's ack failed; it may be delivered again");
        }
        lane.pop();
    }
}

/// One event to every endpoint that wants it.
async fn deliver(shared: &Shared, held: &Held) {
    let event = &held.event;
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
        to_endpoint(shared, &held.message, event, &endpoint).await;
    }
}

/// Why an event goes to the dead letters without a call.
const GIVEN_UP: &str = "the endpoint failed too many of its last calls; its events go to SB_EVENTS_DEAD without a call until its cool-down passes";

async fn to_endpoint(
    shared: &Shared,
    message: &jetstream::Message,
    event: &WebhookEvent,
    endpoint: &WebhookEndpoint,
) {
    let (tenant, url) = (&event.tenant, endpoint.url.as_str());
    let mut delay = shared.config.first_retry;
    let mut attempt = 1;
    let why = loop {
        // Checked before every attempt, retries too: an endpoint given up
        // on stops costing calls and time at once.
        if shared.breakers.is_open(tenant, url, Instant::now()) {
            break GIVEN_UP.to_owned();
        }
        let outcome = {
            let _permits = shared.call_permits(tenant).await;
            post(&shared.clients, endpoint, event, &message.payload).await
        };
        let failed = !matches!(outcome, Attempt::Sent);
        if shared
            .breakers
            .attempted(tenant, url, failed, Instant::now())
        {
            tracing::warn!(%tenant, url = %endpoint.url, "the endpoint is given up on for its cool-down");
        }
        let (why, again) = match outcome {
            Attempt::Sent => {
                crate::counters::webhook_outcome("sent");
                return;
            }
            Attempt::Fatal(why) => (why, false),
            Attempt::Retry(why) | Attempt::Gone(why) => (why, true),
        };
        if !again || attempt >= shared.config.max_attempts {
            break why;
        }
        crate::counters::webhook_outcome("retry");
        tracing::debug!(url = %endpoint.url, attempt, %why, "webhook failed; trying again");
        let _ = message.ack_with(AckKind::Progress).await;
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(shared.config.max_retry);
        attempt += 1;
    };
    crate::counters::webhook_outcome("dead_letter");
    tracing::warn!(url = %endpoint.url, id = %event.id, attempts = attempt, %why, "webhook failed for good; the event goes to SB_EVENTS_DEAD");
    dead_letter(shared, message, event, endpoint, &why).await;
}

async fn dead_letter(
    shared: &Shared,
    message: &jetstream::Message,
    event: &WebhookEvent,
    endpoint: &WebhookEndpoint,
    why: &str,
) {
    let mut headers = HeaderMap::new();
    // A dead letter about a message that expired is not kept either.
    match switchboard_nats::events::kept(event) {
        Kept::For(ttl) => headers.insert(switchboard_nats::publish::HEADER_TTL, ttl.as_str()),
        Kept::AsLimited => {}
        Kept::Never => return,
    }
    headers.insert(HEADER_WEBHOOK_URL, endpoint.url.as_str());
    let why: String = why.chars().filter(|c| !c.is_control()).take(300).collect();
    headers.insert(HEADER_WEBHOOK_ERROR, why.as_str());
    let stored = publish_stored(
        &shared.js,
        dead_subject(&event.tenant),
        headers,
        message.payload.clone(),
        "a dead letter",
    )
    .await;
    if let Err(e) = stored {
        tracing::error!(error = %e, id = %event.id, "a dead letter was not stored");
    }
}
