//! Writes as commands: every change to a conversation is published to the
//! conversation's ingest partition and applied by its writer.

use std::time::Duration;

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use futures::StreamExt;
use switchboard_nats::BackboneError;
use switchboard_nats::commands::{self, Backbone, Wait};
use switchboard_nats::envelope::{Actor, Command, CommandReply, HEADER_REPLY, SendCommand};
use switchboard_nats::subject::partition_of;
use switchboard_nats::trace;
use switchboard_protocol::{Content, ConversationId, ErrorCode, ServerFrame, Timestamp};
use switchboard_store::{SentKey, StoreError};

use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::ingest::PubAckWait;

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
            commands::addressed(command, self.config.partitions, traceparent.as_deref());
        let payload = command.encode()?;
        if let Some(reply) = reply_to {
            headers.insert(HEADER_REPLY, reply);
        }
        let publish = PublishMessage::build().payload(payload).headers(headers);
        self.js
            .send_publish(subject, publish)
            .await
            .map_err(|e| ApiError::from(BackboneError::nats("publishing a command", e)))
    }

    /// Queues a send for its partition (`ingest.rs`). Returns once it is
    /// queued, so sends of one connection keep their order; the wait
    /// resolves when JetStream has stored it. Both carry the trace
    /// context of the span they are called in, when traced.
    pub(crate) fn submit_send(&self, command: Command) -> Result<PubAckWait, ApiError> {
        let traceparent = trace::traceparent(&tracing::Span::current());
        let partition = partition_of(
            command.tenant(),
            command.conversation_id(),
            self.config.partitions,
        );
        self.ingest
            .send(partition, command, traceparent)
            .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))
    }

    /// Runs a REST command and waits for its writer's answer.
    pub(crate) async fn run_command(&self, command: Command) -> Result<CommandReply, ApiError> {
        let unavailable = |what: String| ApiError::new(ErrorCode::Unavailable, what);
        let inbox = self.client.new_inbox();
        // Subscribed before publishing, so no answer is missed.
        let mut replies = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|e| ApiError::from(BackboneError::nats("subscribing for an answer", e)))?;
        let stored = self.publish_command(&command, Some(&inbox)).await?;
        stored
            .await
            .map_err(|e| ApiError::from(BackboneError::nats("storing a command", e)))?;
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

    /// Runs a send over REST and answers it as a socket's send would be
    /// answered, by the same state machine
    /// (`switchboard_nats::commands::answer`): the writer's answer on a
    /// reply subject, or, for a repeat JetStream dropped or an answer
    /// overdue, what the writer left in the store and `sb_refused`;
    /// `unavailable` after `command_timeout`. The frame is the `ack` or
    /// `error` a socket would get.
    pub(crate) async fn run_send(
        &self,
        send: &SendCommand,
        stored_as: Option<Content>,
    ) -> Result<ServerFrame, ApiError> {
        let sent = SentKey {
            tenant: send.tenant.clone(),
            conversation_id: send.conversation_id.clone(),
            sender: send.sender.clone(),
            client_msg_id: send.client_msg_id.clone(),
        };
        let wait = Wait {
            overdue: LOOK_UP_AFTER,
            give_up: self.config.command_timeout,
        };
        let store = &*self.store;
        let stored = || async {
            Ok::<_, StoreError>(store.find_sent(vec![sent.clone()]).await?.pop().flatten())
        };
        let backbone = Backbone {
            client: &self.client,
            js: &self.js,
            partitions: self.config.partitions,
            refusals: &self.refusals,
        };
        let frame = commands::answer(&backbone, send, wait, stored_as, stored).await?;
        Ok(frame)
    }
}

/// How long a REST send waits for its writer's answer before it looks
/// in what the writer left, and then between look-ups.
const LOOK_UP_AFTER: Duration = Duration::from_secs(1);

fn humanize(d: Duration) -> String {
    format!("{}s", d.as_secs_f32())
}
