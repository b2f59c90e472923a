//! Presence (F9), the gateway's part: announcing which users are connected
//! here, and answering `GET /v1/users/{user}/presence`.
//!
//! The hub calls [`Presence::online`] when a user's first connection to
//! this gateway joins and [`Presence::offline`] when the last one leaves;
//! the user's key in `sb_presence` is kept alive in between. The same keys
//! are the session registry that routes events here
//! (`switchboard_nats::sessions`).
//! Turning those keys into `presence` frames for the user's contacts is the
//! worker's job (it sees every gateway's keys, and their expiry when a
//! gateway dies).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use switchboard_nats::definitions::LAST_SEEN_BUCKET;
use switchboard_nats::records::presence::{last_seen_key, parse_last_seen, presence_key};
use switchboard_nats::sessions::Sessions;
use switchboard_protocol::{PresenceInfo, PresenceStatus, TenantId, Timestamp, UserId};

use crate::GatewayError;

pub struct Presence {
    sessions: Arc<Sessions>,
    last_seen: kv::Store,
    gateway_id: String,
    /// Users with at least one connection here: the stint (the hub's id
    /// for the user's presence here, from the first connection to the
    /// last) and the registry's revision of their key written last (0
    /// before the first write lands).
    local: Mutex<HashMap<(TenantId, UserId), (u64, u64)>>,
}

fn now_ms() -> Vec<u8> {
    Timestamp::now().unix_ms().to_string().into_bytes()
}

impl Presence {
    /// Opens the last-seen bucket and refreshes this gateway's keys every
    /// `ttl / 3`.
    pub async fn start(
        js: &jetstream::Context,
        sessions: Arc<Sessions>,
        gateway_id: String,
        ttl: Duration,
    ) -> Result<Arc<Self>, GatewayError> {
        let last_seen = js
            .get_key_value(LAST_SEEN_BUCKET)
            .await
            .map_err(|e| GatewayError::bucket(format!("bucket {LAST_SEEN_BUCKET}"), e))?;
        let presence = Arc::new(Self {
            sessions,
            last_seen,
            gateway_id,
            local: Mutex::new(HashMap::new()),
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

    /// Writes the user's key for a new stint; the registry's revision that
    /// holds it.
    pub async fn online(&self, tenant: &TenantId, user: &UserId, stint: u64) -> Option<u64> {
        let user_key = (tenant.clone(), user.clone());
        if let Ok(mut local) = self.local.lock() {
            local.insert(user_key.clone(), (stint, 0));
        }
        match self
            .sessions
            .bucket()
            .put(self.key(tenant, user), now_ms().into())
            .await
        {
            Ok(revision) => {
                self.wrote(&user_key, revision);
                Some(revision)
            }
            Err(e) => {
                tracing::warn!(error = %e, "announcing presence failed; the next refresh retries");
                None
            }
        }
    }

    /// Notes the revision of a key written, if its user is still here.
    fn wrote(&self, user_key: &(TenantId, UserId), revision: u64) {
        if let Ok(mut local) = self.local.lock()
            && let Some((_, last)) = local.get_mut(user_key)
        {
            *last = (*last).max(revision);
        }
    }

    /// Ends a stint: deletes the user's key, unless a newer write of it
    /// stands. A new stint of the user here (a connection right after the
    /// last one left) writes the key again, and that write must survive
    /// this delete whichever lands first; a stint that has already been
    /// replaced deletes nothing.
    pub async fn offline(&self, tenant: &TenantId, user: &UserId, stint: u64) {
        let user_key = (tenant.clone(), user.clone());
        let last = {
            let Ok(mut local) = self.local.lock() else {
                return;
            };
            match local.get(&user_key) {
                Some(&(current, last)) if current == stint => {
                    local.remove(&user_key);
                    last
                }
                _ => return,
            }
        };
        let bucket = self.sessions.bucket();
        let key = self.key(tenant, user);
        let result = match last {
            revision if revision > 0 => bucket
                .delete_expect_revision(key, Some(revision))
                .await
                .map_err(|e| {
                    // A refresh racing this leave may also have written
                    // it: the key then expires by itself.
                    tracing::debug!(error = %e, "a newer write of the presence key stands")
                }),
            _ => bucket.delete(key).await.map_err(
                |e| tracing::warn!(error = %e, "withdrawing presence failed; it expires by itself"),
            ),
        };
        let _ = result;
    }

    /// Withdraws every user of this gateway (graceful shutdown).
    pub async fn withdraw_all(&self) {
        let users: Vec<_> = self
            .local
            .lock()
            .map(|l| {
                l.iter()
                    .map(|(k, (stint, _))| (k.clone(), *stint))
                    .collect()
            })
            .unwrap_or_default();
        for ((tenant, user), stint) in users {
            self.offline(&tenant, &user, stint).await;
        }
    }

    /// Where a user stands now.
    pub async fn lookup(&self, tenant: &TenantId, user: &UserId) -> PresenceInfo {
        if self.sessions.routing_table().is_online(tenant, user) {
            return PresenceInfo {
                user_id: user.clone(),
                status: PresenceStatus::Online,
                last_seen: Some(Timestamp::now()),
            };
        }
        let last_seen = match self.last_seen.get(last_seen_key(tenant, user)).await {
            Ok(Some(v)) => parse_last_seen(&v),
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
            .map(|l| l.keys().cloned().collect())
            .unwrap_or_default();
        for user_key in users {
            match p
                .sessions
                .bucket()
                .put(p.key(&user_key.0, &user_key.1), now_ms().into())
                .await
            {
                Ok(revision) => p.wrote(&user_key, revision),
                Err(e) => tracing::warn!(error = %e, "refreshing presence failed"),
            }
        }
    }
}
