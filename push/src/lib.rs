//! Push notifications (F15): the two stages of the push pipeline on the
//! `SB_PUSH` stream (see `switchboard_nats::push_jobs`), run by every
//! worker process on shared consumers, so pushes keep flowing while any
//! worker lives.
//!
//! **Deliver** (`deliver.rs`): a message job waits the tenant's `delay_ms` after the
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
//! (`switchboard_outbound::AnswerCaps`).
//!
//! What a push shows is the tenant's `preview`: nothing but "New message",
//! the sender, or the sender and the message's one-line preview (100
//! characters at most), worded by the tenant's templates per kind where
//! it set them (v1.3), with the recipient's unread total as its badge
//! (`wording.rs`). Ciphertext never shows more than the sender.
//!
//! Every provider call goes through `switchboard_outbound`'s clients: no
//! private target unless the operator allows it, every answer read within
//! a bound. The tenants' event webhooks are `switchboard-webhooks`.

mod backlog;
mod counters;
mod deliver;
pub mod providers;
mod send;
mod share;
mod stage;
mod wording;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use futures::StreamExt;
use switchboard_nats::definitions::{PUSH_COLLAPSE_BUCKET, PUSH_STREAM, push_consumers};
use switchboard_nats::records::push_tokens::PushTokens;
use switchboard_nats::records::tenants::TenantBook;
use switchboard_store::Store;
use tokio::sync::Semaphore;

pub use counters::{PUSH_JOBS, PUSH_MESSAGES_SHED, describe_metrics};
pub use deliver::{collapsed, due};
pub use send::{HEADER_PUSH_ATTEMPTS, HEADER_PUSH_NOT_BEFORE};
pub use wording::{BADGE_CONVERSATIONS, kind_for, preview};

use share::TenantShares;
use stage::{Ctx, ack};
use switchboard_outbound::{CallConfig, Clients};

/// Settings of the push stage that are the deployment's, not a tenant's.
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// How provider calls are bounded, which CA they trust besides the
    /// public ones, and whether targets may be private addresses.
    pub calls: CallConfig,
    /// Jobs of each stage in progress at once in this process.
    pub concurrency: usize,
    /// Provider calls of one tenant in progress at once in this process:
    /// a tenant whose endpoints hang holds this many, never the stage.
    pub tenant_concurrency: usize,
    /// Sends of one tenant waiting in `SB_PUSH` past which its messages
    /// queue no more pushes (approximate, see `backlog.rs`).
    pub tenant_max_queued: u64,
}

impl Default for PushConfig {
    fn default() -> Self {
        Self {
            calls: CallConfig::default(),
            concurrency: 64,
            tenant_concurrency: 8,
            tenant_max_queued: 1000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// A bucket, stream or consumer could not be opened: the client's
    /// error, kept whole.
    #[error("push: {0}")]
    Backbone(#[source] switchboard_nats::Cause),
    /// The consumer definitions do not parse.
    #[error("push: {0}")]
    Definition(#[from] switchboard_nats::BackboneError),
    #[error("push: {0}")]
    Tokens(#[from] switchboard_nats::records::push_tokens::PushTokenError),
    #[error("push HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

fn nats(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> PushError {
    PushError::Backbone(switchboard_nats::cause(e))
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
    // Tenant bans (v1.3): a banned user's devices get no pushes. Loaded
    // before the first job, followed for as long as the process runs.
    let bans = switchboard_nats::records::bans::BanBook::default();
    let _follower = bans.follow(&js, Arc::new(|_, _, _| {})).await?;
    let ctx = Arc::new(Ctx {
        bans,
        tokens: PushTokens::open(&js).await?,
        collapse: js.get_key_value(PUSH_COLLAPSE_BUCKET).await.map_err(nats)?,
        clients: Clients::new(&config.calls, "switchboard-push")?,
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
                Stage::Deliver => deliver::not_due_for(&ctx, &m),
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
                    Stage::Deliver => deliver::deliver_stage(&ctx, m).await,
                }
                drop(permit);
                drop(slot);
            });
        }
        tracing::warn!(consumer = %name, "push consumer ended; consuming again");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
