//! A connection's writes: sends, edits and deletes, checked here and
//! published as commands for their conversation's writer.

use serde_json::{Map, Value};
use switchboard_nats::envelope::{Command, ReactCommand, SendCommand, UpdateCommand, VoteCommand};
use switchboard_nats::trace;
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::poll::MAX_OPTIONS;
use switchboard_protocol::reaction::check_emoji;
use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, ErrorCode, MessageId, ReactAction, ServerFrame, Timestamp,
};
use switchboard_store::StoreError;
use tracing::Instrument;

use super::Connection;
use crate::error::ApiError;
use crate::ingest::{NotStored, Stored};
use crate::outbox::Outbound;
use crate::scheduling::ToSchedule;
use switchboard_nats::answers::PubAck;

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
        options: SendOptions,
        frame_bytes: usize,
    ) {
        let refuse = |e: ApiError| {
            Outbound::frame(&e.answering(
                request,
                Some(client_msg_id.as_str()),
                Some(conversation_id.as_str()),
            ))
        };
        if let Err(e) = self.admit_message(None) {
            self.reply(refuse(e));
            return;
        }
        let screened = self
            .gw
            .screen(&self.id, &conversation_id, content, &options)
            .await;
        let (content, rewritten) = match screened {
            Ok(moderated) => (moderated.content, moderated.rewritten),
            Err(e) => {
                self.reply(refuse(e));
                return;
            }
        };
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
            options,
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

    /// A send with `send_at` (v1.2): admitted at the connection's message
    /// rate, then kept until its time (`scheduling.rs`); its `ack` says
    /// `"scheduled"`.
    pub(super) async fn schedule(&mut self, request: &'static str, send: ToSchedule) {
        let (client_msg_id, conversation_id, send_at) = (
            send.client_msg_id.clone(),
            send.conversation.clone(),
            send.send_at,
        );
        let answer = match self.admit_message(None) {
            Ok(()) => self.gw.schedule_send(&self.id, send).await,
            Err(e) => Err(e),
        };
        let frame = match answer {
            Ok(scheduled_id) => Outbound::frame(&ServerFrame::scheduled(
                client_msg_id,
                conversation_id,
                scheduled_id,
                send_at,
            )),
            Err(e) => Outbound::frame(&e.answering(
                request,
                Some(client_msg_id.as_str()),
                Some(conversation_id.as_str()),
            )),
        };
        self.reply(frame);
    }

    /// A reaction added or removed: checked here for its emoji and the
    /// connection's message rate, then a command for the writer, which
    /// answers every member with a `reaction` (or this device with an
    /// `error` naming the message).
    pub(super) async fn react(
        &mut self,
        request: &'static str,
        conversation_id: ConversationId,
        message_id: MessageId,
        emoji: String,
        action: ReactAction,
    ) {
        let refuse = |e: ApiError| {
            Outbound::frame(
                &e.answering(request, None, Some(conversation_id.as_str()))
                    .about_message(message_id),
            )
        };
        if let Err(e) = check_emoji(&emoji) {
            self.reply(refuse(ApiError::new(
                ErrorCode::InvalidFrame,
                e.to_string(),
            )));
            return;
        }
        if let Err(e) = self.admit_message(None) {
            self.reply(refuse(e));
            return;
        }
        // Adding one is moderated (a tenant may refuse an emoji);
        // taking one back never is.
        if action == ReactAction::Add
            && let Err(e) = self
                .gw
                .moderate_reaction(&self.id, &conversation_id, message_id, &emoji)
                .await
        {
            self.reply(refuse(e));
            return;
        }
        let by = match crate::commands::actor(&self.gw, &self.id, conversation_id.clone()) {
            Ok(by) => by,
            Err(e) => {
                self.reply(refuse(e));
                return;
            }
        };
        let command = Command::React(ReactCommand {
            by,
            message_id,
            emoji,
            action,
        });
        self.publish_answered_by_writer(
            command,
            "backbone did not store the reaction; retry",
            refuse,
        )
        .await;
    }

    /// A vote in a poll (v1.3): bounded here, counted against the
    /// connection's message rate, then a command for the poll's writer,
    /// which checks it against the poll and answers every member with a
    /// `poll_updated` (or this device with an `error` naming the message).
    pub(super) async fn vote(
        &mut self,
        request: &'static str,
        conversation_id: ConversationId,
        message_id: MessageId,
        option_ids: Vec<String>,
    ) {
        let refuse = |e: ApiError| {
            Outbound::frame(
                &e.answering(request, None, Some(conversation_id.as_str()))
                    .about_message(message_id),
            )
        };
        if option_ids.len() > MAX_OPTIONS {
            self.reply(refuse(ApiError::new(
                ErrorCode::InvalidFrame,
                format!("a vote names at most {MAX_OPTIONS} options"),
            )));
            return;
        }
        if let Err(e) = self.admit_message(None) {
            self.reply(refuse(e));
            return;
        }
        let by = match crate::commands::actor(&self.gw, &self.id, conversation_id.clone()) {
            Ok(by) => by,
            Err(e) => {
                self.reply(refuse(e));
                return;
            }
        };
        let command = Command::Vote(VoteCommand {
            by,
            message_id,
            option_ids,
        });
        self.publish_answered_by_writer(command, "backbone did not store the vote; retry", refuse)
            .await;
    }

    /// A thread read mark (`ack_read` with `thread_id`).
    pub(super) fn thread_read(
        &mut self,
        request: &'static str,
        conversation_id: ConversationId,
        root: MessageId,
        seq: u64,
    ) {
        let (gw, id, tx) = (self.gw.clone(), self.id.clone(), self.tx.clone());
        tokio::spawn(async move {
            if let Err(e) = gw
                .store
                .ack_thread_read(&id.tenant, &id.user, &conversation_id, root, seq)
                .await
            {
                // The store cannot tell a missing conversation from a
                // missing root here: name both.
                let e = match e {
                    StoreError::NotFound => ApiError::new(
                        ErrorCode::NotFound,
                        format!("no thread root {root} in conversation {conversation_id}"),
                    ),
                    e => ApiError::from(e),
                };
                let frame = e.answering(request, None, Some(conversation_id.as_str()));
                let _ = tx.send(Outbound::frame(&frame.about_message(root))).await;
            }
        });
    }

    /// Publishes a command whose answer comes from its writer. If it
    /// cannot be published, or JetStream did not take it, this device
    /// gets `refuse` of the error (`unavailable` with `unstored`).
    async fn publish_answered_by_writer(
        &mut self,
        command: Command,
        unstored: &'static str,
        refuse: impl Fn(ApiError) -> Outbound,
    ) {
        match self.gw.publish_command(&command, None).await {
            Ok(stored) => {
                let tx = self.tx.clone();
                let unstored = refuse(ApiError::new(ErrorCode::Unavailable, unstored));
                tokio::spawn(async move {
                    if stored.await.is_err() {
                        let _ = tx.send(unstored).await;
                    }
                });
            }
            Err(e) => self.reply(refuse(e)),
        }
    }

    /// An edit (with content, and `custom` fields to replace, v1.3) or
    /// a deletion (`None`). The writer answers every member with
    /// `message_updated`, or this device with an `error`.
    pub(super) async fn update(
        &mut self,
        request: &'static str,
        conversation_id: ConversationId,
        message_id: MessageId,
        edit: Option<(Content, Option<Map<String, Value>>)>,
    ) {
        let refuse = |e: ApiError| {
            Outbound::frame(
                &e.answering(request, None, Some(conversation_id.as_str()))
                    .about_message(message_id),
            )
        };
        let (content, custom) = match edit {
            Some((content, custom)) => (Some(content), custom),
            None => (None, None),
        };
        if let Err(e) = self.admit_message(content.as_ref()) {
            self.reply(refuse(e));
            return;
        }
        // An edit is new content: it is screened like a send (its media
        // checked after moderation: what is checked is what is stored),
        // its `custom` fields with it.
        let options = SendOptions {
            custom,
            ..SendOptions::default()
        };
        let content = match content {
            Some(c) => match self
                .gw
                .screen(&self.id, &conversation_id, c, &options)
                .await
            {
                Ok(moderated) => Some(moderated.content),
                Err(e) => {
                    self.reply(refuse(e));
                    return;
                }
            },
            None => None,
        };
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
            custom: options.custom,
        };
        let command = if content.is_some() {
            Command::Edit(update)
        } else {
            Command::Delete(update)
        };
        self.publish_answered_by_writer(
            command,
            "backbone did not store the change; retry",
            refuse,
        )
        .await;
    }
}
