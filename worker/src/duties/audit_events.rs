//! The audit relay (v1.3): every worker takes its share of the
//! `audit-events` consumer on `SB_AUDIT` and publishes each entry as a
//! `moderation.audit` event on `SB_EVENTS` for a tenant whose webhooks
//! take it (or for every tenant, with `event_stream = "all"`). Gateways
//! record the entries but may not publish events, which the dispatcher
//! signs; this is the one way an entry becomes one.
//!
//! The event's id is the entry's (`audit-<seq>`), so an entry relayed
//! again after a crash is dropped by JetStream within its dedupe window
//! and by the receiver after. An entry is acked once its event is stored
//! (or it is not wanted), so none is lost to a crash.
//!
//! An entry whose event is refused comes again after [`AGAIN_AFTER`], at
//! most the consumer's `max_deliver` times in all; then it is dropped and
//! counted as a lost event (`switchboard_webhook_events_lost_total`), as
//! the writers count theirs. The consumer is shared by every tenant, so
//! an entry retried for ever would hold one of its acks pending for ever:
//! enough of them, from one tenant, would stall every tenant's events.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{AckKind, consumer};
use futures::StreamExt;
use serde_json::json;
use switchboard_nats::audit::tenant_of_subject;
use switchboard_nats::definitions::{AUDIT_STREAM, audit_events_consumer};
use switchboard_protocol::moderation::AuditEntry;
use switchboard_protocol::webhooks::{EventType, WebhookEvent};

use crate::config::EventStream;
use crate::ctx::Ctx;
use crate::error::WorkerError;

/// How long a refused entry waits before it comes again.
const AGAIN_AFTER: Duration = Duration::from_secs(5);

pub(crate) async fn run(ctx: Arc<Ctx>) {
    loop {
        if let Err(e) = serve(&ctx).await {
            tracing::warn!(error = %e, "the audit relay's consumer failed; starting it again");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn serve(ctx: &Ctx) -> Result<(), WorkerError> {
    let stream = ctx
        .js
        .get_stream(AUDIT_STREAM)
        .await
        .map_err(|e| WorkerError::nats(format!("stream {AUDIT_STREAM}"), e))?;
    let config = audit_events_consumer()?;
    let name = config.durable_name.clone().unwrap_or_default();
    let shipped = config.max_deliver;
    let consumer: consumer::PullConsumer = stream
        .get_or_create_consumer(&name, config)
        .await
        .map_err(|e| WorkerError::nats(format!("consumer {name}"), e))?;
    // The server's bound, as an operator may have edited it; the file's
    // when the consumer was made by a release without one (-1).
    let attempts = match consumer.cached_info().config.max_deliver {
        n if n >= 1 => n,
        _ => shipped,
    };
    let mut entries = consumer
        .messages()
        .await
        .map_err(|e| WorkerError::nats(format!("consumer {name}"), e))?;
    while let Some(message) = entries.next().await {
        let message = message.map_err(|e| WorkerError::nats(format!("consumer {name}"), e))?;
        let (seq, delivered) = message
            .info()
            .map(|i| (i.stream_sequence, i.delivered))
            .unwrap_or((0, 1));
        let done = match event_of(ctx, &message.subject, seq, &message.payload) {
            None => AckKind::Ack,
            Some(event) if relayed(ctx, seq, &event).await => AckKind::Ack,
            Some(_) => match after_refusal(delivered, attempts) {
                Some(again) => AckKind::Nak(Some(again)),
                None => {
                    crate::metrics::event_lost();
                    tracing::warn!(
                        seq,
                        delivered,
                        "an audit event was refused every time; dropped"
                    );
                    AckKind::Term
                }
            },
        };
        if let Err(e) = message.ack_with(done).await {
            tracing::debug!(seq, error = %e, "answering an audit entry");
        }
    }
    Ok(())
}

/// When an entry whose event was refused at its `delivered`th delivery
/// comes again; `None` when that was its last of `attempts` (a number
/// below 1 means no bound, as JetStream reads `max_deliver`).
fn after_refusal(delivered: i64, attempts: i64) -> Option<Duration> {
    (attempts < 1 || delivered < attempts).then_some(AGAIN_AFTER)
}

/// Whether `event` is stored on `SB_EVENTS` (or needs no storing: the
/// message it is about expired).
async fn relayed(ctx: &Ctx, seq: u64, event: &WebhookEvent) -> bool {
    match switchboard_nats::events::publish(&ctx.js, event).await {
        Ok(Some(stored)) => match stored.await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(seq, error = %e, "an audit event was not stored");
                false
            }
        },
        Ok(None) => true,
        Err(e) => {
            tracing::warn!(seq, error = %e, "an audit event was not published");
            false
        }
    }
}

/// The event of the entry at `seq` of the log `subject`, if its tenant
/// wants it.
fn event_of(ctx: &Ctx, subject: &str, seq: u64, payload: &[u8]) -> Option<WebhookEvent> {
    let tenant = tenant_of_subject(subject)?;
    let wanted = ctx.config.event_stream == EventStream::All
        || ctx
            .tenants
            .get(&tenant)
            .is_some_and(|r| r.wants_events(EventType::ModerationAudit));
    if !wanted {
        return None;
    }
    let mut entry: AuditEntry = match serde_json::from_slice(payload) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(seq, error = %e, "an audit entry does not decode; not relayed");
            return None;
        }
    };
    entry.id = seq.to_string();
    Some(WebhookEvent {
        id: format!("audit-{seq}"),
        kind: EventType::ModerationAudit,
        tenant,
        conversation_id: entry.conversation_id.clone(),
        created_at: entry.at,
        data: json!({ "entry": entry }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_entry_comes_again_until_its_last_delivery() {
        assert_eq!(after_refusal(1, 5), Some(AGAIN_AFTER));
        assert_eq!(after_refusal(4, 5), Some(AGAIN_AFTER));
        assert_eq!(after_refusal(5, 5), None);
        assert_eq!(after_refusal(6, 5), None);
        assert_eq!(after_refusal(100, -1), Some(AGAIN_AFTER));
    }

    #[test]
    fn the_shipped_consumer_bounds_its_deliveries() {
        let config = audit_events_consumer().expect("the shipped consumer parses");
        assert!(config.max_deliver >= 2, "{}", config.max_deliver);
        assert!(config.max_deliver <= 10, "{}", config.max_deliver);
    }
}
