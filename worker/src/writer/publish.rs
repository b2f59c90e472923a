//! Step 4, publish: a batch's outcomes as events (`ack`s to the sending
//! devices, messages and updates to members, refusals, replies to REST
//! commands), push jobs for offline devices and outbound events; its index
//! changes go to the feed with the batch's ack (`index_feed.rs`).
//!
//! Events are core NATS, at most once: a lost one is recovered by the
//! client's retry (answered from the store) or `pull_backlog`. A crash
//! before the JetStream acks redelivers the batch, which the idempotency
//! keys turn into repeats of the same answers.

use async_nats::HeaderMap;
use bytes::Bytes;
use switchboard_nats::cause;
use switchboard_nats::envelope::{
    Rejection, ack_event, conversation_frame_event, frame_event, is_acked, listen_event,
    message_event, rejection_event,
};
use switchboard_nats::push_jobs::{MessageJob, PreviewJob, message_subject, preview_subject};
use switchboard_nats::records::refusals::{Refusal, SendKey};
use switchboard_nats::search::IndexOp;
use switchboard_nats::subject::conversation_events;
use switchboard_nats::trace;
use switchboard_protocol::{Content, ConversationId, Message, ServerFrame, TenantId, UserId};

use super::apply::Traced;
use crate::ctx::Ctx;
use crate::sequencer::{Outcome, Route};

/// Events of a batch on their way out, in the order they were made:
/// those for users gather per gateway (`Sessions::deliveries`); an event
/// on a conversation's subject, or a reply, first sends what has gathered.
struct OutgoingEvents<'a> {
    ctx: &'a Ctx,
    deliveries: switchboard_nats::sessions::Deliveries<'a>,
}

impl<'a> OutgoingEvents<'a> {
    fn new(ctx: &'a Ctx) -> Self {
        Self {
            ctx,
            deliveries: ctx.sessions.deliveries(),
        }
    }

    async fn flush(&mut self) -> Result<(), async_nats::PublishError> {
        if self.deliveries.is_empty() {
            return Ok(());
        }
        std::mem::replace(&mut self.deliveries, self.ctx.sessions.deliveries())
            .publish()
            .await
    }

    /// A stored message or update for every recipient, or once on the
    /// conversation's subject (fan-out on read), counted.
    async fn fan_out(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        recipients: &[UserId],
        route: Route,
        event: (HeaderMap, Bytes),
    ) -> Result<(), async_nats::PublishError> {
        match route {
            Route::Users => crate::metrics::delivered("users", recipients.len()),
            Route::Conversation => crate::metrics::delivered("conversation", 1),
        }
        match route {
            Route::Users => {
                self.deliveries.add(tenant, recipients, &event);
                Ok(())
            }
            Route::Conversation => {
                self.flush().await?;
                let (headers, payload) = event;
                self.ctx
                    .client
                    .publish_with_headers(
                        conversation_events(tenant, conversation),
                        headers,
                        payload,
                    )
                    .await
            }
        }
    }
}

/// Hands a stored message to the push pipeline, for a tenant with pushes
/// (F15), for the members the sequencer chose by their settings (v1.1).
/// Where a conversation fans out on read only the members a message names
/// are among them: they alone get inbox entries there. At most once: the
/// publish is not awaited for JetStream's ack, and a push is a courtesy,
/// never the message itself.
async fn push_job(ctx: &Ctx, tenant: &TenantId, message: &Message, recipients: &[UserId]) {
    if matches!(message.content, Some(Content::System(_)) | None) {
        return;
    }
    let job = MessageJob {
        tenant: tenant.clone(),
        conversation_id: message.conversation_id.clone(),
        message_id: message.message_id,
        seq: message.seq,
        sender: message.sender_id.clone(),
        recipients: recipients.to_vec(),
        stored_at: message.created_at,
        reaction: None,
    };
    publish_push_job(ctx, &job).await;
}

/// Publishes a push job of a tenant with push configured (at most once,
/// as [`push_job`] says).
async fn publish_push_job(ctx: &Ctx, job: &MessageJob) {
    if ctx
        .tenants
        .get(&job.tenant)
        .is_none_or(|t| t.push.is_none())
    {
        return;
    }
    let Ok(body) = serde_json::to_vec(job) else {
        return;
    };
    if let Err(e) = ctx
        .js
        .publish(message_subject(&job.tenant), body.into())
        .await
    {
        tracing::warn!(error = %e, "a push job was not published");
    }
}

