//! Writes as commands: every change to a conversation is published to the
//! conversation's ingest partition and applied by its writer.

use std::time::Duration;

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use futures::StreamExt;
use switchboard_nats::envelope::{Actor, Command, CommandReply, HEADER_REPLY};
use switchboard_nats::records::refusals::SendKey;
use switchboard_nats::subject::partition_of;
use switchboard_nats::trace;
use switchboard_protocol::{ConversationId, ErrorCode, Timestamp};
use switchboard_store::SentKey;

use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::ingest::{self, PubAckWait};

/// Who does a v1.1 command, as the token says.
pub(crate) fn actor(
    gw: &Gateway,
    id: &Identity,
    conversation: ConversationId,
) -> Result<Actor, ApiError> {
    Ok(Actor {
        command_id: gw.ids.next_id()?,
        tenant: id.tenant.clone(),
        conversation_id: conversation,
        actor: id.user.clone(),
        device: id.device.clone(),
        actor_is_admin: id.admin,
        at: Timestamp::now(),
    })
}

impl Gateway {
    /// Publishes a command to JetStream, alone (sends go through
    /// [`Gateway::submit_send`]). Returns once the client has queued it,
    /// so commands of one connection keep their order; the returned
    /// future resolves when JetStream has stored it.
    pub(crate) async fn publish_command(
        &self,
        command: &Command,
        reply_to: Option<&str>,
    ) -> Result<PublishAckFuture, ApiError> {
        let traceparent = trace::traceparent(&tracing::Span::current());
        let (subject, mut headers) =
            ingest::alone(self.partition_of(command), command, traceparent.as_deref());
        let payload = command
            .encode()
            .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
        if let Some(reply) = reply_to {
            headers.insert(HEADER_REPLY, reply);
        }
        let publish = PublishMessage::build().payload(payload).headers(headers);
        self.js
            .send_publish(subject, publish)
            .await
            .map_err(|e| ApiError::new(ErrorCode::Unavailable, format!("backbone: {e}")))
    }

    /// Queues a send for its partition (`ingest.rs`). Returns once it is
    /// queued, so sends of one connection keep their order; the wait
    /// resolves when JetStream has stored it. Both carry the trace
    /// context of the span they are called in, when traced.
    pub(crate) fn submit_send(&self, command: Command) -> Result<PubAckWait, ApiError> {
        let traceparent = trace::traceparent(&tracing::Span::current());
        self.ingest
            .send(self.partition_of(&command), command, traceparent)
            .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))
    }

    /// The ingest partition of the command's conversation.
    fn partition_of(&self, command: &Command) -> u16 {
        partition_of(
            command.tenant(),
            command.conversation_id(),
            self.config.partitions,
        )
    }

    /// Publishes `command` with a reply subject its writer answers on:
    /// the subscription to it (made first, so no answer is missed) and
    /// JetStream's ack. `what` names the command in errors.
    async fn publish_for_reply(
        &self,
        command: &Command,
        what: &str,
    ) -> Result<
        (
            async_nats::Subscriber,
            async_nats::jetstream::publish::PublishAck,
        ),
        ApiError,
    > {
        let unavailable = |why: String| ApiError::new(ErrorCode::Unavailable, why);
        let inbox = self.client.new_inbox();
        let replies = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|e| unavailable(format!("backbone: {e}")))?;
        let stored = self.publish_command(command, Some(&inbox)).await?;
        let ack = stored
            .await
            .map_err(|e| unavailable(format!("backbone did not store the {what}: {e}")))?;
        Ok((replies, ack))
    }

    /// Runs a REST command and waits for its writer's answer.
    pub(crate) async fn run_command(&self, command: Command) -> Result<CommandReply, ApiError> {
        let unavailable = |what: String| ApiError::new(ErrorCode::Unavailable, what);
        let (mut replies, _) = self.publish_for_reply(&command, "command").await?;
        let wait = self.config.command_timeout;
        match tokio::time::timeout(wait, replies.next()).await {
            Ok(Some(msg)) => serde_json::from_slice(&msg.payload)
                .map_err(|e| ApiError::new(ErrorCode::Internal, format!("bad command reply: {e}"))),
            Ok(None) => Err(unavailable("backbone connection closed".into())),
            Err(_) => Err(unavailable(format!(
                "no writer answered within {}; the change is queued and will apply",
                humanize(wait)
            ))),
        }
    }
}

impl Gateway {
    /// Runs a send over REST. It is published as a socket's is (its
    /// dedupe id makes a retry within the window a repeat that JetStream
    /// drops), with a reply subject its writer answers on: the message
    /// stored (now or before), or the refusal. A repeat JetStream dropped,
    /// or an answer that does not come in time, is looked up in the store
    /// and in the refusals writers remember, as a socket's send would be.
    pub(crate) async fn run_send(
        &self,
        command: &Command,
        sent: SentKey,
    ) -> Result<CommandReply, ApiError> {
        let deadline = tokio::time::Instant::now() + self.config.command_timeout;
        let (mut replies, ack) = self.publish_for_reply(command, "send").await?;
        if !ack.duplicate
            && let Ok(Some(msg)) = tokio::time::timeout_at(deadline, replies.next()).await
        {
            return serde_json::from_slice(&msg.payload)
                .map_err(|e| ApiError::new(ErrorCode::Internal, format!("bad send reply: {e}")));
        }
        drop(replies);
        self.look_up_send(&sent, deadline).await
    }

    /// The answer to a send from what its writer left: the stored message
    /// or a remembered refusal, asked for until `deadline` (a repeat may
    /// arrive while the original is still on its way).
    async fn look_up_send(
        &self,
        sent: &SentKey,
        deadline: tokio::time::Instant,
    ) -> Result<CommandReply, ApiError> {
        let send = SendKey {
            tenant: &sent.tenant,
            conversation: &sent.conversation_id,
            sender: &sent.sender,
            client_msg_id: &sent.client_msg_id,
        };
        loop {
            if let Some(message) = self
                .store
                .find_sent(vec![sent.clone()])
                .await?
                .pop()
                .flatten()
            {
                return Ok(CommandReply::Sent {
                    message: Box::new(message),
                });
            }
            match self.refusals.find(&send).await {
                Ok(Some(refusal)) => {
                    return Ok(CommandReply::Refused {
                        code: refusal.code,
                        message: refusal.message,
                        retry_after_ms: None,
                    });
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "reading sb_refused failed"),
            }
            if tokio::time::Instant::now() + LOOK_UP_AGAIN >= deadline {
                return Err(ApiError::new(
                    ErrorCode::Unavailable,
                    "the send is stored but not answered yet: retry with the same client_msg_id",
                ));
            }
            tokio::time::sleep(LOOK_UP_AGAIN).await;
        }
    }
}

/// How long a REST send waits before it looks its message up again.
const LOOK_UP_AGAIN: Duration = Duration::from_millis(50);

fn humanize(d: Duration) -> String {
    format!("{}s", d.as_secs_f32())
}
