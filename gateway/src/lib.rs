//! The edge: WebSocket data plane and REST control plane (PROTOCOL.md).
//!
//! A gateway authenticates every request (`auth`), turns writes into
//! commands on the conversation's ingest partition (`commands`), and
//! routes events from NATS to its connections (`hub`). It never assigns a
//! `seq` or writes a message itself: the worker that owns the partition
//! does, and answers through NATS. Reads (history, backlog, conversation
//! lists) go straight to the store, which checks membership.

mod answering;
pub mod auth;
mod commands;
pub mod config;
mod connection;
pub mod error;
mod http;
pub mod hub;
mod ingest;
mod key_directory;
pub mod media;
pub mod metrics;
mod outbox;
mod presence;
mod quota;
mod rates;
mod receipts;
mod sends;
mod server;
mod shapes;
mod typing;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use switchboard_backbone::node_id::IdSource;
use switchboard_plugin_host::deploy::Deployer;
use switchboard_plugin_host::deploy_service::PluginAdmin;
use switchboard_plugin_host::fanout::FanOut;
use switchboard_plugin_host::{Hook, Moderation, ModerationInput, Plugins};
use switchboard_protocol::{Content, ConversationId, ConversationKind, ErrorCode, TenantId};
use switchboard_store::Store;

use crate::error::ApiError;

pub use auth::{Identity, TenantDirectory};
pub use config::{DevTokens, GatewayConfig, Limits, MediaConfig, TenantConfig};
/// The `sb_keys` decoder, for the fuzz targets.
#[doc(hidden)]
pub use key_directory::{DeviceRecord, UserRecord, decode as decode_keys_value};