/// Hands a stored text's links to the previews stage (v1.3), at most
/// once as push jobs are; the message id dedupes a replayed batch's.
async fn preview_job(ctx: &Ctx, job: &PreviewJob) {
    let Ok(body) = serde_json::to_vec(job) else {
        return;
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        "Nats-Msg-Id",
        format!("preview-{}", job.message_id).as_str(),
    );
    if let Err(e) = ctx
        .js
        .publish_with_headers(preview_subject(&job.tenant), headers, body.into())
        .await
    {
        tracing::warn!(error = %e, "a link preview job was not published");
    }
}

/// Publishes a batch's outcomes, each event with the trace context of
/// the command it comes from, if traced, and stores its outbound events;
/// returns its index changes, which the batch's ack follows.
pub(super) async fn publish(ctx: &Ctx, outcomes: Vec<Traced>) -> Vec<IndexOp> {
    let outbound =
        super::webhook_events::events_of(&ctx.tenants, ctx.config.event_stream, &outcomes, || {
            ctx.ids.next_id().ok().map(|id| id.to_string())
        });
    let indexed = crate::writer::index_feed::ops_of(outcomes.iter().map(|(o, _)| o));
    // Before the events: whoever hears of a change finds it in the log.
    audit_entries(ctx, &outcomes).await;
    events(ctx, outcomes).await;
    publish_outbound(ctx, outbound).await;
    indexed
}

/// Outbound events (v1.2) on `SB_EVENTS`, stored before the commands are
/// acked. One that is not stored is lost to the webhooks (logged and
/// counted): the commit stands and the commands are acked all the same.
async fn publish_outbound(ctx: &Ctx, outbound: Vec<switchboard_protocol::webhooks::WebhookEvent>) {
    let mut stored = Vec::with_capacity(outbound.len());
    for event in &outbound {
        match switchboard_nats::events::publish(&ctx.js, event).await {
            Ok(Some(ack)) => stored.push(ack),
            // About a message that expired already: never stored.
            Ok(None) => {}
            Err(e) => {
                crate::metrics::event_lost();
                tracing::warn!(error = %e, id = %event.id, "an outbound event was not published");
            }
        }
    }
    for ack in stored {
        if let Err(e) = ack.await {
            crate::metrics::event_lost();
            tracing::warn!(error = %e, "an outbound event was not stored");
        }
    }
}

/// The batch's moderation changes (v1.3), each stored in its tenant's
/// audit log before the commands are acked; one that is not stored is
/// logged and counted as a lost event (a crash before this point replays
/// the command, which records it then).
async fn audit_entries(ctx: &Ctx, outcomes: &[Traced]) {
    for (outcome, _) in outcomes {
        if let Outcome::Audited { tenant, entry, id } = outcome {
            let recorded =
                switchboard_nats::audit::record_once(&ctx.js, tenant, (**entry).clone(), Some(id))
                    .await;
            if let Err(e) = recorded {
                crate::metrics::event_lost();
                tracing::warn!(%tenant, %id, error = %e, "a moderation change was not audited");
            }
        }
    }
}

