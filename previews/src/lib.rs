//! Link previews (v1.3): the stage that unfurls the links of stored
//! messages, run by every worker process on one shared consumer
//! (`previews` on `SB_PUSH`, subjects `sb.push.preview.<tenant>`).
//!
//! A message's writer publishes a [`PreviewJob`] after the commit, for a
//! text with `http(s)` links (the first 3), unless the send said
//! `previews: false` or the tenant turned previews off. The stage, for
//! each link: the tenant's card from `sb_previews` if there is one, else
//! the page fetched (`switchboard_outbound::Fetcher`: no private address
//! but the networks the operator allows, redirects checked hop by hop,
//! bounded in bytes and in time), its head read (`html.rs`), its image
//! fetched, known by its bytes and kept as a blob of the tenant
//! (`unfurl.rs`), and the card (or its absence) cached. The tenant's
//! moderator (plugin package 0.4.0) then keeps, drops or rewrites each
//! card for this message, and the cards go to the message's writer as a
//! [`PreviewsCommand`], which stores those whose link the text still has
//! and sends `message_updated`.
//!
//! Never on a send's path: the ack went before the job was published. A
//! tenant whose links are slow holds at most `tenant_concurrency` of the
//! stage's `concurrency` jobs, so others' previews go on; a job that waits
//! for its tenant's share for 10 s is shed (counted).

mod config;
mod html;
mod metrics;
mod unfurl;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use futures::StreamExt;
use switchboard_blob::BlobStore;
use switchboard_nats::commands::addressed;
use switchboard_nats::definitions::{PREVIEWS_BUCKET, PUSH_STREAM, previews_consumer};
use switchboard_nats::envelope::{Command, PreviewsCommand};
use switchboard_nats::push_jobs::PreviewJob;
use switchboard_outbound::Fetcher;
use switchboard_plugin_host::{Hook, Plugins, PreviewInput};
use switchboard_protocol::previews::LinkPreview;
use switchboard_protocol::{ConversationKind, TenantId, UserId};
use tokio::sync::Semaphore;

pub use config::PreviewsConfig;

/// How long a job waits for its tenant's share of the stage before it is
/// shed.
const TENANT_WAIT: Duration = Duration::from_secs(10);
pub use metrics::{PREVIEW_JOBS_SHED, PREVIEW_LINKS, describe_metrics};

use unfurl::Unfurler;

/// Starts the stage on the shared consumer.
pub async fn start(
    js: jetstream::Context,
    blobs: Arc<dyn BlobStore>,
    plugins: Arc<Plugins>,
    config: PreviewsConfig,
) -> Result<tokio::task::JoinHandle<()>, StartError> {
    let stream = js.get_stream(PUSH_STREAM).await.map_err(StartError::nats)?;
    let consumer_config = previews_consumer().map_err(StartError::nats)?;
    let name = consumer_config.durable_name.clone().unwrap_or_default();
    let consumer: jetstream::consumer::PullConsumer = stream
        .get_or_create_consumer(&name, consumer_config)
        .await
        .map_err(StartError::nats)?;
    let cache = js
        .get_key_value(PREVIEWS_BUCKET)
        .await
        .map_err(StartError::nats)?;
    let fetcher =
        Fetcher::new(config.fetch.clone(), "switchboard-previews").map_err(StartError::nats)?;
    let uploader = UserId::new("switchboard-previews").map_err(StartError::nats)?;
    let stage = Arc::new(Stage {
        unfurler: Unfurler {
            fetcher,
            blobs,
            cache,
            config: config.clone(),
            uploader,
        },
        js,
        plugins,
        permits: Arc::new(Semaphore::new(config.concurrency.max(1))),
        tenants: Mutex::new(HashMap::new()),
        tenant_concurrency: config.tenant_concurrency.max(1),
        partitions: config.partitions,
    });
    Ok(tokio::spawn(consume(stage, consumer)))
}

/// Why the stage did not start.
#[derive(Debug, thiserror::Error)]
#[error("starting the link previews stage: {0}")]
pub struct StartError(String);

impl StartError {
    fn nats(e: impl std::fmt::Display) -> Self {
        Self(e.to_string())
    }
}

struct Stage {
    unfurler: Unfurler,
    js: jetstream::Context,
    /// The tenants' moderators, which may drop or rewrite a card.
    plugins: Arc<Plugins>,
    permits: Arc<Semaphore>,
    /// Each tenant's share of the stage.
    tenants: Mutex<HashMap<TenantId, Arc<Semaphore>>>,
    tenant_concurrency: usize,
    partitions: u16,
}

