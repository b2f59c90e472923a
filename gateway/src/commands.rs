//! Writes as commands: every change to a conversation is published to the
//! conversation's ingest partition and applied by its writer.

use std::time::Duration;

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use futures::StreamExt;
use switchboard_nats::envelope::{Actor, Command, CommandReply, HEADER_REPLY};
use switchboard_nats::subject::partition_of;
use switchboard_nats::trace;
use switchboard_protocol::{ConversationId, ErrorCode, Timestamp};

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

    /// Runs a REST command and waits for its writer's answer.
    pub(crate) async fn run_command(&self, command: Command) -> Result<CommandReply, ApiError> {
        let unavailable = |what: String| ApiError::new(ErrorCode::Unavailable, what);
        let inbox = self.client.new_inbox();
        let mut replies = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|e| unavailable(format!("backbone: {e}")))?;
        let stored = self.publish_command(&command, Some(&inbox)).await?;
        stored
            .await
            .map_err(|e| unavailable(format!("backbone did not store the command: {e}")))?;
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

fn humanize(d: Duration) -> String {
    format!("{}s", d.as_secs_f32())
}
