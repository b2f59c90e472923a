//! Publishing to JetStream and waiting until it stored the message, the
//! way every writer of a stream does it: the cause of a failure kept, and
//! named by what was published.

use async_nats::HeaderMap;
use async_nats::jetstream;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::publish::PublishAck;

use crate::error::BackboneError;

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
