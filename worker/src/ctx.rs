//! What every part of a running worker shares: its NATS connections,
//! store, id source, tenants' plugins and quotas, the session registry,
//! its configuration, and whether it leads.

use std::sync::Arc;

use async_nats::jetstream;
use switchboard_nats::node_id::IdSource;
use switchboard_store::Store;

use crate::config::WorkerConfig;
use crate::fence::Leadership;

pub(crate) struct Ctx {
    pub client: async_nats::Client,
    /// Whether this worker leads: it holds partition 0 with a valid
    /// lease, and then announces presence, sweeps inboxes, archives and
    /// balances the ingest leaders.
    pub leader: Leadership,
    pub js: jetstream::Context,
    pub store: Arc<dyn Store>,
    pub ids: Arc<dyn IdSource>,
    /// Tenants' plugins (edit and fan-out policy); `None` runs the
    /// built-in policies only.
    pub plugins: Option<Arc<switchboard_plugin_host::Plugins>>,
    /// Tenants' quotas, following `sb_tenants`.
    pub tenants: switchboard_nats::records::tenants::TenantBook,
    /// Tenants' shadow bans (v1.3), following `sb_tenant_bans`.
    pub bans: switchboard_nats::records::bans::BanBook,
    /// Refused sends, for the gateways to answer resends with.
    pub refusals: switchboard_nats::records::refusals::Refusals,
    /// The session registry: which gateways hold the users events are for.
    pub sessions: Arc<switchboard_nats::sessions::Sessions>,
    pub config: WorkerConfig,
    /// The search index feed, which also acks the writers' batches.
    pub index_feed: crate::writer::index_feed::IndexFeed,
    /// Per conversation, the seq this worker's expiry got to (v1.2).
    pub expired_through:
        std::sync::Mutex<std::collections::HashMap<switchboard_store::ConversationKey, u64>>,
    /// Archived days this worker's retention has rewritten for good
    /// (v1.2).
    pub archive_expired:
        std::sync::Mutex<std::collections::HashSet<(switchboard_store::ConversationKey, u32)>>,
    /// Per conversation and erasure (its pseudonym), the seq this
    /// worker's erasure got to, `u64::MAX` once done (v1.2).
    pub erased_through: std::sync::Mutex<
        std::collections::HashMap<
            (
                switchboard_store::ConversationKey,
                switchboard_protocol::UserId,
            ),
            u64,
        >,
    >,
}
