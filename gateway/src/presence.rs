//! Presence (F9), the gateway's part: announcing which users are connected
//! here, and answering `GET /v1/users/{user}/presence`.
//!
//! The hub calls [`Announcer::online`] when a user's first connection to
//! this gateway joins and [`Announcer::offline`] when the last one leaves;
//! the announcer keeps the user's key in `sb_presence` alive in between.
//! Turning those keys into `presence` frames for the user's contacts is the
//! worker's job (it sees every gateway's keys, and their expiry when a
//! gateway dies).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use switchboard_backbone::definitions::{LAST_SEEN_BUCKET, PRESENCE_BUCKET};
use switchboard_backbone::records::presence::{PresenceView, last_seen_key, presence_key};
use switchboard_protocol::{PresenceInfo, PresenceStatus, TenantId, Timestamp, UserId};

use crate::GatewayError;

pub(crate) struct Presence {
    bucket: kv::Store,
    last_seen: kv::Store,
    view: Arc<PresenceView>,
    gateway_id: String,
    /// Users with at least one connection here.
    local: Mutex<HashSet<(TenantId, UserId)>>,
}

fn now_ms() -> Vec<u8> {
    Timestamp::now().unix_ms().to_string().into_bytes()
}

impl Presence {
    /// Opens the buckets, starts watching, and refreshes this gateway's keys
    /// every `ttl / 3`.
    pub async fn start(
        js: &jetstream::Context,
        gateway_id: String,
        ttl: Duration,
    ) -> Result<Arc<Self>, GatewayError> {
        let open = |name: &'static str| async move {
            js.get_key_value(name)
                .await
                .map_err(|e| GatewayError::bucket(format!("bucket {name}"), e))
        };
        let bucket = open(PRESENCE_BUCKET).await?;
        let presence = Arc::new(Self {
            view: PresenceView::watch(bucket.clone()),
            bucket,
            last_seen: open(LAST_SEEN_BUCKET).await?,
            gateway_id,
            local: Mutex::new(HashSet::new()),
        });
        tokio::spawn(refresh(
            Arc::downgrade(&presence),
            (ttl / 3).max(Duration::from_millis(100)),
        ));
        Ok(presence)
    }

    fn key(&self, tenant: &TenantId, user: &UserId) -> String {
        presence_key(tenant, user, &self.gateway_id)
    }

    pub async fn online(&self, tenant: &TenantId, user: &UserId) {
        if let Ok(mut local) = self.local.lock() {
            local.insert((tenant.clone(), user.clone()));
        }
        if let Err(e) = self
            .bucket
            .put(self.key(tenant, user), now_ms().into())
            .await
        {
            tracing::warn!(error = %e, "announcing presence failed; the next refresh retries");
        }
    }

    pub async fn offline(&self, tenant: &TenantId, user: &UserId) {
        if let Ok(mut local) = self.local.lock() {
            local.remove(&(tenant.clone(), user.clone()));
        }
        if let Err(e) = self.bucket.delete(self.key(tenant, user)).await {
            tracing::warn!(error = %e, "withdrawing presence failed; it expires by itself");
        }
    }

    /// Withdraws every user of this gateway (graceful shutdown).
    pub async fn withdraw_all(&self) {
        let users: Vec<_> = self
            .local
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default();
        for (tenant, user) in users {
            self.offline(&tenant, &user).await;
        }
    }

    /// Where a user stands now.
    pub async fn lookup(&self, tenant: &TenantId, user: &UserId) -> PresenceInfo {
        if self.view.is_online(tenant, user) {
            return PresenceInfo {
                user_id: user.clone(),
                status: PresenceStatus::Online,
                last_seen: Some(Timestamp::now()),
            };
        }
        let last_seen = match self.last_seen.get(last_seen_key(tenant, user)).await {
            Ok(Some(v)) => std::str::from_utf8(&v)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .map(Timestamp::from_unix_ms),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "reading last seen failed");
                None
            }
        };
        PresenceInfo {
            user_id: user.clone(),
            status: PresenceStatus::Offline,
            last_seen,
        }
    }
}

async fn refresh(presence: std::sync::Weak<Presence>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let Some(p) = presence.upgrade() else {
            return;
        };
        let users: Vec<_> = p
            .local
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default();
        for (tenant, user) in users {
            if let Err(e) = p.bucket.put(p.key(&tenant, &user), now_ms().into()).await {
                tracing::warn!(error = %e, "refreshing presence failed");
            }
        }
    }
}
