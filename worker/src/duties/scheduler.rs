//! Scheduled messages that came due (v1.2): every worker takes its share
//! of the `scheduler` consumer on `SB_SCHEDULED` and turns each into a
//! send command for its conversation's writer, after the tenant's
//! moderation decides on it at its time. The command carries the send's
//! idempotency key and the ingest dedupe id, so taking one again after a
//! crash sends nothing twice; the due message goes only once its writer
//! answered, so a crash before loses nothing.
//!
//! A scheduled message is stored with `sender_device` [`SCHEDULED_DEVICE`]:
//! every device of its sender gets it as a `message` (none of them is
//! waiting for its `ack`). A refusal at its time (moderation, membership,
//! a block, slow mode) reaches the device that scheduled it as an `error`
//! frame with the `client_msg_id`, and is remembered as a send's would be.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::AckKind;
use async_nats::jetstream::consumer;
use futures::StreamExt;
use switchboard_nats::commands::{self, Backbone, Wait};
use switchboard_nats::definitions::{SCHEDULED_STREAM, scheduler_consumer};
use switchboard_nats::envelope::{Rejection, SendCommand, rejection_event};
use switchboard_nats::scheduled::ScheduledSend;
use switchboard_plugin_host::screen::{self, Submitted};
use switchboard_protocol::frames::request_type;
use switchboard_protocol::{DeviceId, ErrorCode, SendAck, ServerFrame, Timestamp};
use switchboard_store::{SentKey, StoreError};

use crate::ctx::Ctx;
use crate::error::WorkerError;

/// The `sender_device` of a message the scheduler sent.
pub const SCHEDULED_DEVICE: &str = "sb:scheduled";
/// How long a due send waits for its writer before it is tried again.
const WRITER_ANSWER: Duration = Duration::from_secs(10);
/// How long it waits for its writer's answer before it looks in what the
/// writer left, and then between look-ups.
const LOOK_UP_AFTER: Duration = Duration::from_secs(1);
/// When a due send is tried again after its moderator failed (it fails
/// closed) or its writer did not answer.
const AGAIN_AFTER: Duration = Duration::from_secs(5);

