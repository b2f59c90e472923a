//! What both push stages share: the context their jobs run in, acking a
//! job, and a tenant's push settings. Imports no other stage.

use std::sync::Arc;

use async_nats::jetstream::{self, AckKind, kv};
use switchboard_nats::records::push_tokens::PushTokens;
use switchboard_nats::records::tenants::{TenantBook, TenantRecord};
use switchboard_store::Store;

use crate::backlog;
use crate::providers::{self, Clients};

/// Everything a job of either stage reads or writes.
pub(crate) struct Ctx {
    pub(crate) js: jetstream::Context,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) tenants: TenantBook,
    pub(crate) tokens: PushTokens,
    pub(crate) collapse: kv::Store,
    pub(crate) clients: Clients,
    pub(crate) fcm: providers::fcm::Fcm,
    pub(crate) apns: providers::apns::Apns,
    pub(crate) backlogs: backlog::Backlogs,
    /// Tenant bans (v1.3), as `sb_tenant_bans` says now.
    pub(crate) bans: switchboard_nats::records::bans::BanBook,
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
