//! Erasure of a user (v1.2): what of a stored row names them, and what
//! the row becomes. Pure, so that the live rows (`rules/erasure.rs`), the
//! archive objects (`archive.rs`) and the reports the worker rewrites all
//! follow the same rule.
//!
//! The user's own messages stay as tombstones: the row keeps its `seq`
//! and `message_id` (replies and the gap-free `seq` still point at
//! something), loses its content, versions, reactions and mentions, and
//! names a pseudonym instead of its sender. In everyone else's rows the
//! user's id is replaced by the same pseudonym (mentions, thread
//! participants, system events, pins, bans, reports): the conversation
//! still reads as it happened, "someone erased" being one person, and
//! nothing leads back to who they were. The pseudonym is chosen per
//! erasure at random (`erased-` and 16 hex digits).
//!
//! What this cannot reach: text that others typed (a name written in a
//! message is that message's content), and the id of a direct
//! conversation, which is made of its two members' ids (`dm:alice:bob`)
//! and stays the other member's conversation.

use switchboard_protocol::reports::Report;
use switchboard_protocol::safety::Ban;
use switchboard_protocol::{ClientMsgId, Content, DeviceId, Message, Timestamp, UserId};

use crate::{BucketContents, PinRow};

/// The device and idempotency key of a tombstone (no client chose them).
pub const ERASED_DEVICE: &str = "erased";

/// Who is erased, and the name their rows take instead.
#[derive(Debug, Clone, Copy)]
pub struct Erasure<'a> {
    pub user: &'a UserId,
    pub pseudonym: &'a UserId,
}

impl Erasure<'_> {
    fn swap(&self, id: &mut UserId) -> bool {
        if id == self.user {
            *id = self.pseudonym.clone();
            true
        } else {
            false
        }
    }

    fn swap_all(&self, ids: &mut [UserId]) -> bool {
        let mut changed = false;
        for id in ids {
            changed |= self.swap(id);
        }
        changed
    }

    /// Whether the message names the user anywhere (its reactions aside:
    /// who reacted is kept in rows of its own).
    pub fn names(&self, m: &Message) -> bool {
        let u = self.user;
        m.sender_id == *u
            || m.mentions.contains(u)
            || m.thread
                .as_ref()
                .is_some_and(|t| t.participants.contains(u))
            || m.content.as_ref().is_some_and(|c| match c {
                Content::System(e) => e.actor == *u || e.user_ids.contains(u),
                _ => false,
            })
    }

    /// Whether the message is one the user wrote: theirs, and not a
    /// system message (those report what happened, and their actor
    /// becomes the pseudonym instead).
    pub fn owns(&self, m: &Message) -> bool {
        m.sender_id == *self.user && !matches!(m.content, Some(Content::System(_)))
    }

    /// Rewrites a message so that it names the user no more: their own
    /// becomes a tombstone (deleted at `at` unless it was already), a
    /// system message they caused keeps its content, and every message
    /// names the pseudonym where it named them. Whether it changed.
    pub fn message(&self, m: &mut Message, at: Timestamp) -> bool {
        let mut changed = false;
        if m.sender_id == *self.user {
            if self.owns(m) && (m.deleted_at.is_none() || m.content.is_some()) {
                m.mark_deleted(m.deleted_at.unwrap_or(at));
            }
            m.sender_id = self.pseudonym.clone();
            if let Ok(device) = DeviceId::new(ERASED_DEVICE) {
                m.sender_device = device;
            }
            if let Ok(key) = ClientMsgId::new(format!("{ERASED_DEVICE}-{}", m.seq)) {
                m.client_msg_id = key;
            }
            changed = true;
        }
        changed |= self.swap_all(&mut m.mentions);
        if let Some(t) = m.thread.as_mut() {
            changed |= self.swap_all(&mut t.participants);
        }
        if let Some(Content::System(e)) = m.content.as_mut() {
            changed |= self.swap(&mut e.actor);
            changed |= self.swap_all(&mut e.user_ids);
        }
        changed
    }

    /// A report that names the user: as reporter, as sender, or in the
    /// message it keeps. The message of one about the user loses its
    /// content as their own messages do.
    /// The note of one they filed goes (their own words).
    pub fn report(&self, r: &mut Report, at: Timestamp) -> bool {
        let mut changed = false;
        if r.reporter == *self.user && r.note.is_some() {
            r.note = None;
            changed = true;
        }
        changed |= self.swap(&mut r.reporter) | self.swap(&mut r.sender_id);
        if let Some(by) = r.resolved_by.as_mut() {
            changed |= self.swap(by);
        }
        if let Some(m) = r.message.as_mut() {
            changed |= self.message(m, at);
        }
        changed
    }

    /// A ban of someone else that the user set.
    pub fn ban(&self, b: &mut Ban) -> bool {
        self.swap(&mut b.by)
    }

    /// A pin the user made.
    pub fn pin(&self, p: &mut PinRow) -> bool {
        self.swap(&mut p.by)
    }

    /// A conversation's creator.
    pub fn creator(&self, id: &mut UserId) -> bool {
        self.swap(id)
    }

    /// An archived bucket: every message as [`Erasure::message`] has it,
    /// and the versions of the user's own messages gone (a tombstone has
    /// none). Whether anything changed.
    pub fn bucket(&self, b: &mut BucketContents, at: Timestamp) -> bool {
        let mut own = Vec::new();
        let mut changed = false;
        for m in &mut b.messages {
            if self.owns(m) {
                own.push(m.seq);
            }
            changed |= self.message(m, at);
        }
        let before = b.versions.len();
        b.versions.retain(|(seq, _)| !own.contains(seq));
        for (_, versions) in &mut b.versions {
            for v in versions {
                changed |= self.swap(&mut v.editor);
            }
        }
        changed || b.versions.len() != before
    }
}

