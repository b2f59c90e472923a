//! Blocks as readers see them (v1.2): in groups a blocked user's messages
//! still flow, flagged `blocked_sender: true` for the user who blocked
//! them, in history, backlog and live events alike. The writer of the
//! pair's direct conversation keeps the two apart there; this is only
//! the flag.

use std::collections::HashSet;
use std::sync::RwLock;

use bytes::Bytes;
use switchboard_protocol::{Message, TenantId, UserId};
use switchboard_store::{Store, StoreResult};

/// The users one user blocks, as their connections on this gateway know
/// them: loaded when their first connection joins, kept current by the
/// `blocks_changed` events the writer sends to all their devices.
#[derive(Debug, Default)]
pub(crate) struct BlockSet(RwLock<Blocked>);

#[derive(Debug, Default)]
struct Blocked {
    users: HashSet<String>,
    /// While the list is being read: the changes events told of since,
    /// which the list read may predate, so they win over it.
    loading: Option<Vec<(String, bool)>>,
}

impl Blocked {
    fn apply(&mut self, user: String, blocked: bool) {
        if blocked {
            self.users.insert(user);
        } else {
            self.users.remove(&user);
        }
    }
}

impl BlockSet {
    /// The list is about to be read: record events until it is in.
    pub(crate) fn start_load(&self) {
        if let Ok(mut b) = self.0.write() {
            b.loading = Some(Vec::new());
        }
    }

    /// The list as read, then every change told since `start_load`.
    pub(crate) fn finish_load(&self, users: impl IntoIterator<Item = UserId>) {
        if let Ok(mut b) = self.0.write() {
            b.users = users.into_iter().map(|u| u.as_str().to_owned()).collect();
            for (user, blocked) in b.loading.take().unwrap_or_default() {
                b.apply(user, blocked);
            }
        }
    }

    pub(crate) fn set(&self, user: &UserId, blocked: bool) {
        if let Ok(mut b) = self.0.write() {
            if let Some(changes) = &mut b.loading {
                changes.push((user.as_str().to_owned(), blocked));
            }
            b.apply(user.as_str().to_owned(), blocked);
        }
    }

    pub(crate) fn contains(&self, user: &str) -> bool {
        self.0.read().is_ok_and(|b| b.users.contains(user))
    }

    fn is_empty(&self) -> bool {
        self.0.read().map_or(true, |b| b.users.is_empty())
    }

    /// `frame` with `blocked_sender: true` on its message, when it is a
    /// `message` or `message_updated` whose sender this user blocks;
    /// `None` when it goes out as it is. Free for users who block nobody.
    pub(crate) fn flagged(&self, frame: &Bytes) -> Option<Bytes> {
        if self.is_empty() {
            return None;
        }
        let mut value: serde_json::Value = serde_json::from_slice(frame).ok()?;
        let kind = value.get("type")?.as_str()?;
        if kind != "message" && kind != "message_updated" {
            return None;
        }
        let message = value.get_mut("message")?.as_object_mut()?;
        let sender = message.get("sender_id")?.as_str()?;
        if !self.contains(sender) {
            return None;
        }
        message.insert("blocked_sender".into(), serde_json::Value::Bool(true));
        serde_json::to_vec(&value).ok().map(Bytes::from)
    }
}

/// Messages as `reader` sees them: without shadow-banned senders'
/// messages not theirs (v1.3, [`Message::seen_by`]), `me` on the
/// reactions that are theirs, `blocked_sender` on those of users they
/// block. Every read that lists messages to a client passes here.
pub(crate) async fn as_seen_by(
    store: &dyn Store,
    tenant: &TenantId,
    reader: &UserId,
    messages: &mut Vec<Message>,
) -> StoreResult<()> {
    messages.retain(|m| m.seen_by(reader));
    for m in messages.iter_mut() {
        m.shadow = false;
    }
    switchboard_store::mine::mark_mine(store, tenant, reader, messages).await?;
    if messages.is_empty() {
        return Ok(());
    }
    let blocked: HashSet<UserId> = store
        .blocks(tenant, reader)
        .await?
        .into_iter()
        .map(|b| b.user_id)
        .collect();
    for m in messages.iter_mut() {
        m.blocked_sender = blocked.contains(&m.sender_id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(u: &str) -> UserId {
        UserId::new(u).unwrap()
    }

    #[test]
    fn only_messages_of_blocked_senders_are_flagged() {
        let set = BlockSet::default();
        let frame = Bytes::from(
            r#"{"type":"message","message":{"sender_id":"eve","seq":3,"content":null}}"#,
        );
        assert_eq!(set.flagged(&frame), None, "nobody blocked");
        set.set(&user("eve"), true);
        let flagged: serde_json::Value =
            serde_json::from_slice(&set.flagged(&frame).unwrap()).unwrap();
        assert_eq!(flagged["message"]["blocked_sender"], true);
        assert_eq!(flagged["message"]["seq"], 3);
        let other = Bytes::from(r#"{"type":"message_updated","message":{"sender_id":"bob"}}"#);
        assert_eq!(set.flagged(&other), None);
        let receipt = Bytes::from(r#"{"type":"receipt","user_id":"eve"}"#);
        assert_eq!(set.flagged(&receipt), None);
        set.set(&user("eve"), false);
        assert_eq!(set.flagged(&frame), None);
    }

    #[test]
    fn changes_told_while_the_list_is_read_win_over_it() {
        let set = BlockSet::default();
        set.start_load();
        set.set(&user("eve"), true);
        set.set(&user("bob"), false);
        // The list was read before both changes.
        set.finish_load([user("bob"), user("ann")]);
        assert!(set.contains("eve") && set.contains("ann"));
        assert!(!set.contains("bob"));
        // After the load, events apply as they come.
        set.set(&user("ann"), false);
        assert!(!set.contains("ann"));
    }
}
