//! Push notifications (F15): the two stages of the push pipeline on the
//! `SB_PUSH` stream (see `switchboard_backbone::push_jobs`), run by every
//! worker process on shared consumers, so pushes keep flowing while any
//! worker lives.
//!
//! **Deliver**: a message job waits the tenant's `delay_ms` after the
//! message was stored, then looks at every recipient device with a push
//! token: a device whose inbox still holds the message (not connected, or
//! connected but not acknowledging) and that got no push for this
//! conversation within `collapse_ms` gets a send job. The collapse marks
//! live in the `sb_push_collapse` bucket, written with a compare-and-set,
//! so two workers never both push the same burst.
//!
//! **Send**: one provider call. Retries are naks with a growing delay
//! (1 s, 2 s, 4 s ... up to a minute); after `max_attempts` the job goes to
//! `SB_PUSH_DEAD` with the last error. A token the provider calls dead is
//! removed from `sb_push_tokens`.
//!
//! What a push shows is the tenant's `preview`: nothing but "New message",
//! the sender, or the sender and the message's one-line preview (100
//! characters at most). Ciphertext never shows more than the sender.

pub mod providers;

use std::sync::Arc;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, AckKind, kv};
use futures::StreamExt;
use switchboard_backbone::definitions::{PUSH_COLLAPSE_BUCKET, PUSH_STREAM, push_consumers};
use switchboard_backbone::kv_key::part;
use switchboard_backbone::push_jobs::{
    HEADER_PUSH_ERROR, MessageJob, SendJob, dead_subject, send_subject,
};
use switchboard_backbone::records::push_tokens::PushTokens;
use switchboard_backbone::records::tenants::{PreviewMode, PushSettings, TenantBook, TenantRecord};
use switchboard_protocol::push::PushProvider;
use switchboard_protocol::{Content, DeviceId, Message, Timestamp, UserId};
use switchboard_store::{InboxCursor, MessageKey, Store};
use tokio::sync::Semaphore;
use tracing::Instrument;

use providers::{Attempt, Clients};

/// Settings of the push stage that are the deployment's, not a tenant's.
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// Timeout of one provider call.
    pub timeout: Duration,
    /// A CA (PEM) to trust besides the public ones (a private proxy in
    /// front of the providers, or a test server).
    pub extra_root_pem: Option<Vec<u8>>,
    /// Jobs of each stage in progress at once in this process.
    pub concurrency: usize,
    /// Whether provider and webhook URLs may point at private addresses
    /// (loopback, RFC 1918, link-local...): off by default, so a tenant's
    /// webhook cannot reach the deployment's own network.
    pub allow_private_targets: bool,
}

impl Default for PushConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            extra_root_pem: None,
            concurrency: 64,
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
}

/// Runs both stages until the returned tasks are aborted.
pub async fn start(
    js: jetstream::Context,
    store: Arc<dyn Store>,
    tenants: TenantBook,
    config: PushConfig,
) -> Result<Vec<tokio::task::JoinHandle<()>>, PushError> {
    let ctx = Arc::new(Ctx {
        tokens: PushTokens::open(&js).await?,
        collapse: js.get_key_value(PUSH_COLLAPSE_BUCKET).await.map_err(nats)?,
        clients: Clients::new(
            config.timeout,
            config.extra_root_pem.as_deref(),
            config.allow_private_targets,
        )?,
        fcm: providers::fcm::Fcm::default(),
        apns: providers::apns::Apns::default(),
        js,
        store,
        tenants,
    });
    let stream = ctx.js.get_stream(PUSH_STREAM).await.map_err(nats)?;
    let [deliver, send] = push_consumers()?;
    let mut tasks = Vec::new();
    for (consumer_config, is_send) in [(deliver, false), (send, true)] {
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
            is_send,
            permits,
        )));
    }
    Ok(tasks)
}

async fn consume(
    ctx: Arc<Ctx>,
    consumer: jetstream::consumer::PullConsumer,
    name: String,
    is_send: bool,
    permits: Arc<Semaphore>,
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
            // Jobs arrive in the order they were stored, and each waits the
            // same delay: waiting here for the first one due (holding no
            // permit) keeps every permit for jobs that are ready.
            if !is_send {
                wait_until_due(&ctx, &m).await;
            }
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let ctx = ctx.clone();
            tokio::spawn(async move {
                if is_send {
                    send_stage(&ctx, m).await;
                } else {
                    deliver_stage(&ctx, m).await;
                }
                drop(permit);
            });
        }
        tracing::warn!(consumer = %name, "push consumer ended; consuming again");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn ack(m: &jetstream::Message, kind: AckKind) {
    if let Err(e) = m.ack_with(kind).await {
        tracing::warn!(error = %e, "acking a push job failed; it comes again");
    }
}

/// The tenant's record, if it has push settings (shared, not copied: the
/// settings hold keys and are read for every job).
fn with_push(ctx: &Ctx, tenant: &switchboard_protocol::TenantId) -> Option<Arc<TenantRecord>> {
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

/// Sleeps until a message job's push delay has passed (at once for a job
/// that does not decode: the stage drops it).
async fn wait_until_due(ctx: &Ctx, m: &jetstream::Message) {
    let Ok(job) = serde_json::from_slice::<MessageJob>(&m.payload) else {
        return;
    };
    if let Some(settings) = with_push(ctx, &job.tenant)
        .as_deref()
        .and_then(|t| t.push.as_ref())
    {
        let wait = due(job.stored_at, settings.delay_ms).saturating_sub(Timestamp::now().unix_ms());
        if wait > 0 {
            tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))).await;
        }
    }
}

