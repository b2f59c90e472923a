//! Presence on the backbone (F9), and the session registry it is.
//!
//! Each gateway keeps a key `<tenant>.<user>.<gateway>` in `sb_presence`
//! while it has a connection of the user, refreshing it well within the
//! bucket's TTL; the last connection's end deletes it. A gateway that dies
//! stops refreshing, and its keys expire with a marker. A user is online
//! while any of their keys lives, and events for them go to the gateways
//! the keys name (`sessions.rs`).
//!
//! Each process that routes events keeps a key `routers.<id>` there too,
//! refreshed the same way, so that a gateway knows whom to ask before it
//! tells a new connection it is live. Router keys have two parts and user
//! keys three, so neither is ever read as the other.
//!
//! [`RoutingTable`] watches the bucket and keeps that picture in memory in
//! every process that needs it, reports each user's transitions between
//! online and offline, and says which revision of the bucket it has
//! applied.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::kv;
use futures::StreamExt;
use switchboard_protocol::{TenantId, Timestamp, UserId};
use tokio::sync::{broadcast, watch};

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

/// The key of a process that routes events.
pub fn router_key(router: &str) -> String {
    format!("{ROUTERS}.{}", part(router))
}

const ROUTERS: &str = "routers";

/// The key of a user's last-seen time in `sb_last_seen`.
pub fn last_seen_key(tenant: &TenantId, user: &UserId) -> String {
    format!("{}.{}", part(tenant.as_str()), part(user.as_str()))
}

/// A user's last-seen time as `sb_last_seen` holds it (Unix ms, in
/// decimal); `None` for a value that is not one.
pub fn parse_last_seen(value: &[u8]) -> Option<Timestamp> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .map(Timestamp::from_unix_ms)
}

/// What a key of `sb_presence` is about.
#[derive(Debug, PartialEq, Eq)]
pub enum Key {
    /// A user on a gateway.
    User(TenantId, UserId, String),
    /// A process that routes events.
    Router(String),
}

