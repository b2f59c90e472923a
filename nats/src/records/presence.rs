//! Presence on the backbone (F9).
//!
//! Each gateway keeps a key `<tenant>.<user>.<gateway>` in `sb_presence`
//! while it has a connection of the user, refreshing it well within the
//! bucket's TTL; the last connection's end deletes it. A gateway that dies
//! stops refreshing, and its keys expire with a marker. A user is online
//! while any of their keys lives.
//!
//! [`PresenceView`] watches the bucket and keeps that picture in memory in
//! every process that needs it, and reports each user's transitions
//! between online and offline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::kv;
use futures::StreamExt;
use switchboard_protocol::{TenantId, Timestamp, UserId};
use tokio::sync::broadcast;

use crate::kv_key::{id, part};

/// The key of one user on one gateway.
pub fn presence_key(tenant: &TenantId, user: &UserId, gateway: &str) -> String {
    format!(
        "{}.{}.{}",
        part(tenant.as_str()),
        part(user.as_str()),
        part(gateway)
    )
}

/// The key of a user's last-seen time in `sb_last_seen`.
pub fn last_seen_key(tenant: &TenantId, user: &UserId) -> String {
    format!("{}.{}", part(tenant.as_str()), part(user.as_str()))
}

/// (tenant, user, gateway) of a presence key.
fn parse_key(key: &str) -> Option<(TenantId, UserId, String)> {
    let mut parts = key.split('.');
    let (t, u, g) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    Some((
        TenantId::new(id(t)?).ok()?,
        UserId::new(id(u)?).ok()?,
        id(g)?,
    ))
}

/// A user came online (first connection anywhere) or went offline (last
/// connection gone, or its gateway died).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub tenant: TenantId,
    pub user: UserId,
    pub online: bool,
    pub at: Timestamp,
}

/// Who is online, kept current by watching `sb_presence`.
pub struct PresenceView {
    /// Per online user: each gateway holding them, with its latest refresh.
    online: Mutex<HashMap<(TenantId, UserId), HashMap<String, Timestamp>>>,
    transitions: broadcast::Sender<Transition>,
}

impl PresenceView {
    /// Starts watching the bucket; the view fills in the background.
    pub fn watch(bucket: kv::Store) -> Arc<Self> {
        let (transitions, _) = broadcast::channel(4096);
        let view = Arc::new(Self {
            online: Mutex::new(HashMap::new()),
            transitions,
        });
        tokio::spawn(run(bucket, Arc::downgrade(&view)));
        view
    }

    pub fn is_online(&self, tenant: &TenantId, user: &UserId) -> bool {
        self.online
            .lock()
            .map(|m| m.contains_key(&(tenant.clone(), user.clone())))
            .unwrap_or(false)
    }

    /// Transitions from now on. Those of users already online when the
    /// watch started are not reported.
    pub fn subscribe(&self) -> broadcast::Receiver<Transition> {
        self.transitions.subscribe()
    }

    /// Applies one bucket entry; a transition if the user's state flipped.
    fn apply(&self, entry: &kv::Entry) -> Option<Transition> {
        let (tenant, user, gateway) = parse_key(&entry.key)?;
        let mut online = self.online.lock().ok()?;
        let key = (tenant.clone(), user.clone());
        let at = Timestamp::from_unix_ms((entry.created.unix_timestamp_nanos() / 1_000_000) as i64);
        match entry.operation {
            kv::Operation::Put => {
                let gateways = online.entry(key).or_default();
                let was_offline = gateways.is_empty();
                gateways.insert(gateway, at);
                was_offline.then_some(Transition {
                    tenant,
                    user,
                    online: true,
                    at,
                })
            }
            kv::Operation::Delete | kv::Operation::Purge => {
                let gateways = online.get_mut(&key)?;
                let refreshed = gateways.remove(&gateway);
                if !gateways.is_empty() {
                    return None;
                }
                online.remove(&key);
                // A key that expired (its gateway died) was last true when
                // it was last refreshed, not when the server expired it.
                let at = match (entry.operation, refreshed) {
                    (kv::Operation::Purge, Some(refreshed)) => refreshed,
                    _ => at,
                };
                Some(Transition {
                    tenant,
                    user,
                    online: false,
                    at,
                })
            }
        }
    }
}

async fn run(bucket: kv::Store, view: std::sync::Weak<PresenceView>) {
    loop {
        match bucket.watch_with_history(">").await {
            Ok(mut entries) => {
                if let Some(v) = view.upgrade() {
                    // Rebuilt from the bucket's current state.
                    if let Ok(mut online) = v.online.lock() {
                        online.clear();
                    }
                }
                while let Some(entry) = entries.next().await {
                    let Some(v) = view.upgrade() else {
                        return;
                    };
                    let entry = match entry {
                        Ok(e) => e,
                        Err(e) => {
                            tracing::warn!(error = %e, "presence watch failed; restarting it");
                            break;
                        }
                    };
                    let live = entry.seen_current;
                    if let Some(t) = v.apply(&entry)
                        && live
                    {
                        let _ = v.transitions.send(t);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot watch presence; retrying"),
        }
        if view.upgrade().is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_with_dots_and_at_signs() {
        let (t, u) = (
            TenantId::new("acme.eu").unwrap(),
            UserId::new("j.doe@x").unwrap(),
        );
        let key = presence_key(&t, &u, "gw-1");
        assert_eq!(key, "acme=2Eeu.j=2Edoe=40x.gw-1");
        assert_eq!(parse_key(&key), Some((t, u, "gw-1".to_owned())));
        assert_eq!(parse_key("a.b"), None);
    }
}