/// When a message job's pushes are due (Unix ms). Both terms come from
/// the backbone, so the sum saturates rather than overflow.
pub fn due(stored_at: Timestamp, delay_ms: u64) -> i64 {
    stored_at
        .unix_ms()
        .saturating_add(i64::try_from(delay_ms).unwrap_or(i64::MAX))
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
    for user in job.recipients.iter().filter(|u| **u != job.sender) {
        let devices = ctx.tokens.devices(&job.tenant, user).await?;
        for (device, token) in devices {
            if !undelivered(ctx, job, user, &device).await?
                || !first_in_window(ctx, job, user, &device, settings.collapse_ms).await?
            {
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

/// Whether the collapse mark `mark` (the Unix ms of the last push, as
/// written above) falls within `window_ms` before `now`. A mark that does
/// not parse counts as none; any `i64` is taken without overflow.
pub fn collapsed(mark: &[u8], now: i64, window_ms: u64) -> bool {
    let last: i64 = std::str::from_utf8(mark)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    now.saturating_sub(last) < i64::try_from(window_ms).unwrap_or(i64::MAX)
}

async fn send_stage(ctx: &Ctx, m: jetstream::Message) {
    let job: SendJob = match serde_json::from_slice(&m.payload) {
        Ok(j) => j,
        Err(e) => {
            tracing::error!(error = %e, "dropping a push that does not decode");
            ack(&m, AckKind::Term).await;
            return;
        }
    };
    let Some(record) = with_push(ctx, &job.tenant) else {
        ack(&m, AckKind::Ack).await;
        return;
    };
    let Some(settings) = record.push.as_ref() else {
        ack(&m, AckKind::Ack).await;
        return;
    };
    let allow_private = ctx.clients.allow_private;
    let targets_ok = |urls: &[&str]| {
        urls.iter()
            .try_for_each(|u| providers::check_target(u, allow_private))
    };
    let attempt = match (job.provider, settings) {
        (
            PushProvider::Webhook,
            PushSettings {
                webhook: Some(w), ..
            },
        ) => match targets_ok(&[&w.url]) {
            Ok(()) => providers::webhook::send(&ctx.clients.http, w, &job).await,
            Err(refused) => refused,
        },
        (PushProvider::Fcm, PushSettings { fcm: Some(f), .. }) => {
            match targets_ok(&[&f.base_url, &f.token_url]) {
                Ok(()) => ctx.fcm.send(&ctx.clients.http, f, &job).await,
                Err(refused) => refused,
            }
        }
        (PushProvider::Apns, PushSettings { apns: Some(a), .. }) => {
            match targets_ok(&[&a.base_url]) {
                Ok(()) => ctx.apns.send(&ctx.clients.h2, a, &job).await,
                Err(refused) => refused,
            }
        }
        (provider, _) => Attempt::Fatal(format!(
            "the tenant has no {provider:?} settings for this device's token"
        )),
    };
    let tries = m.info().map_or(1, |i| i.delivered.max(1));
    let outcome = match &attempt {
        Attempt::Sent => "sent",
        Attempt::Gone(_) => "token_gone",
        Attempt::Retry(_) if tries < i64::from(settings.max_attempts) => "retry",
        Attempt::Retry(_) | Attempt::Fatal(_) => "dead_letter",
    };
    metrics::counter!(PUSH_JOBS, "outcome" => outcome).increment(1);
    match attempt {
        Attempt::Sent => {
            tracing::info!(tenant = %job.tenant, user = %job.user, device = %job.device, provider = ?job.provider, "push sent");
            ack(&m, AckKind::Ack).await;
        }
        Attempt::Gone(why) => {
            tracing::info!(tenant = %job.tenant, user = %job.user, device = %job.device, %why, "push token is dead; forgetting it");
            if let Err(e) = ctx
                .tokens
                .unregister(&job.tenant, &job.user, &job.device, Some(&job.token))
                .await
            {
                tracing::warn!(error = %e, "forgetting a dead push token failed");
            }
            ack(&m, AckKind::Ack).await;
        }
        Attempt::Retry(why) if tries < i64::from(settings.max_attempts) => {
            let delay = Duration::from_secs(1 << (tries - 1).clamp(0, 6));
            tracing::info!(tenant = %job.tenant, tries, ?delay, %why, "push failed; trying again");
            ack(&m, AckKind::Nak(Some(delay))).await;
        }
        Attempt::Retry(why) | Attempt::Fatal(why) => {
            tracing::warn!(tenant = %job.tenant, user = %job.user, device = %job.device, tries, %why, "push failed for good; to the dead letters");
            let mut headers = HeaderMap::new();
            headers.insert(HEADER_PUSH_ERROR, why.replace(['\r', '\n'], " ").as_str());
            let dead = ctx
                .js
                .publish_with_headers(dead_subject(&job.tenant), headers, m.payload.clone())
                .await;
            match dead {
                Ok(ack_future) => match ack_future.await {
                    Ok(_) => ack(&m, AckKind::Ack).await,
                    Err(e) => {
                        tracing::warn!(error = %e, "a dead letter was not stored; trying again");
                        ack(&m, AckKind::Nak(Some(Duration::from_secs(5)))).await;
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "a dead letter was not published; trying again");
                    ack(&m, AckKind::Nak(Some(Duration::from_secs(5)))).await;
                }
            }
        }
    }
}

/// Pushes to one device by outcome: `sent`, `token_gone` (the provider
/// called the token dead; it is forgotten), `retry` (tried again later),
/// `dead_letter` (failed for good, kept in `SB_PUSH_DEAD`).
pub const PUSH_JOBS: &str = "switchboard_push_jobs_total";

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
