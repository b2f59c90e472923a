//! Outbound events (v1.2) on the stream `SB_EVENTS`: what a tenant's
//! webhooks get, one JetStream message per event, so operators read the
//! same events with the NATS CLI (`nats stream view SB_EVENTS`).
//!
//! | subject | carries |
//! |---|---|
//! | `sb.events.<tenant>` | one [`WebhookEvent`], `Nats-Msg-Id` its id |
//! | `sb.eventsdead.<tenant>` | an event some endpoint never took, headers `Sb-Webhook-Url`, `Sb-Webhook-Error` |
//!
//! One subject per tenant, so the stream's `max_msgs_per_subject` bounds
//! each tenant's events on its own: a tenant past it loses its own oldest,
//! never another's. (Older releases added the conversation; the webhook
//! consumers read both forms.)
//!
//! An event's id is made of what it is about (a message and its version,
//! a reaction command), so an event published again after a writer's
//! crash is the same event: JetStream drops it within its dedupe window,
//! and a receiver can drop it after.

use async_nats::HeaderMap;
use async_nats::jetstream::{self, context::PublishAckFuture};
use switchboard_protocol::TenantId;
use switchboard_protocol::webhooks::WebhookEvent;

use crate::BackboneError;
use crate::subject::token;

pub const EVENTS_PREFIX: &str = "sb.events";
pub const DEAD_PREFIX: &str = "sb.eventsdead";
pub const HEADER_WEBHOOK_URL: &str = "Sb-Webhook-Url";
pub const HEADER_WEBHOOK_ERROR: &str = "Sb-Webhook-Error";

pub fn event_subject(tenant: &TenantId) -> String {
    format!("{EVENTS_PREFIX}.{}", token(tenant.as_str()))
}

pub fn dead_subject(tenant: &TenantId) -> String {
    format!("{DEAD_PREFIX}.{}", token(tenant.as_str()))
}

/// Publishes an event; the future resolves once JetStream stored it.
pub async fn publish(
    js: &jetstream::Context,
    event: &WebhookEvent,
) -> Result<PublishAckFuture, BackboneError> {
    let body = serde_json::to_vec(event).map_err(BackboneError::encoding)?;
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", event.id.as_str());
    js.publish_with_headers(event_subject(&event.tenant), headers, body.into())
        .await
        .map_err(|e| BackboneError::nats("publishing an event", e))
}
