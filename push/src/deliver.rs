//! The deliver stage: a message job, once its tenant's delay has passed,
//! becomes a send job for every recipient device whose inbox still holds
//! the message and that got no push for the conversation within the
//! collapse window. A reaction's job (v1.3) pushes its message's author's
//! devices, collapsed apart from messages.

use std::time::Duration;

use async_nats::jetstream::{self, AckKind, kv};
use switchboard_nats::kv_key::part;
use switchboard_nats::push_jobs::{MessageJob, SendJob, send_subject};
use switchboard_nats::records::bans::BanKind;
use switchboard_protocol::{DeviceId, Timestamp, UserId};
use switchboard_store::{InboxCursor, MessageKey};
use tracing::Instrument;

use crate::counters::PUSH_MESSAGES_SHED;
use crate::stage::{Ctx, ack, with_push};
use crate::wording::{self, About, Wording};

/// Why checking a message's push deliveries failed; logged, and the job
/// comes again. Each cause reads as its own error did.
#[derive(Debug, thiserror::Error)]
enum DeliverError {
    #[error(transparent)]
    Store(#[from] switchboard_store::StoreError),
    #[error(transparent)]
    Tokens(#[from] switchboard_nats::records::push_tokens::PushTokenError),
    #[error(transparent)]
    Encoding(#[from] serde_json::Error),
    #[error(transparent)]
    Publish(#[from] jetstream::context::PublishError),
    #[error(transparent)]
    Collapse(#[from] kv::EntryError),
}

pub(crate) async fn deliver_stage(ctx: &Ctx, m: jetstream::Message) {
    let job: MessageJob = match serde_json::from_slice(&m.payload) {
        Ok(j) => j,
        Err(e) => {
            tracing::error!(error = %e, "dropping a push job that does not decode");
            ack(&m, AckKind::Term).await;
            return;
        }
    };
    let span = tracing::info_span!("push", tenant = %job.tenant, conversation = %job.conversation_id, seq = job.seq);
    match deliver(ctx, &job).instrument(span).await {
        Ok(sent) => {
            tracing::debug!(tenant = %job.tenant, seq = job.seq, sent, "push deliveries checked");
            ack(&m, AckKind::Ack).await;
        }
        Err(e) => {
            tracing::warn!(tenant = %job.tenant, error = %e, "checking push deliveries failed; again shortly");
            ack(&m, AckKind::Nak(Some(Duration::from_secs(2)))).await;
        }
    }
}

/// How long until a message job's push delay has passed, if it has not
/// (none for a job that does not decode: the stage drops it).
pub(crate) fn not_due_for(ctx: &Ctx, m: &jetstream::Message) -> Option<Duration> {
    let job = serde_json::from_slice::<MessageJob>(&m.payload).ok()?;
    let record = with_push(ctx, &job.tenant)?;
    let settings = record.push.as_ref()?;
    let wait = due(job.stored_at, settings.delay_ms).saturating_sub(Timestamp::now().unix_ms());
    (wait > 0).then(|| Duration::from_millis(u64::try_from(wait).unwrap_or(0)))
}

/// When a message job's pushes are due (Unix ms). Both terms come from
/// the backbone, so the sum saturates rather than overflow.
pub fn due(stored_at: Timestamp, delay_ms: u64) -> i64 {
    stored_at
        .unix_ms()
        .saturating_add(i64::try_from(delay_ms).unwrap_or(i64::MAX))
}

/// Whether the collapse mark `mark` (the Unix ms of the last push, as
/// written below) falls within `window_ms` before `now`. A mark that does
/// not parse counts as none; any `i64` is taken without overflow.
pub fn collapsed(mark: &[u8], now: i64, window_ms: u64) -> bool {
    let last: i64 = std::str::from_utf8(mark)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    now.saturating_sub(last) < i64::try_from(window_ms).unwrap_or(i64::MAX)
}

/// The send jobs of one message; how many went out.
async fn deliver(ctx: &Ctx, job: &MessageJob) -> Result<usize, DeliverError> {
    let Some(record) = with_push(ctx, &job.tenant) else {
        return Ok(0);
    };
    let Some(settings) = record.push.as_ref() else {
        return Ok(0);
    };
    let found = ctx
        .store
        .find_messages(vec![MessageKey {
            tenant: job.tenant.clone(),
            conversation_id: job.conversation_id.clone(),
            message_id: job.message_id,
        }])
        .await?;
    let Some(Some(message)) = found.into_iter().next() else {
        return Ok(0);
    };
    if message.deleted_at.is_some() {
        return Ok(0);
    }
    let about = match &job.reaction {
        Some(emoji) => About::Reaction {
            by: &job.sender,
            emoji,
        },
        None => About::Message,
    };
    // Read (the templates' values) only once a device gets a push: most
    // jobs find every recipient connected.
    let mut wording: Option<Wording> = None;
    let mut sent = 0;
    let mut room_checked = false;
    let now = Timestamp::now();
    // Nobody banned from the tenant (v1.3) gets a preview of its messages.
    let banned = |u: &UserId| {
        ctx.bans
            .holding(BanKind::Tenant, &job.tenant, u, now)
            .is_some()
    };
    for user in job
        .recipients
        .iter()
        .filter(|u| **u != job.sender && !banned(u))
    {
        let devices = ctx.tokens.devices(&job.tenant, user).await?;
        // Read once per user, and only for one whose device gets a push.
        let mut badge = None;
        for (device, token) in devices {
            // A reaction puts no new message in an inbox to wait for: it
            // pushes whether the device is connected or not.
            if job.reaction.is_none() && !undelivered(ctx, job, user, &device).await? {
                continue;
            }
            // Before any collapse mark is taken: a shed message must not
            // hold back the next one's push.
            if !room_checked {
                room_checked = true;
                if ctx.backlogs.full(&job.tenant).await {
                    tracing::warn!(tenant = %job.tenant, "the tenant's pushes are queued up to tenant_max_queued; this message pushes nothing");
                    metrics::counter!(PUSH_MESSAGES_SHED).increment(1);
                    return Ok(0);
                }
            }
            if !first_in_window(ctx, job, user, &device, settings.collapse_ms).await? {
                continue;
            }
            let wording = match &mut wording {
                Some(w) => w,
                None => wording.insert(
                    Wording::of(
                        ctx.store.as_ref(),
                        &record,
                        settings.preview,
                        &message,
                        about,
                    )
                    .await?,
                ),
            };
            let (title, body) = wording.for_user(&message, user);
            if badge.is_none() {
                badge = Some(
                    match wording::badge(ctx.store.as_ref(), &job.tenant, user).await {
                        Ok(n) => Some(n),
                        // A push without its badge rather than none.
                        Err(e) => {
                            tracing::warn!(error = %e, "reading a push's badge failed; sent without one");
                            None
                        }
                    },
                );
            }
            let send = SendJob {
                tenant: job.tenant.clone(),
                user: user.clone(),
                device,
                provider: token.registration.provider,
                token: token.registration.token,
                conversation_id: job.conversation_id.clone(),
                message_id: job.message_id,
                seq: job.seq,
                sender: job.sender.clone(),
                title,
                body,
                badge: badge.flatten(),
                reaction: job.reaction.clone(),
            };
            let bytes = serde_json::to_vec(&send)?;
            ctx.js
                .publish(send_subject(&job.tenant), bytes.into())
                .await?
                .await?;
            sent += 1;
        }
    }
    Ok(sent)
}

/// Whether the device's inbox still holds the message.
async fn undelivered(
    ctx: &Ctx,
    job: &MessageJob,
    user: &UserId,
    device: &DeviceId,
) -> Result<bool, DeliverError> {
    let next = ctx
        .store
        .inbox(
            &job.tenant,
            user,
            device,
            Some(InboxCursor {
                conversation_id: job.conversation_id.clone(),
                seq: job.seq.saturating_sub(1),
            }),
            1,
        )
        .await?;
    Ok(next
        .first()
        .is_some_and(|m| m.conversation_id == job.conversation_id && m.seq == job.seq))
}

/// Claims the device's push for this conversation if none went out within
/// the window: a compare-and-set, so exactly one worker wins a burst.
async fn first_in_window(
    ctx: &Ctx,
    job: &MessageJob,
    user: &UserId,
    device: &DeviceId,
    window_ms: u64,
) -> Result<bool, DeliverError> {
    let mut key = format!(
        "{}.{}.{}.{}",
        part(job.tenant.as_str()),
        part(user.as_str()),
        part(device.as_str()),
        part(job.conversation_id.as_str())
    );
    // Reactions collapse apart: a burst of them never holds back the
    // push of a message.
    if job.reaction.is_some() {
        key.push_str(".reactions");
    }
    let now = Timestamp::now().unix_ms();
    let value = now.to_string();
    match ctx.collapse.entry(&key).await? {
        Some(e) if e.operation == kv::Operation::Put => {
            if collapsed(&e.value, now, window_ms) {
                return Ok(false);
            }
            Ok(ctx
                .collapse
                .update(&key, value.into(), e.revision)
                .await
                .is_ok())
        }
        _ => Ok(ctx.collapse.create(&key, value.into()).await.is_ok()),
    }
}
