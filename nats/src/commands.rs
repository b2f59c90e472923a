//! Publishing a command to its conversation's writer, for every way a
//! command is published: addressed to its partition's ingest subject
//! with its dedupe id ([`addressed`]), and, for a caller that waits for
//! one send's answer (a REST send, a scheduled send at its time),
//! answered by the state machine a socket's sends are answered by
//! ([`answer`] over [`crate::answers::Sends`]).

use std::collections::VecDeque;
use std::future::Future;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream;
use futures::StreamExt;
use switchboard_protocol::frames::request_type;
use switchboard_protocol::{Content, ConversationId, ErrorCode, Message, ServerFrame, TenantId};

use crate::answers::{Action, Found, PubAck, SendLimits, Sends};
use crate::envelope::{Command, CommandReply, HEADER_REPLY, SendCommand};
use crate::error::BackboneError;
use crate::publish::publish_stored;
use crate::records::refusals::{Refusals, SendKey};
use crate::subject::{ingest, partition_of};
use crate::trace;

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
    let mut headers = dedupe_header(command.dedupe_id().as_str());
    if let Some(traceparent) = traceparent {
        headers.insert(trace::HEADER_TRACEPARENT, traceparent);
    }
    (
        ingest(partition, command.tenant(), command.conversation_id()),
        headers,
    )
}

/// The subject and headers of anything else a conversation's writer is
/// asked on its ingest partition (a maintenance request): `dedupe_id` as
/// `Nats-Msg-Id`, so the same request published again inside the window
/// queues nothing twice.
pub fn to_writer(
    tenant: &TenantId,
    conversation: &ConversationId,
    partitions: u16,
    dedupe_id: &str,
) -> (String, HeaderMap) {
    let partition = partition_of(tenant, conversation, partitions);
    (
        ingest(partition, tenant, conversation),
        dedupe_header(dedupe_id),
    )
}

fn dedupe_header(dedupe_id: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", dedupe_id);
    headers
}

/// How long one waiting caller's send may take.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    /// Without the writer's answer this long, the send is looked up in
    /// what the writer left, and again every as long.
    pub overdue: Duration,
    /// Without an answer this long, the caller is answered `unavailable`
    /// (its retry with the same `client_msg_id` is answered with what
    /// became of the send).
    pub give_up: Duration,
}

/// What a waiting caller's send goes through: the connection and
/// JetStream it is published on, the partitions it is addressed among,
/// and where its writer remembers a refusal.
#[derive(Clone, Copy)]
pub struct Backbone<'a> {
    pub client: &'a async_nats::Client,
    pub js: &'a jetstream::Context,
    pub partitions: u16,
    pub refusals: &'a Refusals,
}

