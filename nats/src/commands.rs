//! Publishing a command to its conversation's writer, for every way a
//! command is published: addressed to its partition's ingest subject
//! with its dedupe id ([`addressed`]), and, for a caller that waits for
//! the writer's answer (a REST send, a scheduled send), answered
//! ([`answer`]).
//!
//! An answer comes from the writer on the command's reply subject, or,
//! when JetStream dropped the command as a repeat or the answer is late,
//! from what the writer left: the caller's `look_up` (the stored message,
//! or the refusal it remembered). A socket's sends are answered the same
//! way by the gateway's `Sends`, many at a time.

use std::future::Future;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream;
use futures::StreamExt;

use crate::envelope::{Command, CommandReply, HEADER_REPLY};
use crate::error::BackboneError;
use crate::publish::publish_stored;
use crate::subject::{ingest, partition_of};
use crate::trace;

/// How long a waiting caller lets pass between two look-ups.
pub const LOOK_UP_AGAIN: Duration = Duration::from_millis(50);

/// The subject and headers of `command` published alone: its
/// conversation's ingest subject, its dedupe id as `Nats-Msg-Id` (a
/// repeat inside the window is dropped), and the trace context.
pub fn addressed(
    command: &Command,
    partitions: u16,
    traceparent: Option<&str>,
) -> (String, HeaderMap) {
    let partition = partition_of(command.tenant(), command.conversation_id(), partitions);
    addressed_to(partition, command, traceparent)
}

/// [`addressed`], for a caller that knows the command's partition.
pub fn addressed_to(
    partition: u16,
    command: &Command,
    traceparent: Option<&str>,
) -> (String, HeaderMap) {
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", command.dedupe_id().as_str());
    if let Some(traceparent) = traceparent {
        headers.insert(trace::HEADER_TRACEPARENT, traceparent);
    }
    (
        ingest(partition, command.tenant(), command.conversation_id()),
        headers,
    )
}

/// Why a waiting caller has no answer.
#[derive(Debug, thiserror::Error)]
pub enum NoAnswer<E: std::error::Error + 'static> {
    #[error(transparent)]
    Backbone(#[from] BackboneError),
    /// The look-up failed.
    #[error(transparent)]
    LookUp(E),
    /// Stored, but neither answered nor found by `deadline`: the writer
    /// has it and will apply it; the caller may ask again with the same
    /// idempotency key.
    #[error("the command is stored but not answered yet")]
    NotYet,
}

/// Publishes `command` with a reply subject its writer answers on, and
/// waits for the answer until `deadline`; a repeat JetStream dropped, or
/// an answer not in time, is asked of `look_up` every
/// [`LOOK_UP_AGAIN`] until `deadline` (at least once). `look_up` gives
/// the answer the writer left, if any.
pub async fn answer<E, F>(
    client: &async_nats::Client,
    js: &jetstream::Context,
    command: &Command,
    partitions: u16,
    deadline: tokio::time::Instant,
    mut look_up: impl FnMut() -> F,
) -> Result<CommandReply, NoAnswer<E>>
where
    E: std::error::Error + 'static,
    F: Future<Output = Result<Option<CommandReply>, E>>,
{
    let traceparent = trace::traceparent(&tracing::Span::current());
    let (subject, mut headers) = addressed(command, partitions, traceparent.as_deref());
    let inbox = client.new_inbox();
    // Subscribed before publishing, so no answer is missed.
    let mut replies = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| BackboneError::nats("subscribing for a writer's answer", e))?;
    headers.insert(HEADER_REPLY, inbox.as_str());
    let payload = command.encode()?;
    let stored = publish_stored(js, subject, headers, payload, "a command").await?;
    if !stored.duplicate
        && let Ok(Some(reply)) = tokio::time::timeout_at(deadline, replies.next()).await
    {
        return serde_json::from_slice(&reply.payload)
            .map_err(|e| NoAnswer::Backbone(BackboneError::encoding(e)));
    }
    drop(replies);
    loop {
        if let Some(reply) = look_up().await.map_err(NoAnswer::LookUp)? {
            return Ok(reply);
        }
        if tokio::time::Instant::now() + LOOK_UP_AGAIN >= deadline {
            return Err(NoAnswer::NotYet);
        }
        tokio::time::sleep(LOOK_UP_AGAIN).await;
    }
}
