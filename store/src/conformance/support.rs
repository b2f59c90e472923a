//! What every conformance check builds on: ids from strings, messages and
//! conversations as the sequencer would write them, seeding, and the
//! [`Subject`] a check runs on. Imports no other check module.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, ConversationKind, DeviceId, Message, MessageId, TenantId,
    Timestamp, UserId,
};

use crate::{ConversationKey, ConversationRecord, ListQuery, Mutation, Store};

pub fn tenant(s: &str) -> TenantId {
    TenantId::new(s).unwrap()
}
pub fn user(s: &str) -> UserId {
    UserId::new(s).unwrap()
}
pub fn device(s: &str) -> DeviceId {
    DeviceId::new(s).unwrap()
}
pub fn conv(s: &str) -> ConversationId {
    ConversationId::new(s).unwrap()
}
pub fn key(t: &str, c: &str) -> ConversationKey {
    ConversationKey {
        tenant: tenant(t),
        conversation_id: conv(c),
    }
}

/// A text message as the sequencer would build it.
pub fn text_message(c: &str, seq: u64, sender: &str, dev: &str, client_msg_id: &str) -> Message {
    Message::plain(
        MessageId::from_u64(1_000_000 + seq),
        conv(c),
        seq,
        user(sender),
        device(dev),
        ClientMsgId::new(client_msg_id).unwrap(),
        Some(Content::Text {
            text: format!("message {seq}"),
        }),
        Timestamp::from_unix_ms(1_780_000_000_000 + seq as i64),
    )
}

pub fn create(t: &str, c: &str, kind: ConversationKind, members: &[&str], at: i64) -> Mutation {
    Mutation::CreateConversation {
        record: Box::new(ConversationRecord {
            tenant: tenant(t),
            conversation_id: conv(c),
            kind,
            title: None,
            created_at: Timestamp::from_unix_ms(at),
            created_by: user(members[0]),
            last_seq: 0,
            last_message: None,
            last_activity: Timestamp::from_unix_ms(at),
            policy: Default::default(),
            custom: Default::default(),
            channel: Default::default(),
            mutes: Vec::new(),
        }),
        members: members.iter().map(|m| user(m)).collect(),
        unsolicited: None,
    }
}

/// A list query for a whole (small) list.
pub fn everything() -> ListQuery {
    ListQuery {
        after: None,
        limit: 1000,
    }
}

/// Creates a group conversation and appends `n` messages from its first member.
pub async fn seed_conversation(store: &dyn Store, t: &str, c: &str, members: &[&str], n: u64) {
    store
        .commit(vec![create(
            t,
            c,
            ConversationKind::Group,
            members,
            1_780_000_000_000,
        )])
        .await
        .unwrap();
    let messages = (1..=n)
        .map(|seq| text_message(c, seq, members[0], "phone", &format!("seed-{seq}")))
        .collect();
    store
        .commit(vec![Mutation::Append {
            key: key(t, c),
            expected_last_seq: 0,
            messages,
            inbox: true,
        }])
        .await
        .unwrap();
}

/// Checks what [`seed_conversation`] wrote.
pub async fn check_seeded_conversation(store: &dyn Store, t: &str, c: &str, n: u64) {
    let states = store.sequencer_states(vec![key(t, c)]).await.unwrap();
    let state = states[0].clone().expect("conversation exists");
    assert_eq!(state.last_seq, n);
    let reader = state.members.iter().next().unwrap().clone();
    let page = store
        .replay(&tenant(t), &conv(c), &reader, 0, 1000)
        .await
        .unwrap();
    let seqs: Vec<u64> = page.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (1..=n).collect::<Vec<_>>());
}

/// A store under test, with whatever must live as long as it (a
/// temporary directory, a cluster) and a clean-up to run after a check
/// that passed (dropping a keyspace).
pub struct Subject {
    pub store: Arc<dyn Store>,
    _keep: Option<Box<dyn Any + Send>>,
    cleanup: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Subject {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            _keep: None,
            cleanup: None,
        }
    }

    /// Keeps `guard` alive until the check ends.
    pub fn keeping(mut self, guard: impl Any + Send) -> Self {
        self._keep = Some(Box::new(guard));
        self
    }

    /// Runs `cleanup` after the check passed.
    pub fn cleaning_up(mut self, cleanup: impl Future<Output = ()> + Send + 'static) -> Self {
        self.cleanup = Some(Box::pin(cleanup));
        self
    }

    pub async fn finish(mut self) {
        if let Some(cleanup) = self.cleanup.take() {
            cleanup.await;
        }
    }
}

pub(crate) fn unique_tenant(name: &str) -> String {
    // Lets the suite run twice against one store (the served store in the
    // integration tests shares its database with other tests).
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{name}-{nanos}-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// Appends `n` more messages from the conversation's first member.
pub(crate) async fn seed_more(store: &dyn Store, t: &str, c: &str, after: u64, n: u64) {
    let messages = (after + 1..=after + n)
        .map(|seq| text_message(c, seq, "a", "phone", &format!("more-{seq}")))
        .collect();
    store
        .commit(vec![Mutation::Append {
            key: key(t, c),
            expected_last_seq: after,
            messages,
            inbox: true,
        }])
        .await
        .unwrap();
}
