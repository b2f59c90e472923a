//! One partition's writer task: consume the partition's commands in
//! stream order, sequence them, commit them in one store commit, publish
//! the outcomes, and only then ack them on JetStream.
//!
//! Order of effects per batch, and why:
//! 1. commit to the store (durable): the point after which a send is acked;
//! 2. publish `ack`s, fan-out and replies (core NATS, at most once; a lost
//!    event is recovered by the client's retry or `pull_backlog`);
//! 3. ack every command of the batch on JetStream (work-queue streams take
//!    explicit acks only), which removes them from the stream: a crash
//!    before this redelivers the batch, which the idempotency keys turn
//!    into repeats of the same answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream;
use async_nats::jetstream::consumer::PullConsumer;
use bytes::Bytes;
use futures::StreamExt;
use switchboard_backbone::definitions::{INGEST_STREAM, writer_consumer, writer_consumer_name};
use switchboard_backbone::envelope::{
    Command, HEADER_REPLY, frame_event, listen_event, message_event, rejection_event,
};
use switchboard_backbone::push_jobs::{MessageJob, message_subject};
use switchboard_backbone::subject::{conversation_events, user_events};
use switchboard_protocol::{Content, ConversationId, Message, ServerFrame, TenantId, UserId};
use switchboard_store::StoreError;
use tokio::sync::watch;
use tracing::Instrument;

use crate::policy::Policies;
use crate::sequencer::{Incoming, Outcome, Route, SequenceError, Sequencer};
use crate::{Ctx, WorkerError, archive};

/// Runs until `stop` turns true, the lease stops being valid, or the
/// consumer fails (the owner then restarts the task).
pub(crate) async fn run_partition(
    ctx: Arc<Ctx>,
    partition: u16,
    valid_until: watch::Receiver<Instant>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), WorkerError> {
    let stream = ctx
        .js
        .get_stream(INGEST_STREAM)
        .await
        .map_err(|e| WorkerError::Nats(format!("get stream {INGEST_STREAM}: {e}")))?;
    // A fresh consumer for every new owner: it starts at the first
    // unacked command, in stream order. Reusing the old one would deliver
    // new commands before the old owner's unacked ones came back after
    // `ack_wait`, and break each sender's order.
    let name = writer_consumer_name(partition);
    if let Err(e) = stream.delete_consumer(&name).await {
        tracing::debug!(consumer = %name, error = %e, "no consumer to delete");
    }
    let consumer: PullConsumer = stream
        .create_consumer(writer_consumer(partition)?)
        .await
        .map_err(|e| WorkerError::Nats(format!("create consumer {name}: {e}")))?;
    let messages = consumer
        .stream()
        .max_messages_per_batch(ctx.config.max_batch)
        .heartbeat(Duration::from_secs(5))
        .expires(Duration::from_secs(30))
        .messages()
        .await
        .map_err(|e| WorkerError::Nats(format!("consume {name}: {e}")))?;
    let mut chunks = messages.ready_chunks(ctx.config.max_batch);
    let mut sequencer = Sequencer::new(
        ctx.config.cache_limit,
        Policies {
            edit: ctx.config.edit_policy,
            fanout: ctx.config.fanout,
            plugins: ctx.plugins.clone(),
            tenants: ctx.tenants.clone(),
        },
    );
    tracing::info!(partition, "writer started");
    loop {
        let chunk = tokio::select! {
            _ = stop.changed() => break,
            chunk = chunks.next() => chunk,
        };
        let Some(chunk) = chunk else {
            return Err(WorkerError::Nats(format!("consumer {name} ended")));
        };
        let mut batch = Vec::with_capacity(chunk.len());
        for item in chunk {
            match item {
                Ok(m) => batch.push(m),
                Err(e) => {
                    use jetstream::consumer::pull::MessagesErrorKind as K;
                    match e.kind() {
                        K::MissingHeartbeat | K::Pull => {
                            tracing::warn!(partition, error = %e, "writer consumer hiccup");
                        }
                        _ => return Err(WorkerError::Nats(format!("consumer {name}: {e}"))),
                    }
                }
            }
        }
        // Archive requests run after the batch's commands, never between
        // a command's read and its commit.
        let (requests, batch): (Vec<_>, Vec<_>) = batch.into_iter().partition(archive::is_request);
        if !batch.is_empty() {
            let span = tracing::info_span!("batch", partition, size = batch.len());
            process_batch(&ctx, &mut sequencer, &batch, &valid_until)
                .instrument(span)
                .await?;
        }
        if !requests.is_empty() {
            if !lease_valid(&valid_until) {
                return Err(WorkerError::LeaseLost);
            }
            archive::serve_requests(&ctx, &requests, || lease_valid(&valid_until)).await;
        }
        if *stop.borrow() {
            break;
        }
    }
    tracing::info!(partition, "writer stopped");
    Ok(())
}

fn lease_valid(valid_until: &watch::Receiver<Instant>) -> bool {
    Instant::now() < *valid_until.borrow()
}