/// What `key` names, if it is a key of `sb_presence`.
pub fn parse_key(key: &str) -> Option<Key> {
    let parts: Vec<&str> = key.split('.').collect();
    match parts[..] {
        [ROUTERS, r] => Some(Key::Router(id(r)?)),
        [t, u, g] => Some(Key::User(
            TenantId::new(id(t)?).ok()?,
            UserId::new(id(u)?).ok()?,
            id(g)?,
        )),
        _ => None,
    }
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

/// Per online user: each gateway holding them, with its latest refresh.
type Gateways = HashMap<Arc<str>, Timestamp>;

#[derive(Default)]
struct State {
    online: HashMap<TenantId, HashMap<UserId, Gateways>>,
    routers: HashSet<String>,
}

/// Who is online and on which gateways, kept current by watching
/// `sb_presence`: the table events are routed by.
pub struct RoutingTable {
    state: Mutex<State>,
    transitions: broadcast::Sender<Transition>,
    /// The bucket's revision the view has applied (a rebuild keeps the
    /// last one until its own picture takes over).
    applied: watch::Sender<u64>,
}

impl RoutingTable {
    /// Starts watching the bucket; the view fills in the background.
    pub fn watch(bucket: kv::Store) -> Arc<Self> {
        let (transitions, _) = broadcast::channel(4096);
        let view = Arc::new(Self {
            state: Mutex::new(State::default()),
            transitions,
            applied: watch::Sender::new(0),
        });
        tokio::spawn(run(bucket, Arc::downgrade(&view)));
        view
    }

    pub fn is_online(&self, tenant: &TenantId, user: &UserId) -> bool {
        self.state
            .lock()
            .map(|s| s.online.get(tenant).is_some_and(|u| u.contains_key(user)))
            .unwrap_or(false)
    }

    /// The gateways that hold each of `users`, with the users each holds.
    pub fn gateways_of<'u>(
        &self,
        tenant: &TenantId,
        users: impl IntoIterator<Item = &'u UserId>,
    ) -> HashMap<Arc<str>, Vec<&'u UserId>> {
        let mut by_gateway: HashMap<Arc<str>, Vec<&'u UserId>> = HashMap::new();
        let Ok(state) = self.state.lock() else {
            return by_gateway;
        };
        let Some(online) = state.online.get(tenant) else {
            return by_gateway;
        };
        for user in users {
            for gateway in online.get(user).into_iter().flat_map(|g| g.keys()) {
                by_gateway.entry(gateway.clone()).or_default().push(user);
            }
        }
        by_gateway
    }

    /// The processes that route events, as of the applied revision.
    pub fn routers(&self) -> Vec<String> {
        self.state
            .lock()
            .map(|s| s.routers.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The bucket's revision this view has applied.
    pub fn applied(&self) -> u64 {
        *self.applied.borrow()
    }

    /// Waits until the view has applied `revision`, for at most `timeout`;
    /// whether it has.
    pub async fn wait_applied(&self, revision: u64, timeout: Duration) -> bool {
        let mut applied = self.applied.subscribe();
        tokio::time::timeout(timeout, applied.wait_for(|&r| r >= revision))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Transitions from now on. Those of users already online when the
    /// watch started are not reported.
    pub fn subscribe(&self) -> broadcast::Receiver<Transition> {
        self.transitions.subscribe()
    }

    /// Applies one bucket entry; a transition if a user's state flipped.
    fn apply(&self, entry: &kv::Entry) -> Option<Transition> {
        let mut state = self.state.lock().ok()?;
        state.apply(entry)
    }
}

impl State {
    /// Applies one bucket entry; a transition if a user's state flipped.
    fn apply(&mut self, entry: &kv::Entry) -> Option<Transition> {
        let key = parse_key(&entry.key);
        let state = self;
        let put = entry.operation == kv::Operation::Put;
        let (tenant, user, gateway) = match key? {
            Key::Router(router) => {
                if put {
                    state.routers.insert(router);
                } else {
                    state.routers.remove(&router);
                }
                return None;
            }
            Key::User(tenant, user, gateway) => (tenant, user, gateway),
        };
        let at = Timestamp::from_unix_ms((entry.created.unix_timestamp_nanos() / 1_000_000) as i64);
        if put {
            let users = state.online.entry(tenant.clone()).or_default();
            let gateways = users.entry(user.clone()).or_default();
            let was_offline = gateways.is_empty();
            gateways.insert(Arc::from(gateway), at);
            return was_offline.then_some(Transition {
                tenant,
                user,
                online: true,
                at,
            });
        }
        let users = state.online.get_mut(&tenant)?;
        let gateways = users.get_mut(&user)?;
        let refreshed = gateways.remove(gateway.as_str());
        if !gateways.is_empty() {
            return None;
        }
        users.remove(&user);
        if users.is_empty() {
            state.online.remove(&tenant);
        }
        // A key that expired (its gateway died) was last true when it was
        // last refreshed, not when the server expired it.
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

/// How long a watch that is rebuilding the picture may stay silent before
/// what it has is taken as the whole bucket (an empty bucket sends
/// nothing to say it is done).
const REBUILD_QUIET: Duration = Duration::from_secs(2);

/// Follows the bucket. Each (re)start of the watch replays the bucket's
/// current keys into a fresh picture *beside* the one in use, which goes
/// on serving lookups until the replay is whole and takes its place: a
/// watch restarted by a lost NATS node must not leave routing blind (with
/// no gateway for anyone, every event of the gap would be dropped, acks
/// included).
async fn run(bucket: kv::Store, view: std::sync::Weak<RoutingTable>) {
    loop {
        match bucket.watch_with_history(">").await {
            Ok(mut entries) => {
                // `Some` while replaying; the revision of its last entry.
                let mut fresh = Some((State::default(), 0u64));
                loop {
                    let next = if fresh.is_some() {
                        tokio::time::timeout(REBUILD_QUIET, entries.next()).await
                    } else {
                        Ok(entries.next().await)
                    };
                    let Some(v) = view.upgrade() else {
                        return;
                    };
                    let entry = match next {
                        Ok(Some(Ok(entry))) => entry,
                        Ok(Some(Err(e))) => {
                            tracing::warn!(error = %e, "presence watch failed; restarting it");
                            break;
                        }
                        Ok(None) => break,
                        // Silent while replaying: the replay is whole.
                        Err(_) => {
                            if let Some((state, revision)) = fresh.take() {
                                v.replace(state, revision);
                            }
                            continue;
                        }
                    };
                    match fresh.as_mut() {
                        Some((state, revision)) => {
                            // Replayed keys report no transitions (those of
                            // the gap are not known; clients reconcile
                            // with the presence lookup).
                            state.apply(&entry);
                            *revision = entry.revision;
                            if entry.seen_current
                                && let Some((state, revision)) = fresh.take()
                            {
                                v.replace(state, revision);
                            }
                        }
                        None => {
                            if let Some(t) = v.apply(&entry) {
                                let _ = v.transitions.send(t);
                            }
                            v.applied.send_replace(entry.revision);
                        }
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

impl RoutingTable {
    /// Puts a whole replayed picture in place of the one in use.
    fn replace(&self, state: State, revision: u64) {
        if let Ok(mut current) = self.state.lock() {
            *current = state;
        }
        self.applied.send_replace(revision);
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
        assert_eq!(parse_key(&key), Some(Key::User(t, u, "gw-1".to_owned())));
        assert_eq!(parse_key("a.b"), None);
        // A router's key is never a user's, whatever the router is called.
        let router = router_key("gw.1@x");
        assert_eq!(parse_key(&router), Some(Key::Router("gw.1@x".to_owned())));
    }
}
