//! Push notifications (F15): the two stages of the push pipeline on the
//! `SB_PUSH` stream (see `switchboard_backbone::push_jobs`), run by every
//! worker process on shared consumers, so pushes keep flowing while any
//! worker lives.
//!
//! **Deliver**: a message job waits the tenant's `delay_ms` after the
//! message was stored (back in JetStream, not here, so that one tenant's
//! long delay holds up no other's jobs), then looks at every recipient
//! device with a push token: a device whose inbox still holds the message
//! (not connected, or connected but not acknowledging) and that got no
//! push for this conversation within `collapse_ms` gets a send job. The
//! collapse marks live in the `sb_push_collapse` bucket, written with a
//! compare-and-set, so two workers never both push the same burst. A
//! tenant with `tenant_max_queued` sends waiting queues no more
//! (`backlog.rs`) until they drain.
//!
//! **Send** (`send.rs`): one provider call, within the tenant's share of
//! the stage (`share.rs`). Retries come back with a growing delay (1 s,
//! 2 s, 4 s ... up to a minute); after `max_attempts` the job goes to
//! `SB_PUSH_DEAD` with the last error. A token the provider calls dead is
//! removed from `sb_push_tokens`. Every answer is read within a bound
//! (`providers::AnswerCaps`).
//!
//! What a push shows is the tenant's `preview`: nothing but "New message",
//! the sender, or the sender and the message's one-line preview (100
//! characters at most). Ciphertext never shows more than the sender.

mod backlog;
pub mod providers;
mod send;
mod share;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, kv};
use futures::StreamExt;
use switchboard_backbone::definitions::{PUSH_COLLAPSE_BUCKET, PUSH_STREAM, push_consumers};
use switchboard_backbone::kv_key::part;
use switchboard_backbone::push_jobs::{MessageJob, SendJob, send_subject};
use switchboard_backbone::records::push_tokens::PushTokens;
use switchboard_backbone::records::tenants::{PreviewMode, TenantBook, TenantRecord};
use switchboard_protocol::{Content, DeviceId, Message, Timestamp, UserId};
use switchboard_store::{InboxCursor, MessageKey, Store};
use tokio::sync::Semaphore;
use tracing::Instrument;

pub use providers::{AnswerCaps, Timeouts};
pub use send::{HEADER_PUSH_ATTEMPTS, HEADER_PUSH_NOT_BEFORE};

use providers::Clients;
use share::TenantShares;

/// Settings of the push stage that are the deployment's, not a tenant's.
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// Bounds of one provider call in time.
    pub timeouts: Timeouts,
    /// A CA (PEM) to trust besides the public ones (a private proxy in
    /// front of the providers, or a test server).
    pub extra_root_pem: Option<Vec<u8>>,
    /// Jobs of each stage in progress at once in this process.
    pub concurrency: usize,
    /// Provider calls of one tenant in progress at once in this process:
    /// a tenant whose endpoints hang holds this many, never the stage.
    pub tenant_concurrency: usize,
    /// Sends of one tenant waiting in `SB_PUSH` past which its messages
    /// queue no more pushes (approximate, see `backlog.rs`).
    pub tenant_max_queued: u64,
    /// How much of a provider's answer is read.
    pub answer_caps: AnswerCaps,
    /// Whether provider and webhook URLs may point at private addresses
    /// (loopback, RFC 1918, link-local...): off by default, so a tenant's
    /// webhook cannot reach the deployment's own network.
    pub allow_private_targets: bool,
}

