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

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer;
use futures::StreamExt;
use serde_json::json;
use switchboard_nats::audit::tenant_of_subject;
use switchboard_nats::definitions::{AUDIT_STREAM, audit_events_consumer};
use switchboard_protocol::moderation::AuditEntry;
use switchboard_protocol::webhooks::{EventType, WebhookEvent};

use crate::config::EventStream;
use crate::ctx::Ctx;
use crate::error::WorkerError;

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
    let consumer: consumer::PullConsumer = stream
        .get_or_create_consumer(&name, config)
        .await
        .map_err(|e| WorkerError::nats(format!("consumer {name}"), e))?;
    let mut entries = consumer
        .messages()
        .await
        .map_err(|e| WorkerError::nats(format!("consumer {name}"), e))?;
    while let Some(message) = entries.next().await {
        let message = message.map_err(|e| WorkerError::nats(format!("consumer {name}"), e))?;
        let seq = message.info().map(|i| i.stream_sequence).unwrap_or(0);
        if let Some(event) = event_of(ctx, &message.subject, seq, &message.payload)
            && !relayed(ctx, seq, &event).await
        {
            // Not acked: the entry comes again.
            continue;
        }
        if let Err(e) = message.ack().await {
            tracing::debug!(seq, error = %e, "acking an audit entry");
        }
    }
    Ok(())
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