impl Stage {
    /// `tenant`'s share of the stage.
    fn tenant_share(&self, tenant: &TenantId) -> Arc<Semaphore> {
        let mut shares = match self.tenants.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        shares
            .entry(tenant.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(self.tenant_concurrency)))
            .clone()
    }

    /// Every link of the job made a card (or none), then the cards to the
    /// message's writer.
    async fn handle(&self, job: PreviewJob) -> Result<(), String> {
        let cards = futures::future::join_all(
            job.urls
                .iter()
                .map(|url| self.unfurler.card(&job.tenant, url)),
        )
        .await;
        let cards: Vec<_> = cards.into_iter().flatten().collect();
        let previews = self.moderated(&job, cards).await;
        if previews.is_empty() {
            return Ok(());
        }
        let command = Command::Previews(PreviewsCommand {
            tenant: job.tenant,
            conversation_id: job.conversation_id,
            message_id: job.message_id,
            previews,
        });
        let (subject, headers) = addressed(&command, self.partitions, None);
        let body = command.encode().map_err(|e| e.to_string())?;
        self.js
            .publish_with_headers(subject, headers, body)
            .await
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The cards the message shows, as the tenant's moderator decides
    /// them, one call per card (`Plugins::moderate_preview`); off the
    /// async runtime, as a plugin call may run to its deadline. The cache
    /// keeps the cards as made: a verdict is the message's.
    async fn moderated(&self, job: &PreviewJob, cards: Vec<LinkPreview>) -> Vec<LinkPreview> {
        if cards.is_empty() || self.plugins.active(&job.tenant, Hook::Moderation).is_none() {
            return cards;
        }
        // A job of a writer older than the hook names no sender: its
        // cards are not shown rather than shown unmoderated.
        let Some(sender) = job.sender.clone() else {
            return Vec::new();
        };
        let plugins = self.plugins.clone();
        let (tenant, conversation_id) = (job.tenant.clone(), job.conversation_id.clone());
        let (message_id, member_count) = (job.message_id, job.member_count);
        let kind = job.conversation_kind.unwrap_or(ConversationKind::Group);
        let decided = tokio::task::spawn_blocking(move || {
            cards
                .iter()
                .filter_map(|card| {
                    plugins.moderate_preview(&PreviewInput {
                        tenant: &tenant,
                        conversation_id: &conversation_id,
                        kind,
                        member_count,
                        sender: &sender,
                        message_id,
                        card,
                    })
                })
                .collect()
        })
        .await;
        decided.unwrap_or_default()
    }
}

async fn consume(stage: Arc<Stage>, consumer: jetstream::consumer::PullConsumer) {
    loop {
        let mut messages = match consumer.messages().await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "previews consumer; trying again");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        while let Some(next) = messages.next().await {
            let m = match next {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(error = %e, "previews consumer hiccup");
                    continue;
                }
            };
            let Ok(job) = serde_json::from_slice::<PreviewJob>(&m.payload) else {
                // Not a job of ours: never one, however often it comes.
                let _ = m.ack_with(AckKind::Term).await;
                continue;
            };
            // A tenant holding its whole share waits here, in a task of
            // its own, for at most TENANT_WAIT: the loop goes on pulling
            // others' jobs meanwhile, and a job that waited that long is
            // shed, as a push is (a preview is a courtesy; the waiting
            // jobs hold slots of the consumer's max_ack_pending, which
            // every tenant shares).
            let share = stage.tenant_share(&job.tenant);
            let stage = stage.clone();
            tokio::spawn(async move {
                let Ok(Ok(tenant_slot)) =
                    tokio::time::timeout(TENANT_WAIT, share.acquire_owned()).await
                else {
                    metrics::shed();
                    let _ = m.ack_with(AckKind::Term).await;
                    return;
                };
                let Ok(permit) = stage.permits.clone().acquire_owned().await else {
                    return;
                };
                let _held = (permit, tenant_slot);
                let (tenant, message) = (job.tenant.clone(), job.message_id);
                match stage.handle(job).await {
                    Ok(()) => {
                        let _ = m.ack().await;
                    }
                    Err(e) => {
                        tracing::warn!(%tenant, %message, error = %e, "link previews not handed to the writer; trying again");
                        let _ = m.ack_with(AckKind::Nak(Some(Duration::from_secs(5)))).await;
                    }
                }
            });
        }
    }
}
