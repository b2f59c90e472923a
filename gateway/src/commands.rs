//! Writes as commands: every change to a conversation is published to the
//! conversation's ingest partition and applied by its writer.

use std::time::Duration;

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use futures::StreamExt;
use switchboard_nats::BackboneError;
use switchboard_nats::commands::{self, NoAnswer};
use switchboard_nats::envelope::{Actor, Command, CommandReply, HEADER_REPLY};
use switchboard_nats::records::refusals::{Refusals, SendKey};
use switchboard_nats::subject::partition_of;
use switchboard_nats::trace;
use switchboard_protocol::{ConversationId, ErrorCode, Timestamp};
use switchboard_store::{SentKey, Store, StoreError};

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

    /// Runs a send over REST, answered as every waiting caller's send is
    /// (`switchboard_nats::commands::answer`): by its writer on a reply
    /// subject, or, for a repeat JetStream dropped or an answer not in
    /// time, from the store and the refusals writers remember, as a
    /// socket's send would be.
    pub(crate) async fn run_send(
        &self,
        command: &Command,
        sent: SentKey,
    ) -> Result<CommandReply, ApiError> {
        let deadline = tokio::time::Instant::now() + self.config.command_timeout;
        let look_up = || written_answer(&*self.store, &self.refusals, &sent);
        commands::answer(
            &self.client,
            &self.js,
            command,
            self.config.partitions,
            deadline,
            look_up,
        )
        .await
        .map_err(|e| match e {
            NoAnswer::Backbone(e) => e.into(),
            NoAnswer::LookUp(e) => e.into(),
            NoAnswer::NotYet => ApiError::new(
                ErrorCode::Unavailable,
                "the send is stored but not answered yet: retry with the same client_msg_id",
            ),
        })
    }
}

/// The answer a send's writer left: the stored message, or the refusal
/// it remembered (a failed read of those is no answer yet).
async fn written_answer(
    store: &dyn Store,
    refusals: &Refusals,
    sent: &SentKey,
) -> Result<Option<CommandReply>, StoreError> {
    if let Some(message) = store.find_sent(vec![sent.clone()]).await?.pop().flatten() {
        return Ok(Some(CommandReply::Sent {
            message: Box::new(message),
        }));
    }
    let send = SendKey {
        tenant: &sent.tenant,
        conversation: &sent.conversation_id,
        sender: &sent.sender,
        client_msg_id: &sent.client_msg_id,
    };
    match refusals.find(&send).await {
        Ok(refusal) => Ok(refusal.map(|r| CommandReply::Refused {
            code: r.code,
            message: r.message,
            retry_after_ms: None,
        })),
        Err(e) => {
            tracing::warn!(error = %e, "reading sb_refused failed");
            Ok(None)
        }
    }
}

fn humanize(d: Duration) -> String {
    format!("{}s", d.as_secs_f32())
}
