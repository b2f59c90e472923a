//! The tenants this process knows ([`TenantBook`]), loaded from
//! `sb_tenants` and kept current by following the bucket.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_nats::jetstream::{self, kv};
use switchboard_protocol::TenantId;

use crate::definitions::TENANTS_BUCKET;
use crate::records::follow::follow_bucket;

use super::error::{TenantError, nats};
use super::record::{TenantQuotas, TenantRecord, decode_record, tenant_of_key};

/// Every tenant of the bucket as this process knows it now.
#[derive(Clone, Default)]
pub struct TenantBook {
    tenants: Arc<RwLock<HashMap<TenantId, Arc<TenantRecord>>>>,
}

/// Called with the tenant whose record changed (`None`: deleted).
pub type OnChange = Arc<dyn Fn(&TenantId, Option<&TenantRecord>) + Send + Sync>;

impl TenantBook {
    pub fn get(&self, id: &TenantId) -> Option<Arc<TenantRecord>> {
        self.tenants.read().ok()?.get(id).cloned()
    }

    /// The tenants with at least one webhook.
    pub fn with_webhooks(&self) -> Vec<TenantId> {
        self.tenants
            .read()
            .map(|t| {
                t.iter()
                    .filter(|(_, r)| !r.webhooks.is_empty())
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The tenants with a default retention (v1.2).
    pub fn with_retention(&self) -> Vec<TenantId> {
        self.tenants
            .read()
            .map(|t| {
                t.iter()
                    .filter(|(_, r)| r.retention_days.is_some())
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The tenant's default retention in days, if it has one.
    pub fn retention_days(&self, id: &TenantId) -> Option<u32> {
        self.get(id).and_then(|t| t.retention_days)
    }

    /// Whether the tenant's messages get link previews (v1.3): on unless
    /// the tenant turned them off.
    pub fn link_previews(&self, id: &TenantId) -> bool {
        self.tenants
            .read()
            .ok()
            .and_then(|t| t.get(id).map(|r| r.link_previews != Some(false)))
            .unwrap_or(true)
    }

    /// The tenant's quotas (none for a tenant of the file only). Cheap:
    /// called on every send.
    pub fn quotas(&self, id: &TenantId) -> TenantQuotas {
        self.tenants
            .read()
            .ok()
            .and_then(|t| t.get(id).map(|r| r.quotas))
            .unwrap_or_default()
    }

    fn apply(&self, entry: &kv::Entry, on_change: &OnChange) {
        let Some(id) = tenant_of_key(&entry.key) else {
            tracing::warn!(key = %entry.key, "ignoring an sb_tenants key that is no tenant id");
            return;
        };
        let record = if entry.operation == kv::Operation::Put {
            match decode_record(&id, &entry.value) {
                Ok(r) => Some(r),
                Err(e) => {
                    // The tenant keeps what it had: a broken record must
                    // not lock a tenant out or lift its quotas.
                    tracing::warn!(tenant = %id, error = %e, "ignoring an sb_tenants record");
                    return;
                }
            }
        } else {
            None
        };
        if let Ok(mut tenants) = self.tenants.write() {
            match &record {
                Some(r) => tenants.insert(id.clone(), Arc::new(r.clone())),
                None => tenants.remove(&id),
            };
        }
        tracing::info!(tenant = %id, deleted = record.is_none(), "tenant changed");
        on_change(&id, record.as_ref());
    }

    /// Loads every tenant, then follows changes in the background.
    /// Returns once the tenants of the moment are loaded, so a process
    /// never serves with an old view.
    pub async fn follow(
        &self,
        js: &jetstream::Context,
        on_change: OnChange,
    ) -> Result<tokio::task::JoinHandle<()>, TenantError> {
        let book = self.clone();
        follow_bucket(js, TENANTS_BUCKET, move |entry| {
            book.apply(entry, &on_change)
        })
        .await
        .map_err(nats)
    }
}
