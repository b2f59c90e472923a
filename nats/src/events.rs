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

/// When the message an event carries expires, if it does: the event
/// leaves the stream then ([`crate::publish::HEADER_TTL`]).
pub fn expires_at(event: &WebhookEvent) -> Option<switchboard_protocol::Timestamp> {
    let at = event.data.get("message")?.get("expires_at")?;
    serde_json::from_value(at.clone()).ok()
}

/// How long a stream keeps an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// As long as the stream's limits say.
    AsLimited,
    /// No longer than this [`crate::publish::HEADER_TTL`]: the message it
    /// is about expires then.
    For(String),
    /// Not at all: the message it is about expired already.
    Never,
}

/// How long an event is kept, by the message it is about.
pub fn kept(event: &WebhookEvent) -> Kept {
    match expires_at(event) {
        None => Kept::AsLimited,
        Some(at) => match crate::publish::ttl_until(at, switchboard_protocol::Timestamp::now()) {
            Some(ttl) => Kept::For(ttl),
            None => Kept::Never,
        },
    }
}

/// Publishes an event; the future resolves once JetStream stored it.
/// `None`: the message it is about expired already, so it is not stored.
pub async fn publish(
    js: &jetstream::Context,
    event: &WebhookEvent,
) -> Result<Option<PublishAckFuture>, BackboneError> {
    let kept = kept(event);
    if kept == Kept::Never {
        return Ok(None);
    }
    let body = serde_json::to_vec(event).map_err(BackboneError::encoding)?;
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", event.id.as_str());
    if let Kept::For(ttl) = kept {
        headers.insert(crate::publish::HEADER_TTL, ttl.as_str());
    }
    js.publish_with_headers(event_subject(&event.tenant), headers, body.into())
        .await
        .map(Some)
        .map_err(|e| BackboneError::nats("publishing an event", e))
}