/// Everything a request handler needs; shared by all connections.
pub struct Gateway {
    config: GatewayConfig,
    tenants: Arc<TenantDirectory>,
    quotas: quota::Quotas,
    rates: rates::Rates,
    store: Arc<dyn Store>,
    client: async_nats::Client,
    js: jetstream::Context,
    /// Sends on their way to their partitions' writers (`ingest.rs`).
    ingest: ingest::Ingest,
    hub: hub::Hub,
    ids: Arc<dyn IdSource>,
    plugins: Arc<Plugins>,
    /// The plugin admin API's reads here, its changes through the
    /// workers' deploy service.
    deployer: PluginAdmin,
    shapes: shapes::Shapes,
    media: media::MediaStore,
    keys: crate::key_directory::KeyDirectory,
    tenant_registry: switchboard_backbone::records::tenants::TenantRegistry,
    push_tokens: switchboard_backbone::records::push_tokens::PushTokens,
    refusals: switchboard_backbone::records::refusals::Refusals,
    /// Turns true once shutdown begins: no new connection is taken, and
    /// every open one drains (`connection.rs`).
    draining: tokio::sync::watch::Sender<bool>,
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Keys(#[from] auth::KeyError),
    #[error("limits: {0}")]
    Limits(String),
    #[error("serving HTTP: {0}")]
    Io(#[from] std::io::Error),
    /// A backbone call of the start-up failed; each kind of cause keeps
    /// its own typed error, and all of them read "backbone: ..." as before.
    #[error("backbone: {0}")]
    Backbone(#[from] switchboard_backbone::BackboneError),
    #[error("backbone: {0}")]
    Deploy(#[from] switchboard_plugin_host::deploy::DeployError),
    #[error("backbone: {0}")]
    Tenants(#[from] switchboard_backbone::records::tenants::TenantError),
    #[error("backbone: {0}")]
    PushTokens(#[from] switchboard_backbone::records::push_tokens::PushTokenError),
    /// A bucket could not be opened; `context` names it.
    #[error("backbone: {context}: {source}")]
    Bucket {
        context: String,
        #[source]
        source: switchboard_backbone::Cause,
    },
}

impl GatewayError {
    fn bucket(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Bucket {
            context: context.into(),
            source: switchboard_backbone::cause(source),
        }
    }
}

impl Gateway {
    pub async fn new(
        config: GatewayConfig,
        client: async_nats::Client,
        store: Arc<dyn Store>,
        ids: Arc<dyn IdSource>,
        plugins: Arc<Plugins>,
        media: media::MediaStore,
    ) -> Result<Arc<Self>, GatewayError> {
        if config.limits.hard_max_frame_bytes < config.limits.max_frame_bytes {
            return Err(GatewayError::Limits(
                "hard_max_frame_bytes must be at least max_frame_bytes".into(),
            ));
        }
        if config.operator_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err(GatewayError::Limits(
                "operator_token must be at least 16 bytes".into(),
            ));
        }
        config.check().map_err(GatewayError::Limits)?;
        // Tokens are accepted as long past `exp` as sessions outlive it.
        let leeway = config.limits.token_expiry_grace_ms.div_ceil(1000);
        let tenants = Arc::new(
            TenantDirectory::from_config(&config.tenants, leeway)?
                .with_max_lifetime(config.limits.max_token_lifetime_secs),
        );
        let js = jetstream::context::ContextBuilder::new()
            .max_ack_inflight(config.jetstream_max_inflight.max(1))
            .build(client.clone());
        // This gateway's subject first: the registry may name it from the
        // first connection on.
        let deliveries = client
            .subscribe(switchboard_backbone::subject::gateway_events(
                &config.gateway_id,
            ))
            .await
            .map_err(|e| GatewayError::bucket("subscribing to this gateway's events", e))?;
        let registry = js
            .get_key_value(switchboard_backbone::definitions::PRESENCE_BUCKET)
            .await
            .map_err(|e| GatewayError::bucket("the session registry", e))?;
        let sessions = switchboard_backbone::sessions::Sessions::start(
            client.clone(),
            registry,
            format!("gateway:{}", config.gateway_id),
            config.services,
        )
        .await?;
        let presence = presence::Presence::start(
            &js,
            sessions.clone(),
            config.gateway_id.clone(),
            config.presence_ttl,
        )
        .await?;
        let hub = hub::Hub::new(
            hub::HubParts {
                client: client.clone(),
                deliveries,
                presence,
                sessions,
                sync_within: config.session_sync_timeout,
            },
            store.clone(),
            config.fanout,
            plugins.clone(),
        );
        hub.follow_fan_out_changes();
        let deployer = PluginAdmin::open(&js, Deployer::open(&js, plugins.clone()).await?).await?;
        // Tenants of sb_tenants replace the file's from the first request
        // on, and every change after.
        let book = switchboard_backbone::records::tenants::TenantBook::default();
        let directory = tenants.clone();
        book.follow(
            &js,
            Arc::new(move |id, record| directory.apply_record(id, record)),
        )
        .await?;
        let tenant_registry =
            switchboard_backbone::records::tenants::TenantRegistry::open(&js).await?;
        let push_tokens = switchboard_backbone::records::push_tokens::PushTokens::open(&js).await?;
        if let Some(local) = media.local.clone() {
            // Uploads a crash cut short leave `.part` files and claims;
            // a minute untouched is long past the body timeout.
            tokio::spawn(async move {
                match local.sweep_unfinished(Duration::from_secs(60)).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(files = n, "removed unfinished uploads"),
                    Err(e) => tracing::warn!(error = %e, "sweeping unfinished uploads failed"),
                }
            });
        }
        let refusals = switchboard_backbone::records::refusals::Refusals::open(&js).await?;
        let keys = js
            .get_key_value(switchboard_backbone::definitions::KEYS_BUCKET)
            .await
            .map_err(|e| GatewayError::bucket("key directory", e))?;
        let ingest = ingest::Ingest::start(
            &js,
            config.partitions,
            ingest::BatchLimits {
                sends: config.ingest_batch_max_sends.max(1),
                bytes: config.ingest_batch_max_bytes,
            },
        );
        let rates = rates::Rates::new(config.limits.clone());
        let gateway = Arc::new(Self {
            config,
            tenants,
            rates,
            quotas: quota::Quotas::new(book),
            store,
            hub,
            client,
            ingest,
            js,
            ids,
            plugins,
            deployer,
            shapes: shapes::Shapes::default(),
            media,
            keys: crate::key_directory::KeyDirectory::new(keys),
            tenant_registry,
            push_tokens,
            refusals,
            draining: tokio::sync::watch::Sender::new(false),
        });
        media::start_collector(&gateway);
        Ok(gateway)
    }

    /// Runs the tenant's moderation plugin, if one is deployed, over
    /// content a client sends or edits in: the content to store, or the
    /// error to answer with (`rejected_by_policy`, or `unavailable` when
    /// the plugin failed and moderation fails closed). Costs nothing for
    /// tenants without one.
    pub(crate) async fn moderate(
        &self,
        id: &Identity,
        conversation: &ConversationId,
        content: Content,
    ) -> Result<Content, ApiError> {
        if !self.plugins.wants(&id.tenant, Hook::Moderation) {
            return Ok(content);
        }
        let (kind, member_count) = self
            .shapes
            .get(&*self.store, &id.tenant, conversation, &id.user)
            .await?;
        let input = ModerationInput {
            tenant: &id.tenant,
            conversation_id: conversation,
            kind,
            member_count,
            sender: &id.user,
            content: &content,
        };
        match self.plugins.moderate(&input, &self.config.limits.content) {
            Moderation::Allow => Ok(content),
            Moderation::Rewrite(rewritten) => Ok(rewritten),
            Moderation::Reject(reason) => Err(ApiError::new(ErrorCode::RejectedByPolicy, reason)),
            Moderation::Failed(why) => Err(ApiError::new(ErrorCode::Unavailable, why)),
        }
    }

    /// How a conversation fans out: the tenant's plugin, else the
    /// configured threshold. The writer decides the same way.
    pub(crate) fn fan_out(
        &self,
        tenant: &TenantId,
        kind: ConversationKind,
        members: usize,
    ) -> FanOut {
        self.plugins
            .fan_out_mode(tenant, kind, members, &self.config.fanout)
    }

    /// The HTTP application: REST, WebSocket, health.
    pub fn router(self: &Arc<Self>) -> axum::Router {
        http::router(self.clone(), None)
    }

    /// Connections currently open on this gateway.
    pub async fn connection_count(&self) -> usize {
        self.hub.connection_count().await
    }

    /// Publishes an event to the gateways of every user in `to` (core
    /// NATS, at most once), one delivery per gateway.
    pub(crate) async fn publish_to_users<'a>(
        &self,
        tenant: &switchboard_protocol::TenantId,
        to: impl Iterator<Item = &'a switchboard_protocol::UserId>,
        event: &(async_nats::HeaderMap, bytes::Bytes),
    ) -> Result<(), async_nats::PublishError> {
        self.hub.sessions().publish(tenant, to, event).await
    }

    /// Starts the drain: `/readyz` answers 503, upgrades are refused, and
    /// every connection finishes its in-flight sends and is closed with
    /// 1012 so its client reconnects elsewhere.
    pub fn start_draining(&self) {
        self.draining.send_replace(true);
    }

    pub(crate) fn is_draining(&self) -> bool {
        *self.draining.borrow()
    }

    pub(crate) fn draining(&self) -> tokio::sync::watch::Receiver<bool> {
        self.draining.subscribe()
    }

    /// Waits, at most the drain timeout and a second, until every
    /// connection has left.
    pub async fn drained(&self) {
        let deadline =
            tokio::time::Instant::now() + self.config.drain_timeout + Duration::from_secs(1);
        while self.hub.connection_count().await > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Serves the gateway's HTTP application on `listener`, under the
    /// connection caps and timeouts of `[limits]`, until `shutdown`
    /// resolves; then waits for open HTTP requests (not WebSockets: they
    /// drain on their own).
    pub async fn serve(
        self: &Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), GatewayError> {
        let limits = server::ServeLimits::of(&self.config.limits);
        let router = http::router(self.clone(), listener.local_addr().ok());
        server::serve(listener, router, limits, shutdown).await?;
        Ok(())
    }

    /// Before exiting: withdraws this gateway's users from presence and
    /// the gateway from the routers at once (otherwise their keys expire).
    pub async fn shutdown(&self) {
        self.hub.presence().withdraw_all().await;
        self.hub.sessions().withdraw().await;
    }
}
