//! The store conformance suite: one set of checks every [`Store`] backend
//! must pass. [`conformance_tests!`](crate::conformance_tests) makes one
//! test of each check for a backend: the embedded store runs them in its
//! unit tests, the integration tests against the store served over NATS,
//! and `store-scylla` against a Scylla node when one is named.
//!
//! Test-support code, built only for tests and with the `conformance`
//! feature: it panics on the first broken expectation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::any::Any;
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::future::join_all;

use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, ConversationKind, DeviceId, Message, MessageId, TenantId,
    Timestamp, UserId,
};

use crate::{
    BucketKey, ConversationKey, ConversationRecord, HistoryQuery, ListQuery, MessageKey, Mutation,
    SentKey, Store, StoreError,
};

mod people;
pub use people::*;

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
    Message {
        message_id: MessageId::from_u64(1_000_000 + seq),
        conversation_id: conv(c),
        seq,
        sender_id: user(sender),
        sender_device: device(dev),
        client_msg_id: ClientMsgId::new(client_msg_id).unwrap(),
        content: Some(Content::Text {
            text: format!("message {seq}"),
        }),
        created_at: Timestamp::from_unix_ms(1_780_000_000_000 + seq as i64),
        edited_at: None,
        deleted_at: None,
    }
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

/// One `#[tokio::test]` per conformance check, each on a store from
/// `$subject`: an async fn returning `Option<Subject>` (`None` skips the
/// check, for a backend whose server is not there). Every check uses
/// tenants of its own, so the subjects may share one database.
///
/// `conformance_tests!(subject)` is for a backend; it also checks that
/// reads through the archive tier (`archive::Tiered`) over it are
/// unchanged. `conformance_tests!(subject, served)` is for a store served
/// by a process that has an archive tier of its own (the store service):
/// the tier's check does not apply to it.
#[macro_export]
macro_rules! conformance_tests {
    ($subject:path) => {
        $crate::conformance_tests!($subject, served);
        $crate::conformance_tests!(@checks $subject; tiered_reads_are_unchanged);
    };
    ($subject:path, served) => {
        $crate::conformance_tests!(@checks $subject;
            create_is_exclusive,
            appends_continue_seq_without_gaps,
            idempotency_keys_find_the_original,
            history_is_newest_first_and_bounded,
            reads_need_membership,
            inbox_is_per_device,
            marks_only_move_forward,
            conversation_list_is_most_recent_first,
            removing_a_member_takes_their_access_and_inbox,
            tenants_are_separate,
            edits_and_deletes,
            concurrent_commits_all_land,
            old_inbox_entries_expire,
            media_is_readable_by_members_of_conversations_that_reference_it,
            a_deleted_messages_media_is_referenced_no_more,
            the_inbox_reads_on_after_a_cursor,
            old_buckets_move_to_the_archive,
            the_conversation_list_pages_in_order,
            a_conversation_that_moves_is_listed_once,
            speakers_decide_contacts_and_who_knows_whom,
            unsolicited_adds_are_recorded_within_their_limit,
        );
    };
    (@checks $subject:path; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                if let Some(subject) = $subject().await {
                    $crate::conformance::$check(&subject.store).await;
                    subject.finish().await;
                }
            }
        )*
    };
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

pub async fn create_is_exclusive(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("create");
    let m = create(t, "c", ConversationKind::Direct, &["a", "b"], 1);
    store.commit(vec![m.clone()]).await.unwrap();
    assert!(matches!(
        store.commit(vec![m]).await,
        Err(StoreError::Conflict(_))
    ));
    let state = store
        .sequencer_states(vec![key(t, "c"), key(t, "nope")])
        .await
        .unwrap();
    let s = state[0].as_ref().unwrap();
    assert_eq!(s.kind, ConversationKind::Direct);
    assert_eq!(s.last_seq, 0);
    assert_eq!(s.members, BTreeSet::from([user("a"), user("b")]));
    assert!(state[1].is_none());
}

pub async fn appends_continue_seq_without_gaps(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("append");
    seed_conversation(store, t, "c", &["a", "b"], 3).await;
    let append = |expected, seq, id: &str| Mutation::Append {
        key: key(t, "c"),
        expected_last_seq: expected,
        messages: vec![text_message("c", seq, "a", "phone", id)],
        inbox: true,
    };
    // A stale writer that believes last_seq is 2.
    let stale = store.commit(vec![append(2, 3, "x1")]).await;
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
    // A gap.
    let gap = store.commit(vec![append(3, 5, "x2")]).await;
    assert!(matches!(gap, Err(StoreError::Conflict(_))), "{gap:?}");
    // Nothing of the refused commits was written.
    check_seeded_conversation(store, t, "c", 3).await;
    store.commit(vec![append(3, 4, "x3")]).await.unwrap();
    check_seeded_conversation(store, t, "c", 4).await;
    // A refused mutation undoes the whole commit, also the parts before it.
    let mixed = store
        .commit(vec![append(4, 5, "x4"), append(4, 5, "x5")])
        .await;
    assert!(matches!(mixed, Err(StoreError::Conflict(_))));
    check_seeded_conversation(store, t, "c", 4).await;
}

pub async fn idempotency_keys_find_the_original(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("idem");
    seed_conversation(store, t, "c", &["a", "b"], 2).await;
    let sent = |id: &str| SentKey {
        tenant: tenant(t),
        conversation_id: conv("c"),
        sender: user("a"),
        client_msg_id: ClientMsgId::new(id).unwrap(),
    };
    let found = store
        .find_sent(vec![sent("seed-2"), sent("never")])
        .await
        .unwrap();
    assert_eq!(found[0].as_ref().map(|m| m.seq), Some(2));
    assert!(found[1].is_none());
    // The same key twice is a conflict, not a second message.
    let dup = store
        .commit(vec![Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: 2,
            messages: vec![text_message("c", 3, "a", "phone", "seed-1")],
            inbox: true,
        }])
        .await;
    assert!(matches!(dup, Err(StoreError::Conflict(_))));
    // Also within one append, and nothing of it is stored.
    let twice = store
        .commit(vec![Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: 2,
            messages: vec![
                text_message("c", 3, "a", "phone", "twice"),
                text_message("c", 4, "a", "phone", "twice"),
            ],
            inbox: true,
        }])
        .await;
    assert!(matches!(twice, Err(StoreError::Conflict(_))), "{twice:?}");
    assert!(store.find_sent(vec![sent("twice")]).await.unwrap()[0].is_none());
    // Another sender may reuse the string.
    store
        .commit(vec![Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: 2,
            messages: vec![text_message("c", 3, "b", "phone", "seed-1")],
            inbox: true,
        }])
        .await
        .unwrap();
}