impl Default for PushConfig {
    fn default() -> Self {
        Self {
            timeouts: Timeouts {
                call: Duration::from_secs(10),
                connect: Duration::from_secs(5),
            },
            extra_root_pem: None,
            concurrency: 64,
            tenant_concurrency: 8,
            tenant_max_queued: 1000,
            answer_caps: AnswerCaps::default(),
            allow_private_targets: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// A bucket, stream or consumer could not be opened: the client's
    /// error, kept whole.
    #[error("push: {0}")]
    Backbone(#[source] switchboard_backbone::Cause),
    /// The consumer definitions do not parse.
    #[error("push: {0}")]
    Definition(#[from] switchboard_backbone::BackboneError),
    #[error("push: {0}")]
    Tokens(#[from] switchboard_backbone::records::push_tokens::PushTokenError),
    #[error("push HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

fn nats(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> PushError {
    PushError::Backbone(switchboard_backbone::cause(e))
}

/// Why checking a message's push deliveries failed; logged, and the job
/// comes again. Each cause reads as its own error did.
#[derive(Debug, thiserror::Error)]
enum DeliverError {
    #[error(transparent)]
    Store(#[from] switchboard_store::StoreError),
    #[error(transparent)]
    Tokens(#[from] switchboard_backbone::records::push_tokens::PushTokenError),
    #[error(transparent)]
    Encoding(#[from] serde_json::Error),
    #[error(transparent)]
    Publish(#[from] jetstream::context::PublishError),
    #[error(transparent)]
    Collapse(#[from] kv::EntryError),
}

struct Ctx {
    js: jetstream::Context,
    store: Arc<dyn Store>,
    tenants: TenantBook,
    tokens: PushTokens,
    collapse: kv::Store,
    clients: Clients,
    fcm: providers::fcm::Fcm,
    apns: providers::apns::Apns,
    backlogs: backlog::Backlogs,
}

/// Which stage a consumer feeds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Deliver,
    Send,
}

/// Runs both stages until the returned tasks are aborted.
pub async fn start(
    js: jetstream::Context,
    store: Arc<dyn Store>,
    tenants: TenantBook,
    config: PushConfig,
) -> Result<Vec<tokio::task::JoinHandle<()>>, PushError> {
    let stream = js.get_stream(PUSH_STREAM).await.map_err(nats)?;
    let ctx = Arc::new(Ctx {
        tokens: PushTokens::open(&js).await?,
        collapse: js.get_key_value(PUSH_COLLAPSE_BUCKET).await.map_err(nats)?,
        clients: Clients::new(
            config.timeouts,
            config.extra_root_pem.as_deref(),
            config.allow_private_targets,
            config.answer_caps,
        )?,
        fcm: providers::fcm::Fcm::default(),
        apns: providers::apns::Apns::default(),
        backlogs: backlog::Backlogs::new(stream.clone(), config.tenant_max_queued.max(1)),
        js,
        store,
        tenants,
    });
    let [deliver, send] = push_consumers()?;
    let shares = TenantShares::new(config.tenant_concurrency);
    let mut tasks = Vec::new();
    for (consumer_config, stage) in [(deliver, Stage::Deliver), (send, Stage::Send)] {
        let name = consumer_config.durable_name.clone().unwrap_or_default();
        let consumer: jetstream::consumer::PullConsumer = stream
            .get_or_create_consumer(&name, consumer_config)
            .await
            .map_err(nats)?;
        let permits = Arc::new(Semaphore::new(config.concurrency.max(1)));
        tasks.push(tokio::spawn(consume(
            ctx.clone(),
            consumer,
            name,
            stage,
            permits,
            shares.clone(),
        )));
    }
    Ok(tasks)
}

async fn consume(
    ctx: Arc<Ctx>,
    consumer: jetstream::consumer::PullConsumer,
    name: String,
    stage: Stage,
    permits: Arc<Semaphore>,
    shares: Arc<TenantShares>,
) {
    loop {
        let mut messages = match consumer.messages().await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(consumer = %name, error = %e, "push consumer; trying again");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        while let Some(next) = messages.next().await {
            let m = match next {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(consumer = %name, error = %e, "push consumer hiccup");
                    continue;
                }
            };
            // A job not due yet (a message job within its tenant's
            // delay, a retry before its time) goes back until it is:
            // waiting here would hold up every tenant's jobs behind it.
            let not_due = match stage {
                Stage::Deliver => not_due_for(&ctx, &m),
                Stage::Send => send::not_due_for(&m),
            };
            if let Some(wait) = not_due {
                ack(&m, AckKind::Nak(Some(wait))).await;
                continue;
            }
            let slot = match stage {
                Stage::Deliver => None,
                Stage::Send => match shares.try_take(share::tenant_token(&m.subject)) {
                    Some(slot) => Some(slot),
                    None => {
                        let delivered = m.info().map_or(1, |i| i.delivered);
                        ack(&m, AckKind::Nak(Some(share::deferral(delivered)))).await;
                        continue;
                    }
                },
            };
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let ctx = ctx.clone();
            tokio::spawn(async move {
                match stage {
                    Stage::Send => send::send_stage(&ctx, m).await,
                    Stage::Deliver => deliver_stage(&ctx, m).await,
                }
                drop(permit);
                drop(slot);
            });
        }
        tracing::warn!(consumer = %name, "push consumer ended; consuming again");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

pub(crate) async fn ack(m: &jetstream::Message, kind: AckKind) {
    if let Err(e) = m.ack_with(kind).await {
        tracing::warn!(error = %e, "acking a push job failed; it comes again");
    }
}

/// The tenant's record, if it has push settings (shared, not copied: the
/// settings hold keys and are read for every job).
pub(crate) fn with_push(
    ctx: &Ctx,
    tenant: &switchboard_protocol::TenantId,
) -> Option<Arc<TenantRecord>> {
    ctx.tenants.get(tenant).filter(|t| t.push.is_some())
}

async fn deliver_stage(ctx: &Ctx, m: jetstream::Message) {
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
fn not_due_for(ctx: &Ctx, m: &jetstream::Message) -> Option<Duration> {
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
    let (title, body) = preview(settings.preview, &message);
    let mut sent = 0;
    let mut room_checked = false;
    for user in job.recipients.iter().filter(|u| **u != job.sender) {
        let devices = ctx.tokens.devices(&job.tenant, user).await?;
        for (device, token) in devices {
            if !undelivered(ctx, job, user, &device).await? {
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
                title: title.clone(),
                body: body.clone(),
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

/// What a push shows.
pub fn preview(mode: PreviewMode, message: &Message) -> (String, Option<String>) {
    let generic = "New message".to_owned();
    match mode {
        PreviewMode::Off => (generic, None),
        PreviewMode::Sender => (message.sender_id.to_string(), Some(generic)),
        PreviewMode::Text => {
            let text = match &message.content {
                // The server cannot read it, and must not pretend to.
                Some(Content::Ciphertext { .. }) | None => None,
                Some(c) => c.preview(),
            };
            (message.sender_id.to_string(), Some(text.unwrap_or(generic)))
        }
    }
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
    let key = format!(
        "{}.{}.{}.{}",
        part(job.tenant.as_str()),
        part(user.as_str()),
        part(device.as_str()),
        part(job.conversation_id.as_str())
    );
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

/// Pushes to one device by outcome: `sent`, `token_gone` (the provider
/// called the token dead; it is forgotten), `retry` (tried again later),
/// `dead_letter` (failed for good, kept in `SB_PUSH_DEAD`).
pub const PUSH_JOBS: &str = "switchboard_push_jobs_total";

/// Message jobs that queued no push because their tenant had
/// `tenant_max_queued` sends waiting already (its endpoints are slow).
pub const PUSH_MESSAGES_SHED: &str = "switchboard_push_messages_shed_total";

/// Registers the descriptions (`# HELP` lines).
pub fn describe_metrics() {
    metrics::describe_counter!(
        PUSH_JOBS,
        "Pushes to one device by outcome: sent, token_gone, retry, dead_letter."
    );
    // Every outcome from zero, so that a first dead letter is an increase
    // an alert sees, not a new series.
    for outcome in ["sent", "token_gone", "retry", "dead_letter"] {
        metrics::counter!(PUSH_JOBS, "outcome" => outcome).absolute(0);
    }
    metrics::describe_counter!(
        PUSH_MESSAGES_SHED,
        "Stored messages that queued no push because their tenant had tenant_max_queued pushes waiting."
    );
    metrics::counter!(PUSH_MESSAGES_SHED).absolute(0);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use switchboard_protocol::{ClientMsgId, ConversationId, MessageId};

    fn message(content: Content) -> Message {
        Message {
            message_id: MessageId::from_u64(7),
            conversation_id: ConversationId::new("c1").unwrap(),
            seq: 1,
            sender_id: UserId::new("alice").unwrap(),
            sender_device: DeviceId::new("a").unwrap(),
            client_msg_id: ClientMsgId::new("m1").unwrap(),
            content: Some(content),
            created_at: Timestamp::now(),
            edited_at: None,
            deleted_at: None,
        }
    }

    #[test]
    fn previews_follow_the_mode_and_never_show_ciphertext() {
        let long = "x".repeat(300);
        let text = message(Content::Text { text: long });
        assert_eq!(
            preview(PreviewMode::Off, &text),
            ("New message".into(), None)
        );
        assert_eq!(
            preview(PreviewMode::Sender, &text),
            ("alice".into(), Some("New message".into()))
        );
        let (_, body) = preview(PreviewMode::Text, &text);
        let body = body.unwrap();
        assert_eq!(body.chars().count(), 101, "100 characters and an ellipsis");
        let secret = message(Content::Ciphertext {
            algorithm: "olm".into(),
            body: "c2VjcmV0".into(),
        });
        assert_eq!(
            preview(PreviewMode::Text, &secret),
            ("alice".into(), Some("New message".into()))
        );
    }
}
