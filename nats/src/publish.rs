//! Publishing to JetStream and waiting until it stored the message, the
//! way every writer of a stream does it: the cause of a failure kept, and
//! named by what was published.

use async_nats::HeaderMap;
use async_nats::jetstream;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::publish::PublishAck;

use crate::error::BackboneError;

/// Header of a message JetStream removes by itself when its time is up
/// (on streams with `allow_msg_ttl`): copies of content that expires.
pub const HEADER_TTL: &str = "Nats-TTL";

/// The [`HEADER_TTL`] of a copy of content that expires at `expires_at`:
/// the whole seconds left, at least one; `None` when the time is past,
/// and the copy must not be stored at all.
pub fn ttl_until(
    expires_at: switchboard_protocol::Timestamp,
    now: switchboard_protocol::Timestamp,
) -> Option<String> {
    let left = expires_at.unix_ms().saturating_sub(now.unix_ms());
    (left > 0).then(|| format!("{}s", (left + 999) / 1000))
}

/// Publishes and waits until JetStream stored it; `what` names it in the
/// error, whose source is the client's.
pub async fn publish_stored(
    js: &jetstream::Context,
    subject: String,
    headers: HeaderMap,
    payload: bytes::Bytes,
    what: &str,
) -> Result<PublishAck, BackboneError> {
    let message = PublishMessage::build().payload(payload).headers(headers);
    js.send_publish(subject, message)
        .await
        .map_err(|e| BackboneError::nats(format!("publishing {what}"), e))?
        .await
        .map_err(|e| BackboneError::nats(format!("storing {what}"), e))
}