/// A fresh pseudonym: `erased-` and 64 random bits in hex (always a
/// valid id).
pub fn pseudonym(random: u64) -> Result<UserId, switchboard_protocol::ids::IdError> {
    UserId::new(format!("erased-{random:016x}"))
}

#[cfg(test)]
mod tests {
    use switchboard_protocol::content::SystemEvent;
    use switchboard_protocol::{ConversationId, MessageId, ThreadSummary};

    use super::*;

    fn user(s: &str) -> UserId {
        UserId::new(s).unwrap()
    }

    fn message(seq: u64, sender: &str, text: &str) -> Message {
        Message::plain(
            MessageId::from_u64(seq),
            ConversationId::new("c").unwrap(),
            seq,
            user(sender),
            DeviceId::new("d1").unwrap(),
            ClientMsgId::new(format!("k{seq}")).unwrap(),
            Some(Content::Text { text: text.into() }),
            Timestamp::from_unix_ms(1_000),
        )
    }

    #[test]
    fn own_messages_become_tombstones_that_keep_their_seq() {
        let (alice, p) = (user("alice"), pseudonym(7).unwrap());
        let e = Erasure {
            user: &alice,
            pseudonym: &p,
        };
        let mut m = message(4, "alice", "my address is ...");
        m.mentions = vec![user("bob")];
        assert!(e.names(&m));
        assert!(e.message(&mut m, Timestamp::from_unix_ms(9)));
        assert_eq!(m.seq, 4);
        assert_eq!(m.content, None);
        assert_eq!(m.deleted_at, Some(Timestamp::from_unix_ms(9)));
        assert_eq!(m.sender_id, p);
        assert_eq!(m.sender_device.as_str(), ERASED_DEVICE);
        assert!(m.mentions.is_empty());
        assert!(!serde_json::to_string(&m).unwrap().contains("alice"));
        // Again: nothing new, and the first deletion time stays.
        let mut again = m.clone();
        e.message(&mut again, Timestamp::from_unix_ms(99));
        assert_eq!(again, m);
    }

    #[test]
    fn others_messages_name_the_pseudonym() {
        let (alice, p) = (user("alice"), pseudonym(7).unwrap());
        let e = Erasure {
            user: &alice,
            pseudonym: &p,
        };
        let mut m = message(5, "bob", "hi");
        m.mentions = vec![user("alice"), user("carol")];
        m.thread = Some(ThreadSummary {
            reply_count: 2,
            last_reply_at: Timestamp::from_unix_ms(2),
            participants: vec![user("alice"), user("bob")],
        });
        assert!(e.names(&m));
        assert!(e.message(&mut m, Timestamp::from_unix_ms(9)));
        assert_eq!(m.mentions, vec![p.clone(), user("carol")]);
        assert!(m.content.is_some());
        assert_eq!(m.sender_id, user("bob"));
        assert!(!serde_json::to_string(&m).unwrap().contains("alice"));

        let mut system = message(6, "bob", "");
        system.content = Some(Content::System(SystemEvent {
            event: SystemEvent::MEMBERS_ADDED.into(),
            actor: user("alice"),
            user_ids: vec![user("dave"), user("alice")],
            role: None,
            message_id: None,
            until: None,
            policy: None,
            custom: None,
            channel: None,
        }));
        assert!(e.names(&system));
        assert!(e.message(&mut system, Timestamp::from_unix_ms(9)));
        assert!(!serde_json::to_string(&system).unwrap().contains("alice"));

        // One the user caused: it keeps its content, naming the pseudonym.
        let mut theirs = system.clone();
        theirs.sender_id = user("alice");
        theirs.content = Some(Content::System(SystemEvent {
            event: SystemEvent::MEMBERS_ADDED.into(),
            actor: user("alice"),
            user_ids: vec![user("dave")],
            role: None,
            message_id: None,
            until: None,
            policy: None,
            custom: None,
            channel: None,
        }));
        assert!(e.names(&theirs) && !e.owns(&theirs));
        assert!(e.message(&mut theirs, Timestamp::from_unix_ms(9)));
        assert!(theirs.content.is_some() && theirs.deleted_at.is_none());
        assert_eq!(theirs.sender_id, p);
        assert!(!serde_json::to_string(&theirs).unwrap().contains("alice"));

        let mut unrelated = message(7, "bob", "alice, are you there?");
        assert!(!e.names(&unrelated));
        assert!(!e.message(&mut unrelated, Timestamp::from_unix_ms(9)));
    }

    #[test]
    fn pseudonyms_are_valid_ids() {
        assert_eq!(
            pseudonym(u64::MAX).unwrap().as_str(),
            "erased-ffffffffffffffff"
        );
        assert_eq!(pseudonym(0).unwrap().as_str(), "erased-0000000000000000");
    }
}