pub async fn history_is_newest_first_and_bounded(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("history");
    seed_conversation(store, t, "c", &["a", "b"], 10).await;
    let page = |before, after, limit| async move {
        store
            .history(
                &tenant(t),
                &conv("c"),
                &user("b"),
                HistoryQuery {
                    before_seq: before,
                    after_seq: after,
                    limit,
                },
            )
            .await
            .unwrap()
            .iter()
            .map(|m| m.seq)
            .collect::<Vec<_>>()
    };
    assert_eq!(page(None, None, 3).await, vec![10, 9, 8]);
    assert_eq!(page(Some(8), None, 3).await, vec![7, 6, 5]);
    assert_eq!(page(Some(3), None, 50).await, vec![2, 1]);
    assert_eq!(page(None, Some(7), 50).await, vec![10, 9, 8]);
    assert_eq!(page(Some(6), Some(3), 50).await, vec![5, 4]);
    assert_eq!(page(Some(1), None, 50).await, Vec::<u64>::new());
    let replay = store
        .replay(&tenant(t), &conv("c"), &user("b"), 8, 50)
        .await
        .unwrap();
    assert_eq!(
        replay.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![9, 10]
    );
    let limited = store
        .replay(&tenant(t), &conv("c"), &user("b"), 0, 4)
        .await
        .unwrap();
    assert_eq!(limited.len(), 4);
    assert_eq!(
        limited[0].content,
        text_message("c", 1, "a", "phone", "x").content
    );
}

pub async fn reads_need_membership(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("members");
    seed_conversation(store, t, "c", &["a", "b"], 1).await;
    let q = HistoryQuery {
        before_seq: None,
        after_seq: None,
        limit: 10,
    };
    let (tt, c, eve) = (tenant(t), conv("c"), user("eve"));
    assert_eq!(
        store.history(&tt, &c, &eve, q).await.unwrap_err(),
        StoreError::NotAMember
    );
    assert_eq!(
        store.replay(&tt, &c, &eve, 0, 10).await.unwrap_err(),
        StoreError::NotAMember
    );
    assert_eq!(
        store.conversation(&tt, &c, &eve).await.unwrap_err(),
        StoreError::NotAMember
    );
    assert_eq!(
        store
            .ack_delivered(&tt, &eve, &device("d"), &c, 1)
            .await
            .unwrap_err(),
        StoreError::NotAMember
    );
    assert_eq!(
        store
            .history(&tt, &conv("nope"), &user("a"), q)
            .await
            .unwrap_err(),
        StoreError::NotFound
    );
    let detail = store.conversation(&tt, &c, &user("a")).await.unwrap();
    assert_eq!(detail.record.last_seq, 1);
    assert_eq!(detail.members.len(), 2);
    let (kind, members) = store.members(&tt, &c, &user("b")).await.unwrap();
    assert_eq!(
        (kind, members),
        (ConversationKind::Group, vec![user("a"), user("b")])
    );
    assert_eq!(
        store.members(&tt, &c, &eve).await.unwrap_err(),
        StoreError::NotAMember
    );
}

pub async fn inbox_is_per_device(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("inbox");
    let tt = tenant(t);
    for (u, d) in [
        ("a", "phone"),
        ("a", "tablet"),
        ("b", "phone"),
        ("b", "laptop"),
    ] {
        store
            .register_device(&tt, &user(u), &device(d))
            .await
            .unwrap();
    }
    // Registering twice is harmless.
    store
        .register_device(&tt, &user("b"), &device("phone"))
        .await
        .unwrap();
    seed_conversation(store, t, "c", &["a", "b"], 3).await;
    let inbox = |u: &'static str, d: &'static str| {
        let tt = tt.clone();
        async move {
            store
                .inbox(&tt, &user(u), &device(d), None, 100)
                .await
                .unwrap()
                .iter()
                .map(|m| m.seq)
                .collect::<Vec<_>>()
        }
    };
    // a sent from "phone": that device has nothing waiting, the others all three.
    assert_eq!(inbox("a", "phone").await, Vec::<u64>::new());
    assert_eq!(inbox("a", "tablet").await, vec![1, 2, 3]);
    assert_eq!(inbox("b", "phone").await, vec![1, 2, 3]);
    assert_eq!(inbox("b", "laptop").await, vec![1, 2, 3]);
    store
        .ack_delivered(&tt, &user("b"), &device("phone"), &conv("c"), 2)
        .await
        .unwrap();
    assert_eq!(inbox("b", "phone").await, vec![3]);
    assert_eq!(inbox("b", "laptop").await, vec![1, 2, 3]);
    // Across conversations.
    seed_conversation(store, t, "d", &["a", "b"], 2).await;
    assert_eq!(inbox("b", "phone").await, vec![3, 1, 2]);
    let limited = store
        .inbox(&tt, &user("b"), &device("laptop"), None, 4)
        .await
        .unwrap();
    assert_eq!(limited.len(), 4);
    store
        .ack_delivered(&tt, &user("b"), &device("phone"), &conv("c"), 3)
        .await
        .unwrap();
    store
        .ack_delivered(&tt, &user("b"), &device("phone"), &conv("d"), 2)
        .await
        .unwrap();
    assert_eq!(inbox("b", "phone").await, Vec::<u64>::new());
}