async fn process_batch(
    ctx: &Ctx,
    sequencer: &mut Sequencer,
    batch: &[jetstream::Message],
    valid_until: &watch::Receiver<Instant>,
) -> Result<(), WorkerError> {
    let incoming: Vec<Incoming> = batch
        .iter()
        .filter_map(|m| match Command::decode(&m.payload) {
            Ok(command) => Some(Incoming {
                command,
                reply_to: m
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(HEADER_REPLY))
                    .map(|v| v.as_str().to_owned()),
            }),
            Err(e) => {
                // Not from a Switchboard gateway: nothing can be done with
                // it; it is acked with the batch and only logged.
                tracing::error!(subject = %m.subject, error = %e, "dropping an undecodable command");
                None
            }
        })
        .collect();

    // Redelivered commands may be applied already: look their keys up.
    let mut check_sent = batch
        .iter()
        .any(|m| m.info().map_or(true, |i| i.delivered > 1));
    let mut backoff = Duration::from_millis(20);
    loop {
        if !lease_valid(valid_until) {
            return Err(WorkerError::LeaseLost);
        }
        let failure = match sequencer
            .plan(ctx.store.as_ref(), ctx.ids.as_ref(), &incoming, check_sent)
            .await
        {
            Ok(mut plan) => {
                // Self-fencing: never write after the lease may have expired.
                if !lease_valid(valid_until) {
                    return Err(WorkerError::LeaseLost);
                }
                let mutations = std::mem::take(&mut plan.mutations);
                let committed = if mutations.is_empty() {
                    Ok(())
                } else {
                    ctx.store.commit(mutations).await
                };
                match committed {
                    Ok(()) => {
                        sequencer.committed(&mut plan);
                        publish(ctx, plan.outcomes).await;
                        for m in batch {
                            if let Err(e) = m.ack().await {
                                tracing::warn!(error = %e, "acking a command failed; it will be redelivered");
                            }
                        }
                        return Ok(());
                    }
                    Err(e) => SequenceError::Store(e),
                }
            }
            Err(e) => e,
        };
        // The cache may disagree with the store (a refused append) or be
        // half-updated: start again from the store's state, and look the
        // batch's idempotency keys up this time.
        sequencer.forget();
        check_sent = true;
        match &failure {
            SequenceError::Store(StoreError::Conflict(why)) => {
                tracing::warn!(%why, "store refused the batch; reloading state");
            }
            other => {
                tracing::warn!(error = %other, ?backoff, "batch failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// Publishes one event to every recipient's event subject, or once to
/// the conversation's subject (fan-out on read).
async fn fan_out(
    ctx: &Ctx,
    tenant: &TenantId,
    conversation: &ConversationId,
    recipients: Vec<UserId>,
    route: Route,
    (headers, payload): (HeaderMap, Bytes),
) -> Result<(), String> {
    let subjects: Vec<String> = match route {
        Route::Users => recipients.iter().map(|u| user_events(tenant, u)).collect(),
        Route::Conversation => vec![conversation_events(tenant, conversation)],
    };
    let mut result = Ok(());
    for subject in subjects {
        if let Err(e) = ctx
            .client
            .publish_with_headers(subject, headers.clone(), payload.clone())
            .await
        {
            result = Err(e.to_string());
        }
    }
    result
}

/// Hands a stored message to the push pipeline, for a tenant with pushes
/// (F15). Conversations that fan out on read push nothing: their members
/// have no inbox entries to tell what reached them. At most once: the
/// publish is not awaited for JetStream's ack, and a push is a courtesy,
/// never the message itself.
async fn push_job(ctx: &Ctx, tenant: &TenantId, message: &Message, recipients: &[UserId]) {
    if matches!(message.content, Some(Content::System(_)) | None)
        || ctx.tenants.get(tenant).is_none_or(|t| t.push.is_none())
    {
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
    };
    let Ok(body) = serde_json::to_vec(&job) else {
        return;
    };
    if let Err(e) = ctx.js.publish(message_subject(tenant), body.into()).await {
        tracing::warn!(error = %e, "a push job was not published");
    }
}

async fn publish(ctx: &Ctx, outcomes: Vec<Outcome>) {
    for outcome in outcomes {
        let result = match outcome {
            Outcome::Deliver {
                tenant,
                message,
                recipients,
                route,
            } => {
                tracing::debug!(
                    %tenant,
                    conversation = %message.conversation_id,
                    seq = message.seq,
                    message_id = %message.message_id,
                    recipients = recipients.len(),
                    ?route,
                    "message stored; fanning out"
                );
                if route == Route::Users {
                    push_job(ctx, &tenant, &message, &recipients).await;
                }
                match message_event(&message) {
                    Ok(event) => {
                        fan_out(
                            ctx,
                            &tenant,
                            &message.conversation_id,
                            recipients,
                            route,
                            event,
                        )
                        .await
                    }
                    Err(e) => Err(e.to_string()),
                }
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
                let event = frame_event(&ServerFrame::MessageUpdated { message });
                fan_out(ctx, &tenant, &conversation, recipients, route, event).await
            }
            Outcome::Listen {
                tenant,
                conversation_id,
                users,
                listen,
            } => match listen_event(&conversation_id, listen) {
                Ok(event) => {
                    fan_out(ctx, &tenant, &conversation_id, users, Route::Users, event).await
                }
                Err(e) => Err(e.to_string()),
            },
            Outcome::Reject {
                tenant,
                sender,
                rejection,
            } => match rejection_event(&rejection) {
                Ok((headers, payload)) => ctx
                    .client
                    .publish_with_headers(user_events(&tenant, &sender), headers, payload)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            Outcome::Reply { subject, reply } => match serde_json::to_vec(&reply) {
                Ok(body) => ctx
                    .client
                    .publish(subject, body.into())
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
        };
        if let Err(e) = result {
            // Events are at most once; clients recover by retry and backlog.
            tracing::warn!(error = %e, "publishing an event failed");
        }
    }
}
