//! What every request handler and connection shares: the gateway's
//! parts, assembled here and built by the binary (`switchboard/src/run.rs`,
//! `gateway`), which also starts what runs beside them. Nothing here does
//! IO at construction.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use switchboard_nats::node_id::IdSource;
use switchboard_nats::records::bans::TenantBans;
use switchboard_nats::records::push_tokens::PushTokens;
use switchboard_nats::records::refusals::Refusals;
use switchboard_nats::records::tenants::{TenantBook, TenantRegistry};
use switchboard_nats::scheduled::Schedules;
use switchboard_plugin_host::deploy_service::PluginAdmin;
use switchboard_plugin_host::fanout::FanOut;
use switchboard_plugin_host::{Hook, Moderation, Plugins, ReactionInput};
use switchboard_protocol::{ConversationId, ConversationKind, ErrorCode, MessageId, TenantId};
use switchboard_store::Store;

use crate::auth::{Identity, TenantDirectory};
use crate::config::GatewayConfig;
use crate::error::{ApiError, GatewayError};
use crate::hub::Hub;
use crate::ingest::Ingest;
use crate::key_directory::KeyDirectory;
use crate::media::MediaStore;
use crate::quota::Quotas;
use crate::rates::Rates;
use crate::shapes::Shapes;

/// Everything a request handler needs; shared by all connections.
pub struct Gateway {
    pub(crate) config: GatewayConfig,
    pub(crate) tenants: Arc<TenantDirectory>,
    pub(crate) quotas: Quotas,
    pub(crate) rates: Rates,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    /// Sends on their way to their partitions' writers (`ingest.rs`).
    pub(crate) ingest: Ingest,
    pub(crate) hub: Hub,
    pub(crate) ids: Arc<dyn IdSource>,
    pub(crate) plugins: Arc<Plugins>,
    /// The plugin admin API's reads here, its changes through the
    /// workers' deploy service.
    pub(crate) deployer: PluginAdmin,
    pub(crate) shapes: Shapes,
    pub(crate) media: MediaStore,
    pub(crate) keys: KeyDirectory,
    pub(crate) tenant_registry: TenantRegistry,
    /// Tenant-wide bans are written here; the token check reads them from
    /// `tenants` (`auth`).
    pub(crate) tenant_bans: TenantBans,
    pub(crate) push_tokens: PushTokens,
    pub(crate) refusals: Refusals,
    /// Scheduled sends (v1.2) on `SB_SCHEDULED`, and the per-user order
    /// their count is checked in (`scheduling.rs`).
    pub(crate) schedules: Schedules,
    pub(crate) scheduling: crate::user_locks::UserLocks,
    /// Turns true once shutdown begins: no new connection is taken, and
    /// every open one drains (`connection.rs`).
    pub(crate) draining: tokio::sync::watch::Sender<bool>,
}

/// What a gateway is made of, each part built by its owner.
pub struct GatewayParts {
    pub config: GatewayConfig,
    /// Who may call: the tenants' keys, kept current from `sb_tenants`
    /// by the process's one follower of it.
    pub tenants: Arc<TenantDirectory>,
    /// The tenants' quotas, from the same follower.
    pub book: TenantBook,
    pub store: Arc<dyn Store>,
    pub client: async_nats::Client,
    /// The JetStream context commands are published with.
    pub js: jetstream::Context,
    pub ingest: Ingest,
    pub hub: Hub,
    pub ids: Arc<dyn IdSource>,
    pub plugins: Arc<Plugins>,
    pub deployer: PluginAdmin,
    pub media: MediaStore,
    pub keys: KeyDirectory,
    pub tenant_registry: TenantRegistry,
    pub tenant_bans: TenantBans,
    pub push_tokens: PushTokens,
    pub refusals: Refusals,
}

impl Gateway {
    /// Assembles the parts, after checking the settings no gateway can
    /// work with.
    pub fn new(parts: GatewayParts) -> Result<Arc<Self>, GatewayError> {
        let GatewayParts {
            config,
            tenants,
            book,
            store,
            client,
            js,
            ingest,
            hub,
            ids,
            plugins,
            deployer,
            media,
            keys,
            tenant_registry,
            tenant_bans,
            push_tokens,
            refusals,
        } = parts;
        config.check().map_err(GatewayError::Limits)?;
        let schedules = Schedules::new(js.clone());
        Ok(Arc::new(Self {
            rates: Rates::new(config.limits.clone()),
            quotas: Quotas::new(book),
            config,
            tenants,
            store,
            hub,
            client,
            ingest,
            js,
            ids,
            plugins,
            deployer,
            shapes: Shapes::default(),
            media,
            keys,
            tenant_registry,
            tenant_bans,
            push_tokens,
            refusals,
            schedules,
            scheduling: crate::user_locks::UserLocks::default(),
            draining: tokio::sync::watch::Sender::new(false),
        }))
    }

    /// Runs the tenant's moderation plugin over a reaction being added,
    /// if one is deployed that sees reactions: `rejected_by_policy` with
    /// its reason for a refused emoji, `unavailable` when it failed and
    /// moderation fails closed.
    pub(crate) async fn moderate_reaction(
        &self,
        id: &Identity,
        conversation: &ConversationId,
        message_id: MessageId,
        emoji: &str,
    ) -> Result<(), ApiError> {
        if !self.plugins.wants(&id.tenant, Hook::Moderation) {
            return Ok(());
        }
        let (kind, member_count) = self
            .shapes
            .get(&*self.store, &id.tenant, conversation, &id.user)
            .await?;
        let input = ReactionInput {
            tenant: &id.tenant,
            conversation_id: conversation,
            kind,
            member_count,
            sender: &id.user,
            message_id,
            emoji,
        };
        match self.plugins.moderate_reaction(&input) {
            Moderation::Allow | Moderation::Rewrite(_) => Ok(()),
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

    /// Before exiting: withdraws this gateway's users from presence and
    /// the gateway from the routers at once (otherwise their keys expire).
    pub async fn shutdown(&self) {
        self.hub.presence().withdraw_all().await;
        self.hub.sessions().withdraw().await;
    }
}