pub async fn marks_only_move_forward(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("marks");
    let tt = tenant(t);
    store
        .register_device(&tt, &user("b"), &device("phone"))
        .await
        .unwrap();
    seed_conversation(store, t, "c", &["a", "b"], 5).await;
    let marks = || async {
        let d = store
            .conversation(&tt, &conv("c"), &user("b"))
            .await
            .unwrap();
        let b = d.members.iter().find(|m| m.user_id == user("b")).unwrap();
        let a = d.members.iter().find(|m| m.user_id == user("a")).unwrap();
        (b.delivered_seq, b.read_seq, a.read_seq)
    };
    let (b, phone, c) = (user("b"), device("phone"), conv("c"));
    let ack = |seq| store.ack_delivered(&tt, &b, &phone, &c, seq);
    let change = ack(4).await.unwrap();
    assert!(change.delivered_moved && !change.read_moved);
    assert_eq!(change.delivered_seq, 4);
    assert_eq!(change.members, vec![user("a"), user("b")]);
    assert_eq!(change.kind, ConversationKind::Group);
    let change = ack(2).await.unwrap();
    assert!(!change.delivered_moved, "never back");
    assert_eq!(change.delivered_seq, 4);
    // The sender's own messages count as read by them.
    assert_eq!(marks().await, (4, 0, 5));
    // A mark past the end is clamped to the last message.
    ack(999).await.unwrap();
    assert_eq!(marks().await, (5, 0, 5));

    // Reading moves the read mark, and the delivered one with it.
    seed_more(store, t, "c", 5, 3).await;
    let read = |seq| store.ack_read(&tt, &b, &c, seq);
    let change = read(7).await.unwrap();
    assert!(change.read_moved && change.delivered_moved);
    assert_eq!((change.delivered_seq, change.read_seq), (7, 7));
    let change = read(6).await.unwrap();
    assert!(!change.read_moved && !change.delivered_moved);
    assert_eq!(marks().await, (7, 7, 8));
    assert_eq!(
        store
            .ack_read(&tt, &user("eve"), &conv("c"), 1)
            .await
            .unwrap_err(),
        StoreError::NotAMember
    );
    assert_eq!(
        store
            .ack_read(&tt, &user("b"), &conv("nope"), 1)
            .await
            .unwrap_err(),
        StoreError::NotFound
    );
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

pub async fn conversation_list_is_most_recent_first(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("list");
    for (c, at) in [("old", 10), ("new", 30), ("mid", 20)] {
        store
            .commit(vec![create(t, c, ConversationKind::Group, &["a", "b"], at)])
            .await
            .unwrap();
    }
    let list = store
        .conversation_page(&tenant(t), &user("b"), everything())
        .await
        .unwrap();
    let ids: Vec<_> = list
        .iter()
        .map(|s| s.record.conversation_id.as_str())
        .collect();
    assert_eq!(ids, vec!["new", "mid", "old"]);
    // Contacts are the other members of direct conversations only (and
    // only those b opened or has sent in: see `people.rs`).
    store
        .commit(vec![
            create(t, "d1", ConversationKind::Direct, &["b", "x"], 1),
            create(t, "d2", ConversationKind::Direct, &["b", "y"], 2),
        ])
        .await
        .unwrap();
    let contacts = store.contacts(&tenant(t), &user("b")).await.unwrap();
    assert_eq!(contacts, vec![user("x"), user("y")]);
    let mut memberships = store.memberships(&tenant(t), &user("b")).await.unwrap();
    memberships.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(memberships.len(), 5);
    assert_eq!(memberships[0], (conv("d1"), ConversationKind::Direct, 2));
    // A message moves its conversation to the front.
    let mut m = text_message("old", 1, "a", "phone", "bump");
    m.created_at = Timestamp::from_unix_ms(40);
    store
        .commit(vec![Mutation::Append {
            key: key(t, "old"),
            expected_last_seq: 0,
            messages: vec![m],
            inbox: true,
        }])
        .await
        .unwrap();
    let list = store
        .conversation_page(&tenant(t), &user("b"), everything())
        .await
        .unwrap();
    assert_eq!(list[0].record.conversation_id.as_str(), "old");
    assert_eq!(list[0].record.last_seq, 1);
    assert_eq!(list[0].me.read_seq, 0);
    assert_eq!(list[0].member_ids, vec![user("a"), user("b")]);
    assert!(
        store
            .conversation_page(&tenant(t), &user("zed"), everything())
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn removing_a_member_takes_their_access_and_inbox(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("remove");
    let tt = tenant(t);
    store
        .register_device(&tt, &user("b"), &device("phone"))
        .await
        .unwrap();
    seed_conversation(store, t, "c", &["a", "b", "c"], 2).await;
    store
        .commit(vec![Mutation::RemoveMembers {
            key: key(t, "c"),
            users: vec![user("b")],
        }])
        .await
        .unwrap();
    assert!(
        store
            .inbox(&tt, &user("b"), &device("phone"), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .replay(&tt, &conv("c"), &user("b"), 0, 10)
            .await
            .unwrap_err(),
        StoreError::NotAMember
    );
    assert!(
        store
            .conversation_page(&tt, &user("b"), everything())
            .await
            .unwrap()
            .is_empty()
    );
    store
        .commit(vec![Mutation::AddMembers {
            key: key(t, "c"),
            users: vec![user("b"), user("a")],
            at: Timestamp::from_unix_ms(5),
            unsolicited: None,
        }])
        .await
        .unwrap();
    let state = store.sequencer_states(vec![key(t, "c")]).await.unwrap();
    assert_eq!(state[0].as_ref().unwrap().members.len(), 3);
    let missing = store
        .commit(vec![Mutation::AddMembers {
            key: key(t, "nope"),
            users: vec![user("b")],
            at: Timestamp::from_unix_ms(5),
            unsolicited: None,
        }])
        .await;
    assert_eq!(missing, Err(StoreError::NotFound));
}

pub async fn edits_and_deletes(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("edit");
    let tt = tenant(t);
    let (b, phone, c) = (user("b"), device("phone"), conv("c"));
    store.register_device(&tt, &b, &phone).await.unwrap();
    seed_conversation(store, t, "c", &["a", "b"], 3).await;
    store.ack_delivered(&tt, &b, &phone, &c, 3).await.unwrap();
    let inbox = || async { store.inbox(&tt, &b, &phone, None, 10).await.unwrap() };
    assert!(inbox().await.is_empty());

    let by_id = |seq: u64| MessageKey {
        tenant: tt.clone(),
        conversation_id: c.clone(),
        message_id: text_message("c", seq, "a", "phone", "x").message_id,
    };
    let found = store
        .find_messages(vec![by_id(2), by_id(99)])
        .await
        .unwrap();
    assert_eq!(found[0].as_ref().map(|m| m.seq), Some(2));
    assert!(found[1].is_none());

    let edit = |seq, text: &str, at| Mutation::Edit {
        key: key(t, "c"),
        seq,
        content: Content::Text { text: text.into() },
        editor: user("a"),
        at: Timestamp::from_unix_ms(at),
        inbox: true,
    };
    store
        .commit(vec![edit(2, "edited", 2_000_000_000_000)])
        .await
        .unwrap();
    let (tt2, c2, b2) = (&tt, &c, &b);
    let page = |seq: u64| async move {
        store
            .history(
                tt2,
                c2,
                b2,
                HistoryQuery {
                    before_seq: Some(seq + 1),
                    after_seq: Some(seq - 1),
                    limit: 1,
                },
            )
            .await
            .unwrap()
            .remove(0)
    };
    let edited = page(2).await;
    assert_eq!(
        edited.content,
        Some(Content::Text {
            text: "edited".into()
        })
    );
    assert_eq!(
        edited.edited_at,
        Some(Timestamp::from_unix_ms(2_000_000_000_000))
    );
    let versions = store
        .versions(&tt, &c, &b, edited.message_id)
        .await
        .unwrap();
    assert_eq!(
        versions.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(
        versions[0].content,
        Content::Text {
            text: "message 2".into()
        }
    );
    // The update is back in the device's inbox; acking its seq clears it,
    // though the device's cursor is past it.
    assert_eq!(
        inbox().await.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![2]
    );
    let change = store.ack_delivered(&tt, &b, &phone, &c, 2).await.unwrap();
    assert!(!change.delivered_moved);
    assert!(inbox().await.is_empty());

    // Delete: no content anywhere, the versions included.
    let delete = |seq, at| Mutation::Delete {
        key: key(t, "c"),
        seq,
        at: Timestamp::from_unix_ms(at),
        inbox: true,
    };
    store
        .commit(vec![delete(2, 2_000_000_000_001)])
        .await
        .unwrap();
    let deleted = page(2).await;
    assert_eq!(
        (deleted.content, deleted.deleted_at.is_some()),
        (None, true)
    );
    assert!(
        store
            .versions(&tt, &c, &b, deleted.message_id)
            .await
            .unwrap()
            .is_empty()
    );
    let refused = store
        .commit(vec![edit(2, "too late", 2_000_000_000_002)])
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    // Deleting twice is harmless; deleting the last message empties the
    // conversation's preview.
    store
        .commit(vec![
            delete(2, 2_000_000_000_003),
            delete(3, 2_000_000_000_004),
        ])
        .await
        .unwrap();
    let list = store
        .conversation_page(&tt, &b, everything())
        .await
        .unwrap();
    let last = list[0].record.last_message.clone().unwrap();
    assert_eq!((last.seq, last.content), (3, None));

    // A send and its edits in one commit.
    let fresh = text_message("c", 4, "a", "phone", "fresh");
    store
        .commit(vec![
            Mutation::Append {
                key: key(t, "c"),
                expected_last_seq: 3,
                messages: vec![fresh.clone()],
                inbox: true,
            },
            edit(4, "once", 2_000_000_000_005),
            edit(4, "twice", 2_000_000_000_006),
        ])
        .await
        .unwrap();
    let versions = store.versions(&tt, &c, &b, fresh.message_id).await.unwrap();
    assert_eq!(
        versions.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(
        page(4).await.content,
        Some(Content::Text {
            text: "twice".into()
        })
    );
    assert_eq!(
        store
            .versions(&tt, &c, &user("eve"), fresh.message_id)
            .await
            .unwrap_err(),
        StoreError::NotAMember
    );
    assert_eq!(
        store
            .versions(&tt, &c, &b, MessageId::from_u64(7))
            .await
            .unwrap_err(),
        StoreError::NotFound
    );
}

pub async fn tenants_are_separate(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let (t1, t2) = (&unique_tenant("iso1"), &unique_tenant("iso2"));
    seed_conversation(store, t1, "same", &["a", "b"], 3).await;
    seed_conversation(store, t2, "same", &["a", "b"], 1).await;
    check_seeded_conversation(store, t1, "same", 3).await;
    check_seeded_conversation(store, t2, "same", 1).await;
    assert_eq!(
        store
            .conversation_page(&tenant(t2), &user("a"), everything())
            .await
            .unwrap()[0]
            .record
            .last_seq,
        1
    );
}

pub async fn concurrent_commits_all_land(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("concurrent");
    let mut creates = Vec::new();
    for i in 0..50 {
        let c = format!("c{i}");
        creates.push(async move {
            store
                .commit(vec![create(t, &c, ConversationKind::Group, &["a"], 1)])
                .await
        });
    }
    for r in join_all(creates).await {
        r.unwrap();
    }
    let mut appends = Vec::new();
    for i in 0..50 {
        let c = format!("c{i}");
        appends.push(async move {
            for seq in 1..=5 {
                store
                    .commit(vec![Mutation::Append {
                        key: key(t, &c),
                        expected_last_seq: seq - 1,
                        messages: vec![text_message(&c, seq, "a", "phone", &format!("m{seq}"))],
                        inbox: true,
                    }])
                    .await?;
            }
            Ok::<_, StoreError>(())
        });
    }
    for r in join_all(appends).await {
        r.unwrap();
    }
    let keys = (0..50).map(|i| key(t, &format!("c{i}"))).collect();
    for s in store.sequencer_states(keys).await.unwrap() {
        assert_eq!(s.unwrap().last_seq, 5);
    }
}

/// Runs an inbox expiry sweep to its end in steps of `budget`; returns
/// the entries it looked at and those it removed.
pub async fn sweep_inboxes(store: &dyn Store, before: Timestamp, budget: usize) -> (usize, usize) {
    let (mut seen, mut removed) = (0, 0);
    let mut cursor = None;
    loop {
        let step = store
            .expire_inbox(before, cursor.take(), budget)
            .await
            .unwrap();
        let looked = step.seen.expect("a sweeping backend counts what it sees");
        assert!(looked <= budget, "a step looks at most at its budget");
        assert!(step.removed <= looked);
        seen += looked;
        removed += step.removed;
        match step.next {
            Some(next) => cursor = Some(next),
            None => return (seen, removed),
        }
    }
}

/// The sweep covers every tenant, so it uses a time older than anything the
/// other checks need in an inbox (their seeded messages, their edits).
pub async fn old_inbox_entries_expire(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("expiry");
    let tt = tenant(t);
    let (b, phone) = (user("b"), device("phone"));
    store.register_device(&tt, &b, &phone).await.unwrap();
    seed_conversation(store, t, "c", &["a", "b"], 4).await;
    // Message 1 is edited much later: its entry is as fresh as the edit.
    store
        .commit(vec![Mutation::Edit {
            key: key(t, "c"),
            seq: 1,
            content: Content::Text {
                text: "still news".into(),
            },
            editor: user("a"),
            at: Timestamp::from_unix_ms(2_100_000_000_000),
            inbox: true,
        }])
        .await
        .unwrap();
    let seqs = || async {
        store
            .inbox(&tt, &b, &phone, None, 10)
            .await
            .unwrap()
            .iter()
            .map(|m| m.seq)
            .collect::<Vec<_>>()
    };
    assert_eq!(seqs().await, vec![1, 2, 3, 4]);
    // Messages 1..=4 were written at ...001 to ...004: 2 and 3 are older
    // than ...004. Small steps exercise the cursor.
    let cutoff = text_message("c", 4, "a", "phone", "x").created_at;
    let (seen, removed) = sweep_inboxes(store, cutoff, 2).await;
    assert!(removed >= 2, "removed {removed}");
    // It looked at every entry: this tenant's four at least.
    assert!(seen >= 4 && seen >= removed, "seen {seen}");
    assert_eq!(seqs().await, vec![1, 4]);
    // A second sweep finds nothing more of this tenant's, and sees the
    // two it left.
    let (seen, _) = sweep_inboxes(store, cutoff, 1000).await;
    assert!(seen >= 2, "seen {seen}");
    assert_eq!(seqs().await, vec![1, 4]);
    // The marks are untouched: expiry only forgets what to push.
    let detail = store.conversation(&tt, &conv("c"), &b).await.unwrap();
    assert_eq!(detail.record.last_seq, 4);
}

pub async fn media_is_readable_by_members_of_conversations_that_reference_it(
    store: &Arc<dyn Store>,
) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("media");
    let tt = tenant(t);
    seed_conversation(store, t, "c", &["a", "b"], 1).await;
    seed_conversation(store, t, "d", &["c", "d"], 1).await;
    let readable = |blob: &'static str, who: &'static str| {
        let tt = tt.clone();
        async move { store.media_readable(&tt, blob, &user(who)).await.unwrap() }
    };
    assert!(!readable("m1", "a").await, "nothing references m1 yet");
    assert!(!store.media_referenced(&tt, "m1").await.unwrap());

    let image = |blob: &str| {
        Content::Image(switchboard_protocol::content::Media {
            blob_ref: blob.into(),
            mime: "image/png".into(),
            size: 10,
            caption: None,
        })
    };
    let mut m = text_message("c", 2, "a", "phone", "img");
    m.content = Some(image("m1"));
    store
        .commit(vec![Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: 1,
            messages: vec![m],
            inbox: true,
        }])
        .await
        .unwrap();
    assert!(readable("m1", "a").await && readable("m1", "b").await);
    // Referenced now, whoever asks; m2 is not, nor m1 in another tenant
    // (the blob collector keeps exactly the referenced ones).
    assert!(store.media_referenced(&tt, "m1").await.unwrap());
    assert!(!store.media_referenced(&tt, "m2").await.unwrap());
    assert!(
        !store
            .media_referenced(&tenant(&unique_tenant("other")), "m1")
            .await
            .unwrap()
    );
    assert!(
        !readable("m1", "c").await,
        "not a member of a referencing conversation"
    );
    assert!(!readable("m2", "a").await);
    assert!(
        !store
            .media_readable(&tenant(&unique_tenant("other")), "m1", &user("a"))
            .await
            .unwrap(),
        "another tenant's blob refs are not this tenant's"
    );

    // An edit to media references the new blob too.
    store
        .commit(vec![Mutation::Edit {
            key: key(t, "d"),
            seq: 1,
            content: image("m2"),
            editor: user("c"),
            at: Timestamp::from_unix_ms(1_780_000_000_100),
            inbox: true,
        }])
        .await
        .unwrap();
    assert!(readable("m2", "d").await);
    assert!(!readable("m2", "a").await);

    // Leaving the conversation takes the access with it.
    store
        .commit(vec![Mutation::RemoveMembers {
            key: key(t, "c"),
            users: vec![user("b")],
        }])
        .await
        .unwrap();
    assert!(!readable("m1", "b").await);
}

/// A blob stays referenced while a live message (or a version of one)
/// carries it, in any conversation; once every such message is deleted
/// it is referenced no more, and the blob collector removes it.
pub async fn a_deleted_messages_media_is_referenced_no_more(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("unref");
    let tt = tenant(t);
    seed_conversation(store, t, "c", &["a", "b"], 1).await;
    seed_conversation(store, t, "d", &["a", "c"], 1).await;
    let image = |blob: &str| {
        Content::Image(switchboard_protocol::content::Media {
            blob_ref: blob.into(),
            mime: "image/png".into(),
            size: 10,
            caption: None,
        })
    };
    let with = |c: &str, seq: u64, blob: &str| {
        let mut m = text_message(c, seq, "a", "phone", &format!("{c}-{seq}"));
        m.content = Some(image(blob));
        m
    };
    let append = |c: &str, after: u64, messages: Vec<Message>| Mutation::Append {
        key: key(t, c),
        expected_last_seq: after,
        messages,
        inbox: true,
    };
    let delete = |c: &str, seq: u64| Mutation::Delete {
        key: key(t, c),
        seq,
        at: Timestamp::from_unix_ms(1_780_000_001_000),
        inbox: true,
    };
    let referenced = |blob: &'static str| {
        let tt = tt.clone();
        async move { store.media_referenced(&tt, blob).await.unwrap() }
    };
    // c: m1 twice (2, 3), m2 edited to m3 (4). d: m4, also in c (5).
    store
        .commit(vec![
            append(
                "c",
                1,
                vec![
                    with("c", 2, "m1"),
                    with("c", 3, "m1"),
                    with("c", 4, "m2"),
                    with("c", 5, "m4"),
                ],
            ),
            Mutation::Edit {
                key: key(t, "c"),
                seq: 4,
                content: image("m3"),
                editor: user("a"),
                at: Timestamp::from_unix_ms(1_780_000_000_500),
                inbox: true,
            },
            append("d", 1, vec![with("d", 2, "m4")]),
        ])
        .await
        .unwrap();
    for blob in ["m1", "m2", "m3", "m4"] {
        assert!(referenced(blob).await, "{blob}");
    }

    // One of two messages with m1 goes: the other still carries it.
    store.commit(vec![delete("c", 2)]).await.unwrap();
    assert!(referenced("m1").await);
    assert!(store.media_readable(&tt, "m1", &user("b")).await.unwrap());
    store.commit(vec![delete("c", 3)]).await.unwrap();
    assert!(!referenced("m1").await, "no live message carries m1");
    assert!(!store.media_readable(&tt, "m1", &user("b")).await.unwrap());
    // A deleted edited message lets go of every version's blob.
    store.commit(vec![delete("c", 4)]).await.unwrap();
    assert!(!referenced("m2").await && !referenced("m3").await);
    // Deleted in one conversation, m4 is still carried in the other.
    store.commit(vec![delete("c", 5)]).await.unwrap();
    assert!(referenced("m4").await);
    assert!(store.media_readable(&tt, "m4", &user("c")).await.unwrap());
    assert!(!store.media_readable(&tt, "m4", &user("b")).await.unwrap());
    // Sent and deleted in one commit: the delete wins.
    store
        .commit(vec![
            append("d", 2, vec![with("d", 3, "m5")]),
            delete("d", 3),
        ])
        .await
        .unwrap();
    assert!(!referenced("m5").await);
    // Deleting again changes nothing.
    store.commit(vec![delete("c", 5)]).await.unwrap();
    assert!(referenced("m4").await);
}

pub async fn the_inbox_reads_on_after_a_cursor(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("cursor");
    let tt = tenant(t);
    let (b, phone) = (user("b"), device("phone"));
    store.register_device(&tt, &b, &phone).await.unwrap();
    seed_conversation(store, t, "c1", &["a", "b"], 5).await;
    seed_conversation(store, t, "c2", &["a", "b"], 4).await;
    let all = store.inbox(&tt, &b, &phone, None, 100).await.unwrap();
    assert_eq!(all.len(), 9);
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = store.inbox(&tt, &b, &phone, after, 2).await.unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().map(crate::InboxCursor::of);
        paged.extend(page);
    }
    let ids = |ms: &[Message]| {
        ms.iter()
            .map(|m| (m.conversation_id.clone(), m.seq))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(&paged),
        ids(&all),
        "pages continue where the last one ended"
    );
    // Past the last entry: nothing (and not another device's entries).
    let last = crate::InboxCursor::of(all.last().unwrap());
    assert!(
        store
            .inbox(&tt, &b, &phone, Some(last), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A day well before every other check's messages (UTC day 19000 is in
/// 2022), so that only this conversation's buckets are old.
const OLD_DAY: u32 = 19_000;

/// A message created on day `OLD_DAY + day`.
fn old_message(c: &str, seq: u64, day: u32) -> Message {
    let mut m = text_message(c, seq, "a", "phone", &format!("old-{seq}"));
    m.created_at =
        Timestamp::from_unix_ms(i64::from(OLD_DAY + day) * 86_400_000 + seq as i64 * 1000);
    m
}

/// A conversation over three days: seqs 1-3 on the first, 4-6 on the
/// second, 7-9 on the third; seq 2 and 5 edited, 3 and 4 deleted (4 after
/// an edit), bob's phone with every message in its inbox.
async fn seed_old_conversation(store: &dyn Store, t: &str, c: &str) {
    let tt = tenant(t);
    store
        .register_device(&tt, &user("b"), &device("phone"))
        .await
        .unwrap();
    let start = i64::from(OLD_DAY) * 86_400_000;
    store
        .commit(vec![create(
            t,
            c,
            ConversationKind::Group,
            &["a", "b"],
            start,
        )])
        .await
        .unwrap();
    let messages = (1..=9)
        .map(|seq| old_message(c, seq, ((seq - 1) / 3) as u32))
        .collect();
    let edit = |seq, text: &str| Mutation::Edit {
        key: key(t, c),
        seq,
        content: Content::Text { text: text.into() },
        editor: user("a"),
        at: Timestamp::from_unix_ms(start + 90_000_000 + seq as i64),
        inbox: true,
    };
    let delete = |seq| Mutation::Delete {
        key: key(t, c),
        seq,
        at: Timestamp::from_unix_ms(start + 95_000_000 + seq as i64),
        inbox: true,
    };
    store
        .commit(vec![
            Mutation::Append {
                key: key(t, c),
                expected_last_seq: 0,
                messages,
                inbox: true,
            },
            edit(2, "two, edited"),
            edit(2, "two, edited again"),
            edit(5, "five, edited"),
            delete(3),
            edit(4, "four, edited before its deletion"),
            delete(4),
        ])
        .await
        .unwrap();
}

fn bucket(t: &str, c: &str, day: u32) -> BucketKey {
    BucketKey {
        tenant: tenant(t),
        conversation_id: conv(c),
        day: OLD_DAY + day,
    }
}

/// The backend's side of tiered storage (F14): finding old buckets,
/// reading them, and the archive mark removing their rows.
pub async fn old_buckets_move_to_the_archive(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("archive");
    let tt = tenant(t);
    let (b, phone) = (user("b"), device("phone"));
    seed_old_conversation(store, t, "c").await;

    // The scan finds the two days before the cutoff, also one row at a time.
    let mut found = Vec::new();
    let mut cursor = None;
    loop {
        let scan = store
            .archive_candidates(OLD_DAY + 2, cursor, 1)
            .await
            .unwrap();
        found.extend(scan.buckets.into_iter().filter(|k| k.tenant == tt));
        cursor = scan.next;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(found, vec![bucket(t, "c", 0), bucket(t, "c", 1)]);

    let whole = store
        .bucket_contents(&bucket(t, "c", 0), 0, 100)
        .await
        .unwrap();
    assert_eq!((whole.first_seq, whole.last_seq), (1, 3));
    let seqs: Vec<u64> = whole.messages.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    assert_eq!(
        whole.versions.len(),
        1,
        "seq 2 has versions, deleted 3 none"
    );
    assert_eq!(whole.versions[0].0, 2);
    assert_eq!(whole.versions[0].1.len(), 3);
    let part = store
        .bucket_contents(&bucket(t, "c", 1), 4, 1)
        .await
        .unwrap();
    assert_eq!((part.first_seq, part.last_seq), (4, 6));
    assert_eq!(
        part.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![5]
    );
    assert_eq!(
        store.bucket_contents(&bucket(t, "c", 7), 0, 10).await,
        Err(StoreError::NotFound)
    );

    let objects = crate::archive::MemoryObjects::default();
    for day in [0, 1] {
        let moved = crate::archive::archive_bucket(store, &objects, &bucket(t, "c", day))
            .await
            .unwrap();
        assert_eq!(moved, 3);
    }
    assert!(matches!(
        store.bucket_contents(&bucket(t, "c", 0), 0, 100).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        crate::archive::archive_bucket(store, &objects, &bucket(t, "c", 0)).await,
        Err(StoreError::Conflict(_))
    ));
    // A mark that names the wrong range is refused.
    assert!(matches!(
        store
            .commit(vec![Mutation::Archive {
                bucket: bucket(t, "c", 2),
                first_seq: 7,
                last_seq: 8,
                object: "x".into(),
            }])
            .await,
        Err(StoreError::Conflict(_))
    ));

    let archived = store
        .archived_buckets(&key(t, "c"), 0, u64::MAX)
        .await
        .unwrap();
    let spans: Vec<(u32, u64, u64)> = archived
        .iter()
        .map(|a| (a.day - OLD_DAY, a.first_seq, a.last_seq))
        .collect();
    assert_eq!(spans, vec![(1, 4, 6), (0, 1, 3)], "newest first");
    assert_eq!(
        archived[1].object,
        crate::archive::object_name(&bucket(t, "c", 0))
    );
    let overlapping = |after, before| async move {
        store
            .archived_buckets(&key(t, "c"), after, before)
            .await
            .unwrap()
            .iter()
            .map(|a| a.day - OLD_DAY)
            .collect::<Vec<_>>()
    };
    assert_eq!(overlapping(3, 5).await, vec![1]);
    assert_eq!(overlapping(2, 4).await, vec![0]);
    assert_eq!(overlapping(6, u64::MAX).await, Vec::<u32>::new());
    assert!(
        store
            .archive_candidates(OLD_DAY + 2, None, 1_000_000)
            .await
            .unwrap()
            .buckets
            .iter()
            .all(|k| k.tenant != tt)
    );

    // The live rows are gone; the ids still lead to their seq; the inbox
    // names live rows only; the idempotency keys went with the rows. (Only
    // reads that stay clear of the archived range: the suite also runs on
    // the served store, which reads archives from its own blob store.)
    let live = store
        .history(
            &tt,
            &conv("c"),
            &b,
            HistoryQuery {
                before_seq: None,
                after_seq: Some(6),
                limit: 100,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        live.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![9, 8, 7]
    );
    let inbox = store.inbox(&tt, &b, &phone, None, 100).await.unwrap();
    assert_eq!(
        inbox.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![7, 8, 9]
    );
    let id1 = MessageKey {
        tenant: tt.clone(),
        conversation_id: conv("c"),
        message_id: old_message("c", 1, 0).message_id,
    };
    assert_eq!(
        store.message_seqs(vec![id1.clone()]).await.unwrap(),
        vec![Some(1)]
    );
    let sent1 = SentKey {
        tenant: tt.clone(),
        conversation_id: conv("c"),
        sender: user("a"),
        client_msg_id: ClientMsgId::new("old-1").unwrap(),
    };
    assert_eq!(store.find_sent(vec![sent1]).await.unwrap(), vec![None]);
    // The conversation keeps its position.
    let states = store.sequencer_states(vec![key(t, "c")]).await.unwrap();
    assert_eq!(states[0].as_ref().unwrap().last_seq, 9);

    // Restoring puts a row back once; a live row is never overwritten.
    let restore = |text: &str| {
        let mut m = old_message("c", 1, 0);
        m.content = Some(Content::Text { text: text.into() });
        Mutation::Restore {
            key: key(t, "c"),
            message: Box::new(m),
            versions: Vec::new(),
        }
    };
    store.commit(vec![restore("restored")]).await.unwrap();
    store.commit(vec![restore("again")]).await.unwrap();
    let one = store.find_messages(vec![id1]).await.unwrap().remove(0);
    assert_eq!(
        one.and_then(|m| m.content),
        Some(Content::Text {
            text: "restored".into()
        })
    );
}

/// Everything a reader can see of a conversation, for before/after.
async fn everything_visible(store: &dyn Store, t: &str, c: &str) -> Vec<String> {
    let (tt, cc, reader) = (tenant(t), conv(c), user("b"));
    let mut out = Vec::new();
    let all = store
        .history(
            &tt,
            &cc,
            &reader,
            HistoryQuery {
                before_seq: None,
                after_seq: None,
                limit: 1000,
            },
        )
        .await
        .unwrap();
    out.push(serde_json::to_string(&all).unwrap());
    // Page by page, two at a time, as a client scrolls back.
    let mut before = None;
    loop {
        let page = store
            .history(
                &tt,
                &cc,
                &reader,
                HistoryQuery {
                    before_seq: before,
                    after_seq: None,
                    limit: 2,
                },
            )
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        before = Some(last.seq);
        out.push(serde_json::to_string(&page).unwrap());
    }
    for after in [0, 2, 5] {
        let page = store.replay(&tt, &cc, &reader, after, 4).await.unwrap();
        out.push(serde_json::to_string(&page).unwrap());
    }
    let ids: Vec<MessageKey> = all
        .iter()
        .map(|m| MessageKey {
            tenant: tt.clone(),
            conversation_id: cc.clone(),
            message_id: m.message_id,
        })
        .collect();
    out.push(serde_json::to_string(&store.find_messages(ids).await.unwrap()).unwrap());
    for m in &all {
        let versions = store
            .versions(&tt, &cc, &reader, m.message_id)
            .await
            .unwrap();
        out.push(format!(
            "{} {}",
            m.seq,
            serde_json::to_string(&versions).unwrap()
        ));
    }
    out
}

/// Tiered storage as readers see it (F14): history, replay, lookups and
/// versions read the same before and after old buckets are archived,
/// edits and deletes included; archived messages can still be edited and
/// deleted; a lost object is a clear error. Takes the store as an `Arc`
/// because [`crate::archive::Tiered`] holds it.
pub async fn tiered_reads_are_unchanged(store: &Arc<dyn Store>) {
    use crate::archive::{MemoryObjects, Tiered, archive_bucket};

    let store = store.clone();
    let t = &unique_tenant("tiered");
    let tt = tenant(t);
    seed_old_conversation(store.as_ref(), t, "c").await;
    let before = everything_visible(store.as_ref(), t, "c").await;

    let objects = Arc::new(MemoryObjects::default());
    let tiered = Tiered::new(store.clone(), objects.clone());
    for day in [0, 1] {
        archive_bucket(&tiered, objects.as_ref(), &bucket(t, "c", day))
            .await
            .unwrap();
    }
    let raw = store
        .history(
            &tt,
            &conv("c"),
            &user("b"),
            HistoryQuery {
                before_seq: None,
                after_seq: None,
                limit: 100,
            },
        )
        .await
        .unwrap();
    assert_eq!(raw.len(), 3, "the old days left the live rows");
    assert_eq!(everything_visible(&tiered, t, "c").await, before);

    // Membership is checked as before.
    assert_eq!(
        tiered
            .history(
                &tt,
                &conv("c"),
                &user("mallory"),
                HistoryQuery {
                    before_seq: None,
                    after_seq: None,
                    limit: 10
                }
            )
            .await,
        Err(StoreError::NotAMember)
    );

    // Edits and deletes of archived messages: the edited one gets a third
    // version, the deleted one loses its versions.
    let at = Timestamp::from_unix_ms(2_000_000_000_000);
    tiered
        .commit(vec![
            Mutation::Edit {
                key: key(t, "c"),
                seq: 2,
                content: Content::Text {
                    text: "two, edited after archiving".into(),
                },
                editor: user("a"),
                at,
                inbox: true,
            },
            Mutation::Delete {
                key: key(t, "c"),
                seq: 5,
                at,
                inbox: true,
            },
        ])
        .await
        .unwrap();
    let all = tiered
        .history(
            &tt,
            &conv("c"),
            &user("b"),
            HistoryQuery {
                before_seq: None,
                after_seq: None,
                limit: 100,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (1..=9).rev().collect::<Vec<_>>()
    );
    let two = all.iter().find(|m| m.seq == 2).unwrap();
    assert_eq!(
        two.content,
        Some(Content::Text {
            text: "two, edited after archiving".into()
        })
    );
    let five = all.iter().find(|m| m.seq == 5).unwrap();
    assert!(five.content.is_none() && five.deleted_at.is_some());
    let versions = |seq: u64| {
        let tiered = &tiered;
        let tt = tt.clone();
        async move {
            tiered
                .versions(
                    &tt,
                    &conv("c"),
                    &user("b"),
                    old_message("c", seq, 0).message_id,
                )
                .await
                .unwrap()
        }
    };
    assert_eq!(versions(2).await.len(), 4);
    assert!(versions(5).await.is_empty());
    assert!(versions(4).await.is_empty(), "deleted before archiving");
    assert_eq!(versions(1).await.len(), 0, "never edited");

    // A lost object: a clear error naming it, not a shorter history.
    let object = crate::archive::object_name(&bucket(t, "c", 0));
    assert!(objects.remove(&object));
    let cold = Tiered::new(store.clone(), objects.clone());
    match cold
        .history(
            &tt,
            &conv("c"),
            &user("b"),
            HistoryQuery {
                before_seq: None,
                after_seq: None,
                limit: 100,
            },
        )
        .await
    {
        Err(StoreError::ArchiveUnreadable { object: named, .. }) => assert_eq!(named, object),
        other => panic!("expected ArchiveUnreadable, got {other:?}"),
    }
    // What is newer than the lost day still reads.
    let recent = cold
        .history(
            &tt,
            &conv("c"),
            &user("b"),
            HistoryQuery {
                before_seq: None,
                after_seq: Some(3),
                limit: 100,
            },
        )
        .await
        .unwrap();
    assert_eq!(recent.len(), 6);
}
