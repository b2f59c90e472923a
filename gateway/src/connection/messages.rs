//! A connection's writes: sends, edits and deletes, checked here and
//! published as commands for their conversation's writer.

use switchboard_nats::envelope::{Command, SendCommand, UpdateCommand};
use switchboard_nats::trace;
use switchboard_protocol::{ClientMsgId, Content, ConversationId, ErrorCode, MessageId, Timestamp};
use tracing::Instrument;

use super::Connection;
use crate::error::ApiError;
use crate::ingest::{NotStored, Stored};
use crate::outbox::Outbound;
use crate::sends::PubAck;

impl Connection {
    /// A send: admitted (content, rates), moderated, its media checked,
    /// taken by the connection's [`Answering`](crate::answering::Answering)
    /// and queued for its partition. Its answer comes from its writer, or
    /// the store, or the publish that failed (`answering.rs`).
    pub(super) async fn send_message(
        &mut self,
        request: &'static str,
        client_msg_id: ClientMsgId,
        conversation_id: ConversationId,
        content: Content,
        frame_bytes: usize,
    ) {
        let refuse = |e: ApiError| {
            Outbound::frame(&e.answering(
                request,
                Some(client_msg_id.as_str()),
                Some(conversation_id.as_str()),
            ))
        };
        if let Err(e) = self.admit_message(Some(&content)) {
            self.reply(refuse(e));
            return;
        }
        let (content, rewritten) = match self.gw.moderate(&self.id, &conversation_id, content).await
        {
            Ok(moderated) => (moderated.content, moderated.rewritten),
            Err(e) => {
                self.reply(refuse(e));
                return;
            }
        };
        // After moderation: what is checked is what will be stored.
        if let Some(media) = content.media()
            && let Err(e) = self.gw.check_media(&self.id, media).await
        {
            self.reply(refuse(e));
            return;
        }
        let ticket = match self
            .answering
            .accept(&client_msg_id, &conversation_id, frame_bytes)
        {
            Ok(ticket) => ticket,
            Err(refusal) => {
                self.reply(refuse(ApiError::new(refusal.code, refusal.message)));
                return;
            }
        };
        if rewritten {
            self.answering.show_stored(&client_msg_id, &content);
        }
        let command = Command::Send(SendCommand {
            tenant: self.id.tenant.clone(),
            conversation_id: conversation_id.clone(),
            sender: self.id.user.clone(),
            device: self.id.device.clone(),
            client_msg_id: client_msg_id.clone(),
            content,
            received_at: Timestamp::now(),
        });
        tracing::debug!(%conversation_id, %client_msg_id, "send accepted");
        let pub_ack = match self.gw.submit_send(command) {
            Ok(pub_ack) => pub_ack,
            Err(e) => {
                self.answering
                    .publish_failed(&client_msg_id, ticket, &e.message);
                return;
            }
        };
        crate::metrics::send_accepted();
        self.marks.sent_to(&conversation_id);
        let answering = self.answering.clone();
        // A task per send, not a future polled by this connection's loop:
        // the connection goes on reading while the send waits for the
        // backbone. Its trace span, when traced, lasts until then;
        // untraced, the task carries no span.
        let traced = if trace::enabled() {
            tracing::Span::current()
        } else {
            tracing::Span::none()
        };
        tokio::spawn(
            async move {
                match pub_ack.await.unwrap_or(Err(NotStored::Closed)) {
                    Ok(Stored::New) => answering.pub_acked(&client_msg_id, ticket, PubAck::New),
                    Ok(Stored::Duplicate) => {
                        answering.pub_acked(&client_msg_id, ticket, PubAck::Duplicate)
                    }
                    Err(e) => answering.publish_failed(&client_msg_id, ticket, &e.to_string()),
                }
            }
            .instrument(traced),
        );
    }

    /// An edit (with content) or a deletion. The writer answers every
    /// member with `message_updated`, or this device with an `error`.
    pub(super) async fn update(
        &mut self,
        request: &'static str,
        conversation_id: ConversationId,
        message_id: MessageId,
        content: Option<Content>,
    ) {
        let refuse = |e: ApiError| {
            Outbound::frame(&e.answering(request, None, Some(conversation_id.as_str())))
        };
        if let Err(e) = self.admit_message(content.as_ref()) {
            self.reply(refuse(e));
            return;
        }
        // An edit is new content: it is moderated like a send.
        let content = match content {
            Some(c) => match self.gw.moderate(&self.id, &conversation_id, c).await {
                Ok(moderated) => Some(moderated.content),
                Err(e) => {
                    self.reply(refuse(e));
                    return;
                }
            },
            None => None,
        };
        // After moderation: what is checked is what will be stored.
        if let Some(media) = content.as_ref().and_then(Content::media)
            && let Err(e) = self.gw.check_media(&self.id, media).await
        {
            self.reply(refuse(e));
            return;
        }
        let command_id = match self.gw.ids.next_id() {
            Ok(id) => id,
            Err(e) => {
                self.reply(refuse(e.into()));
                return;
            }
        };
        let update = UpdateCommand {
            command_id,
            tenant: self.id.tenant.clone(),
            conversation_id: conversation_id.clone(),
            message_id,
            actor: self.id.user.clone(),
            device: self.id.device.clone(),
            actor_is_admin: self.id.admin,
            content: content.clone(),
        };
        let command = if content.is_some() {
            Command::Edit(update)
        } else {
            Command::Delete(update)
        };
        match self.gw.publish_command(&command, None).await {
            Ok(stored) => {
                let tx = self.tx.clone();
                let unstored = refuse(ApiError::new(
                    ErrorCode::Unavailable,
                    "backbone did not store the change; retry",
                ));
                tokio::spawn(async move {
                    if stored.await.is_err() {
                        let _ = tx.send(unstored).await;
                    }
                });
            }
            Err(e) => self.reply(refuse(e)),
        }
    }
}