/// Publishes `send` with a reply subject its writer answers on, and
/// answers it as a socket's send is answered, by the same state machine
/// ([`Sends`], one send): with the frame a socket would get, an `ack`
/// or an `error`. The writer's answer settles it; a repeat JetStream
/// dropped, or an answer overdue, is looked up in what the writer left:
/// the message `stored` finds in the store, else the refusal the writer
/// remembered in the backbone's `refusals`; past `give_up` it is
/// `unavailable`. `stored_as` is the content it is stored as when that
/// is not what its sender sent (a moderator's rewrite): the `ack`
/// carries it.
pub async fn answer<E, F>(
    backbone: &Backbone<'_>,
    send: &SendCommand,
    wait: Wait,
    stored_as: Option<Content>,
    mut stored: impl FnMut() -> F,
) -> Result<ServerFrame, BackboneError>
where
    E: std::fmt::Display,
    F: Future<Output = Result<Option<Message>, E>>,
{
    let Backbone {
        client,
        js,
        partitions,
        refusals,
    } = *backbone;
    let id = &send.client_msg_id;
    let mut sends = Sends::new(SendLimits {
        max_waiting: 1,
        max_unstored_bytes: usize::MAX,
        overdue: wait.overdue,
        give_up: wait.give_up,
    });
    let ticket = sends
        .accept(id, &send.conversation_id, 0, 0, Instant::now())
        .map_err(|r| BackboneError::Unavailable(r.message))?;
    let rewritten = stored_as.is_some();
    if let Some(content) = stored_as {
        sends.show_stored(id, content);
    }
    let command = Command::Send(send.clone());
    let traceparent = trace::traceparent(&tracing::Span::current());
    let (subject, mut headers) = addressed(&command, partitions, traceparent.as_deref());
    let inbox = client.new_inbox();
    // Subscribed before publishing, so no answer is missed.
    let mut replies = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| BackboneError::nats("subscribing for a writer's answer", e))?;
    headers.insert(HEADER_REPLY, inbox.as_str());
    let mut actions: VecDeque<Action> =
        match publish_stored(js, subject, headers, command.encode()?, "a send").await {
            Ok(ack) => {
                let ack = if ack.duplicate {
                    PubAck::Duplicate
                } else {
                    PubAck::New
                };
                sends.pub_acked(id, ticket, ack).into()
            }
            Err(e) => sends
                .publish_failed(id, ticket, &e.to_string(), Instant::now())
                .into(),
        };
    let mut listening = true;
    loop {
        while let Some(action) = actions.pop_front() {
            match action {
                Action::Write(frame) => return Ok(*frame),
                Action::LookUp(_) => match left_by_writer(stored(), refusals, send).await {
                    Ok(found) => actions.extend(sends.found(id, found, Instant::now())),
                    Err(e) => {
                        tracing::warn!(error = %e, "looking a send's answer up failed");
                        sends.lookup_failed(id, Instant::now());
                    }
                },
                Action::Answered(_) => {}
            }
        }
        let Some(next) = sends.next_tick() else {
            return Err(BackboneError::Unavailable(
                "a send settled without an answer".into(),
            ));
        };
        let next = tokio::time::Instant::from_std(next);
        tokio::select! {
            reply = replies.next(), if listening => match reply {
                Some(reply) => {
                    let reply: CommandReply =
                        serde_json::from_slice(&reply.payload).map_err(BackboneError::encoding)?;
                    sends.answered(id, Instant::now());
                    return Ok(frame_of(reply, send, rewritten));
                }
                // The subscription ended (NATS reconnected without it):
                // the look-ups answer.
                None => listening = false,
            },
            () = tokio::time::sleep_until(next) => actions.extend(sends.tick(Instant::now())),
        }
    }
}

/// What a send's writer left: the message the store holds (`stored`),
/// else the refusal it remembered.
async fn left_by_writer<E: std::fmt::Display>(
    stored: impl Future<Output = Result<Option<Message>, E>>,
    refusals: &Refusals,
    send: &SendCommand,
) -> Result<Found, String> {
    if let Some(message) = stored.await.map_err(|e| e.to_string())? {
        return Ok(Found::Stored(Box::new(message)));
    }
    let key = SendKey {
        tenant: &send.tenant,
        conversation: &send.conversation_id,
        sender: &send.sender,
        client_msg_id: &send.client_msg_id,
    };
    Ok(
        match refusals.find(&key).await.map_err(|e| e.to_string())? {
            Some(refusal) => Found::Refused {
                code: refusal.code,
                message: refusal.message,
            },
            None => Found::Nothing,
        },
    )
}

/// The frame a socket would get for the writer's answer to `send`.
fn frame_of(reply: CommandReply, send: &SendCommand, rewritten: bool) -> ServerFrame {
    match reply {
        CommandReply::Sent { message } if rewritten => ServerFrame::ack_showing_content(&message),
        CommandReply::Sent { message } => ServerFrame::ack(&message),
        CommandReply::Refused {
            code,
            message,
            retry_after_ms,
        } => ServerFrame::error_answering(
            code,
            message,
            Some(request_type::SEND_MESSAGE),
            Some(send.client_msg_id.as_str()),
            Some(send.conversation_id.as_str()),
        )
        .retry_after(retry_after_ms),
        CommandReply::Done { .. } => ServerFrame::error_answering(
            ErrorCode::Internal,
            "a send was answered as another command",
            Some(request_type::SEND_MESSAGE),
            Some(send.client_msg_id.as_str()),
            Some(send.conversation_id.as_str()),
        ),
    }
}