async fn events(ctx: &Ctx, outcomes: Vec<Traced>) {
    let mut out = OutgoingEvents::new(ctx);
    for (outcome, traceparent) in outcomes {
        let traced = |mut event: (HeaderMap, Bytes)| {
            if let Some(t) = &traceparent {
                event.0.insert(trace::HEADER_TRACEPARENT, t.as_str());
            }
            event
        };
        let result = match outcome {
            Outcome::Deliver {
                tenant,
                message,
                recipients,
                route,
                push_to,
            } => {
                // Routed to its sender alone when shadow; they never see
                // the flag.
                let message = message.for_client();
                tracing::debug!(
                    %tenant,
                    conversation = %message.conversation_id,
                    seq = message.seq,
                    message_id = %message.message_id,
                    recipients = recipients.len(),
                    ?route,
                    "message stored; fanning out"
                );
                if !push_to.is_empty() {
                    push_job(ctx, &tenant, &message, &push_to).await;
                }
                match message_event(&message).map(traced) {
                    Ok(event) => {
                        let fanned = out
                            .fan_out(&tenant, &message.conversation_id, &recipients, route, event)
                            .await
                            .map_err(cause);
                        // The sending device's `ack`, through the session
                        // registry whatever the conversation's route.
                        if is_acked(&message) {
                            let ack = traced(ack_event(&message));
                            out.deliveries.add(&tenant, [&message.sender_id], &ack);
                        }
                        fanned
                    }
                    Err(e) => Err(cause(e)),
                }
            }
            Outcome::Answer { tenant, message } => {
                let message = message.for_client();
                let ack = traced(ack_event(&message));
                out.deliveries.add(&tenant, [&message.sender_id], &ack);
                Ok(())
            }
            Outcome::Update {
                tenant,
                message,
                recipients,
                route,
            } => {
                tracing::debug!(
                    %tenant,
                    conversation = %message.conversation_id,
                    seq = message.seq,
                    deleted = message.deleted_at.is_some(),
                    "message updated"
                );
                let conversation = message.conversation_id.clone();
                let message = message.for_client();
                let event = traced(frame_event(&ServerFrame::MessageUpdated { message }));
                out.fan_out(&tenant, &conversation, &recipients, route, event)
                    .await
                    .map_err(cause)
            }
            Outcome::Listen {
                tenant,
                conversation_id,
                users,
                listen,
            } => match listen_event(&conversation_id, listen).map(traced) {
                Ok(event) => {
                    out.deliveries.add(&tenant, &users, &event);
                    Ok(())
                }
                Err(e) => Err(cause(e)),
            },
            Outcome::Reject {
                tenant,
                sender,
                rejection,
            } => {
                remember_refusal(ctx, &tenant, &sender, &rejection).await;
                match rejection_event(&rejection).map(traced) {
                    Ok(event) => {
                        out.deliveries.add(&tenant, [&sender], &event);
                        Ok(())
                    }
                    Err(e) => Err(cause(e)),
                }
            }
            Outcome::Event {
                tenant,
                conversation_id,
                frame,
                recipients,
                route,
            } => {
                let event = traced(match route {
                    Route::Users => frame_event(&frame),
                    Route::Conversation => conversation_frame_event(&frame),
                });
                out.fan_out(&tenant, &conversation_id, &recipients, route, event)
                    .await
                    .map_err(cause)
            }
            Outcome::Unfurl(job) => {
                preview_job(ctx, &job).await;
                Ok(())
            }
            // Only for webhooks (`webhook_events.rs`), and the audit log
            // (above).
            Outcome::Reported { .. } | Outcome::Audited { .. } => Ok(()),
            Outcome::ReactionPush {
                tenant,
                conversation_id,
                message_id,
                seq,
                author,
                by,
                emoji,
                at,
            } => {
                let job = MessageJob {
                    tenant,
                    conversation_id,
                    message_id,
                    seq,
                    sender: by,
                    recipients: vec![author],
                    stored_at: at,
                    reaction: Some(emoji),
                };
                publish_push_job(ctx, &job).await;
                Ok(())
            }
            Outcome::Reply { subject, reply } => match serde_json::to_vec(&reply) {
                Ok(body) => match out.flush().await {
                    Ok(()) => ctx
                        .client
                        .publish(subject, body.into())
                        .await
                        .map_err(cause),
                    Err(e) => Err(cause(e)),
                },
                Err(e) => Err(cause(e)),
            },
        };
        if let Err(e) = result {
            // Events are at most once; clients recover by retry and backlog.
            tracing::warn!(error = %e, "publishing an event failed");
        }
    }
    if let Err(e) = out.flush().await {
        tracing::warn!(error = %e, "publishing events failed");
    }
}

/// Keeps a refused send's answer for resends of it (`sb_refused`). Best
/// effort: without it, a resend waits for an answer that does not come,
/// as before, and the client's own timeout applies.
pub(crate) async fn remember_refusal(
    ctx: &Ctx,
    tenant: &TenantId,
    sender: &UserId,
    rejection: &Rejection,
) {
    let Some(client_msg_id) = &rejection.client_msg_id else {
        return;
    };
    let send = SendKey {
        tenant,
        conversation: &rejection.conversation_id,
        sender,
        client_msg_id,
    };
    let refusal = Refusal {
        code: rejection.code,
        message: rejection.message.clone(),
    };
    if let Err(e) = ctx.refusals.record(&send, &refusal).await {
        tracing::warn!(error = %e, "a refused send was not remembered; a resend of it gets no answer");
    }
}