pub(crate) async fn run(ctx: Arc<Ctx>) {
    loop {
        if let Err(e) = serve(&ctx).await {
            tracing::warn!(error = %e, "the scheduler's consumer failed; starting it again");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn serve(ctx: &Ctx) -> Result<(), WorkerError> {
    let stream = ctx
        .js
        .get_stream(SCHEDULED_STREAM)
        .await
        .map_err(|e| WorkerError::nats(format!("stream {SCHEDULED_STREAM}"), e))?;
    let config = scheduler_consumer()?;
    let name = config.durable_name.clone().unwrap_or_default();
    let consumer: consumer::PullConsumer = stream
        .get_or_create_consumer(&name, config)
        .await
        .map_err(|e| WorkerError::nats(format!("consumer {name}"), e))?;
    let mut due = consumer
        .messages()
        .await
        .map_err(|e| WorkerError::nats(format!("consumer {name}"), e))?;
    while let Some(message) = due.next().await {
        let message = message.map_err(|e| WorkerError::nats(format!("consumer {name}"), e))?;
        let span = tracing::info_span!("scheduled", subject = %message.subject);
        let _entered = span.enter();
        let outcome = match serde_json::from_slice::<ScheduledSend>(&message.payload) {
            Ok(send) => send_due(ctx, &send).await,
            Err(e) => {
                tracing::error!(error = %e, "a due scheduled send does not decode; dropped");
                Done::Settled
            }
        };
        match outcome {
            Done::Settled => {
                if let Ok(info) = message.info() {
                    let seq = info.stream_sequence;
                    if let Err(e) = stream.delete_message(seq).await {
                        tracing::warn!(error = %e, seq, "a sent scheduled message stays on SB_SCHEDULED until its max_age");
                    }
                }
                if let Err(e) = message.ack().await {
                    tracing::warn!(error = %e, "a due send's ack failed; it is taken again and answered as a retry");
                }
            }
            Done::Later => {
                let _ = message.ack_with(AckKind::Nak(Some(AGAIN_AFTER))).await;
            }
        }
    }
    Ok(())
}

enum Done {
    /// Sent, or refused for good: the due message goes.
    Settled,
    /// Try it again.
    Later,
}

async fn send_due(ctx: &Ctx, send: &ScheduledSend) -> Done {
    let content = match moderate(ctx, send).await {
        Ok(content) => content,
        Err(Refused::Later(why)) => {
            tracing::warn!(%why, "a due send's moderation failed; tried again shortly");
            return Done::Later;
        }
        Err(Refused::ForGood(code, why)) => {
            refuse(ctx, send, code, why).await;
            return Done::Settled;
        }
    };
    let Ok(device) = DeviceId::new(SCHEDULED_DEVICE) else {
        return Done::Later;
    };
    let command = SendCommand {
        tenant: send.tenant.clone(),
        conversation_id: send.conversation_id.clone(),
        sender: send.sender.clone(),
        device,
        client_msg_id: send.client_msg_id.clone(),
        content,
        received_at: Timestamp::now(),
        options: send.options.clone(),
    };
    match through_writer(ctx, &command).await {
        Ok(ServerFrame::Ack(SendAck {
            message_id, seq, ..
        })) => {
            tracing::info!(?seq, ?message_id, "scheduled message sent");
            crate::metrics::scheduled_sent();
            Done::Settled
        }
        // Not answered in time, or not stored: tried again.
        Ok(ServerFrame::Error {
            code: ErrorCode::Unavailable,
            message,
            ..
        }) => {
            tracing::warn!(%message, "a due send got no answer from its writer; tried again shortly");
            Done::Later
        }
        Ok(ServerFrame::Error { code, message, .. }) => {
            refuse(ctx, send, code, message).await;
            Done::Settled
        }
        Ok(_) => Done::Settled,
        Err(e) => {
            tracing::warn!(error = %e, "a due send was not published; tried again shortly");
            Done::Later
        }
    }
}

enum Refused {
    ForGood(ErrorCode, String),
    Later(String),
}

/// The content to send, as the screening every send passes decides at
/// its time (`switchboard_plugin_host::screen`): the tenant's content
/// limits, its word list, and its moderator under the same limits. A moderator that
/// failed closed is asked again shortly.
async fn moderate(
    ctx: &Ctx,
    send: &ScheduledSend,
) -> Result<switchboard_protocol::Content, Refused> {
    let limits = ctx
        .tenants
        .quotas(&send.tenant)
        .content_limits(&ctx.config.content);
    let record = ctx.tenants.get(&send.tenant);
    let submitted = Submitted {
        tenant: &send.tenant,
        conversation_id: &send.conversation_id,
        sender: &send.sender,
        content: send.content.clone(),
        options: &send.options,
        limits: &limits,
        blocklist: record.as_ref().and_then(|r| r.blocklist.as_ref()),
    };
    let shape = || async {
        let (kind, members) = ctx
            .store
            .members(&send.tenant, &send.conversation_id, &send.sender)
            .await?;
        Ok::<_, StoreError>((kind, members.len()))
    };
    match screen::screen(ctx.plugins.as_deref(), submitted, shape).await {
        Ok(screened) => Ok(screened.content),
        Err(screen::Refused::Failed(why)) => Err(Refused::Later(why)),
        Err(screen::Refused::Shape(StoreError::NotAMember | StoreError::NotFound)) => {
            Err(Refused::ForGood(
                ErrorCode::NotAMember,
                "you are no longer a member of this conversation".into(),
            ))
        }
        Err(screen::Refused::Shape(other)) => Err(Refused::Later(other.to_string())),
        Err(other) => Err(Refused::ForGood(
            other.code().unwrap_or(ErrorCode::Internal),
            other.to_string(),
        )),
    }
}

/// Publishes the send for its writer and answers it as a socket's send
/// would be answered (`switchboard_nats::commands::answer`): a repeat
/// inside the dedupe window (taken again after a crash) is answered from
/// what its writer left.
async fn through_writer(ctx: &Ctx, send: &SendCommand) -> Result<ServerFrame, WorkerError> {
    let sent = SentKey {
        tenant: send.tenant.clone(),
        conversation_id: send.conversation_id.clone(),
        sender: send.sender.clone(),
        client_msg_id: send.client_msg_id.clone(),
    };
    let wait = Wait {
        overdue: LOOK_UP_AFTER,
        give_up: WRITER_ANSWER,
    };
    let store = &*ctx.store;
    let stored = || async {
        Ok::<_, StoreError>(store.find_sent(vec![sent.clone()]).await?.pop().flatten())
    };
    let backbone = Backbone {
        client: &ctx.client,
        js: &ctx.js,
        partitions: ctx.config.partitions,
        refusals: &ctx.refusals,
    };
    let frame = commands::answer(&backbone, send, wait, None, stored).await?;
    Ok(frame)
}

/// Tells the device that scheduled it that a send was refused at its
/// time, and remembers the refusal as the writer does a send's.
async fn refuse(ctx: &Ctx, send: &ScheduledSend, code: ErrorCode, message: String) {
    tracing::info!(%code, %message, "a scheduled message was refused at its time");
    crate::metrics::scheduled_refused();
    let rejection = Rejection {
        device: send.device.clone(),
        request_type: request_type::SEND_MESSAGE.into(),
        client_msg_id: Some(send.client_msg_id.clone()),
        conversation_id: send.conversation_id.clone(),
        code,
        message,
        message_id: None,
        retry_after_ms: None,
    };
    crate::writer::remember_refusal(ctx, &send.tenant, &send.sender, &rejection).await;
    match rejection_event(&rejection) {
        Ok(event) => {
            let mut deliveries = ctx.sessions.deliveries();
            deliveries.add(&send.tenant, [&send.sender], &event);
            if let Err(e) = deliveries.publish().await {
                tracing::warn!(error = %e, "a scheduled send's refusal did not reach its sender");
            }
        }
        Err(e) => tracing::warn!(error = %e, "a scheduled send's refusal does not encode"),
    }
}
