//! Checks of a user's view of other people: the conversation list a page
//! at a time, who has spoken to whom (presence scope and consent), and
//! unsolicited adds within their limit.

use std::sync::Arc;

use switchboard_protocol::{ConversationKind, Timestamp};

use super::support::{conv, create, key, seed_more, tenant, text_message, unique_tenant, user};
use crate::{
    ConsentQuery, ConversationSummary, ListCursor, ListQuery, Mutation, Store, StoreError,
    UnsolicitedAdds,
};

async fn page(
    store: &dyn Store,
    t: &str,
    u: &str,
    after: Option<&ConversationSummary>,
    limit: usize,
) -> Vec<ConversationSummary> {
    let query = ListQuery {
        after: after.map(|s| ListCursor::of(&s.record)),
        limit,
    };
    store
        .conversation_page(&tenant(t), &user(u), query)
        .await
        .unwrap()
}

fn ids(page: &[ConversationSummary]) -> Vec<String> {
    page.iter()
        .map(|s| s.record.conversation_id.as_str().to_owned())
        .collect()
}

/// Appends one message to `c` (whose last seq is `after`) at time `at`.
async fn message_at(store: &dyn Store, t: &str, c: &str, after: u64, sender: &str, at: i64) {
    let mut m = text_message(c, after + 1, sender, "phone", &format!("at-{at}"));
    m.created_at = Timestamp::from_unix_ms(at);
    store
        .commit(vec![Mutation::Append {
            key: key(t, c),
            expected_last_seq: after,
            messages: vec![m],
            inbox: true,
        }])
        .await
        .unwrap();
}

pub async fn the_conversation_list_pages_in_order(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("pages");
    // g3 and g4 are active in the same millisecond: the id orders them.
    let mut expected = Vec::new();
    for i in 0..9i64 {
        let at = if i == 4 { 130 } else { 100 + i * 10 };
        let c = format!("g{i}");
        store
            .commit(vec![create(
                t,
                &c,
                ConversationKind::Group,
                &["o", "me"],
                at,
            )])
            .await
            .unwrap();
        expected.push((at, c));
    }
    expected.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let expected: Vec<String> = expected.into_iter().map(|(_, c)| c).collect();
    assert_eq!(&expected[4..6], ["g3", "g4"]);

    for limit in [1, 2, 4, 9, 50] {
        let mut seen = Vec::new();
        let mut last: Option<ConversationSummary> = None;
        loop {
            let p = page(store, t, "me", last.as_ref(), limit).await;
            assert!(p.len() <= limit);
            seen.extend(ids(&p));
            match p.last() {
                Some(l) if p.len() == limit => last = Some(l.clone()),
                _ => break,
            }
        }
        assert_eq!(seen, expected, "pages of {limit}");
    }
    let first = page(store, t, "me", None, 3).await;
    assert_eq!(first[0].member_ids, vec![user("me"), user("o")]);
    assert_eq!(first[0].me.user_id, user("me"));
    assert!(page(store, t, "me", None, 0).await.is_empty());
    let everything = page(store, t, "me", None, 100).await;
    assert!(page(store, t, "me", everything.last(), 5).await.is_empty());
    assert!(page(store, t, "stranger", None, 5).await.is_empty());
}

pub async fn a_conversation_that_moves_is_listed_once(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("moves");
    for (i, c) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        let at = 10 * (i as i64 + 1);
        store
            .commit(vec![create(
                t,
                c,
                ConversationKind::Group,
                &["o", "me"],
                at,
            )])
            .await
            .unwrap();
    }
    let first = page(store, t, "me", None, 2).await;
    assert_eq!(ids(&first), ["f", "e"]);
    // A conversation not listed yet and one listed already get messages.
    message_at(store, t, "b", 0, "o", 70).await;
    message_at(store, t, "f", 0, "o", 80).await;
    let second = page(store, t, "me", first.last(), 2).await;
    assert_eq!(ids(&second), ["d", "c"]);
    let third = page(store, t, "me", second.last(), 2).await;
    assert_eq!(
        ids(&third),
        ["a"],
        "b moved before the cursor: not listed again"
    );
    // The first page shows both, newest first.
    let again = page(store, t, "me", None, 2).await;
    assert_eq!(ids(&again), ["f", "b"]);
    assert_eq!(again[1].record.last_seq, 1);
    // One not listed yet in this pass moves: the pages after the move do
    // not hold it, the first page does.
    seed_more(store, t, "d", 0, 1).await;
    let rest = page(store, t, "me", again.last(), 10).await;
    assert_eq!(ids(&rest), ["e", "c", "a"]);
    assert_eq!(ids(&page(store, t, "me", None, 1).await), ["d"]);
}

fn asks(t: &str, u: &str, actor: &str, since: i64) -> ConsentQuery {
    ConsentQuery {
        tenant: tenant(t),
        user: user(u),
        actor: user(actor),
        since: Timestamp::from_unix_ms(since),
    }
}

async fn knows(store: &dyn Store, t: &str, u: &str, actor: &str) -> bool {
    store.consent(vec![asks(t, u, actor, 0)]).await.unwrap()[0].knows_actor
}

pub async fn speakers_decide_contacts_and_who_knows_whom(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("speakers");
    let contacts =
        |u: &'static str| async move { store.contacts(&tenant(t), &user(u)).await.unwrap() };
    // a opens a direct conversation with v: a's presence concerns v, not
    // the other way round until v answers.
    store
        .commit(vec![create(
            t,
            "d",
            ConversationKind::Direct,
            &["a", "v"],
            1,
        )])
        .await
        .unwrap();
    assert_eq!(contacts("a").await, vec![user("v")]);
    assert!(contacts("v").await.is_empty());
    assert!(knows(store, t, "a", "v").await, "a opened it");
    assert!(!knows(store, t, "v", "a").await);
    message_at(store, t, "d", 0, "v", 5).await;
    assert_eq!(contacts("v").await, vec![user("a")]);
    assert!(knows(store, t, "v", "a").await);

    // Groups: being put in is not knowing; sending there is.
    store
        .commit(vec![create(
            t,
            "g",
            ConversationKind::Group,
            &["a", "w", "x"],
            2,
        )])
        .await
        .unwrap();
    assert!(!knows(store, t, "w", "a").await);
    assert!(!knows(store, t, "w", "x").await);
    message_at(store, t, "g", 0, "w", 6).await;
    assert!(knows(store, t, "w", "a").await);
    assert!(knows(store, t, "w", "x").await);
    assert!(!knows(store, t, "x", "w").await, "x has not spoken");
    assert!(
        contacts("w").await.is_empty(),
        "groups are not presence scope"
    );
    // Leaving ends it; coming back starts over.
    store
        .commit(vec![Mutation::RemoveMembers {
            key: key(t, "g"),
            users: vec![user("w")],
        }])
        .await
        .unwrap();
    assert!(!knows(store, t, "w", "a").await);
    store
        .commit(vec![Mutation::AddMembers {
            key: key(t, "g"),
            users: vec![user("w")],
            at: Timestamp::from_unix_ms(7),
            unsolicited: None,
        }])
        .await
        .unwrap();
    assert!(!knows(store, t, "w", "a").await);
    // Nobody knows anybody in another tenant.
    let other = &unique_tenant("speakers-other");
    assert!(!knows(store, other, "v", "a").await);
    assert!(
        store
            .contacts(&tenant(other), &user("a"))
            .await
            .unwrap()
            .is_empty()
    );
}

fn group_by(t: &str, c: &str, actor: &str, v: &str, at: i64, limit: u32) -> Mutation {
    let mut m = create(t, c, ConversationKind::Group, &[actor, v], at);
    if let Mutation::CreateConversation { unsolicited, .. } = &mut m {
        *unsolicited = Some(UnsolicitedAdds {
            users: vec![user(v)],
            actor: user(actor),
            at: Timestamp::from_unix_ms(at),
            limit,
        });
    }
    m
}

async fn unsolicited(store: &dyn Store, t: &str, u: &str, since: i64) -> u32 {
    store.consent(vec![asks(t, u, "a", since)]).await.unwrap()[0].unsolicited
}

pub async fn unsolicited_adds_are_recorded_within_their_limit(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("unsolicited");
    let exists = |c: &'static str| async move {
        store.sequencer_states(vec![key(t, c)]).await.unwrap()[0].is_some()
    };
    // The limit, and one past it.
    store
        .commit(vec![group_by(t, "g1", "a", "v", 1000, 2)])
        .await
        .unwrap();
    store
        .commit(vec![group_by(t, "g2", "a", "v", 1001, 2)])
        .await
        .unwrap();
    let past = store
        .commit(vec![group_by(t, "g3", "a", "v", 1002, 2)])
        .await;
    assert!(matches!(past, Err(StoreError::Conflict(_))), "{past:?}");
    assert!(!exists("g3").await, "nothing of a refused commit is stored");
    assert_eq!(unsolicited(store, t, "v", 0).await, 2);
    assert_eq!(unsolicited(store, t, "v", 1001).await, 1);
    assert_eq!(unsolicited(store, t, "v", 1002).await, 0);
    assert_eq!(unsolicited(store, t, "a", 0).await, 0);

    // Members added to an existing group count the same way; leaving
    // gives nothing back.
    store
        .commit(vec![create(
            t,
            "h",
            ConversationKind::Group,
            &["a", "x"],
            900,
        )])
        .await
        .unwrap();
    let add = |limit| Mutation::AddMembers {
        key: key(t, "h"),
        users: vec![user("v")],
        at: Timestamp::from_unix_ms(1003),
        unsolicited: Some(UnsolicitedAdds {
            users: vec![user("v")],
            actor: user("a"),
            at: Timestamp::from_unix_ms(1003),
            limit,
        }),
    };
    let refused = store.commit(vec![add(2)]).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    store.commit(vec![add(3)]).await.unwrap();
    store
        .commit(vec![Mutation::RemoveMembers {
            key: key(t, "g1"),
            users: vec![user("v")],
        }])
        .await
        .unwrap();
    assert_eq!(unsolicited(store, t, "v", 0).await, 3);

    // Within one commit, each add sees those before it.
    let both = store
        .commit(vec![
            group_by(t, "k1", "a", "u", 1000, 1),
            group_by(t, "k2", "a", "u", 1001, 1),
        ])
        .await;
    assert!(matches!(both, Err(StoreError::Conflict(_))), "{both:?}");
    assert!(!exists("k1").await);
    assert_eq!(unsolicited(store, t, "u", 0).await, 0);
    // A day later, those adds no longer count.
    let next_day = 1003 + crate::UNSOLICITED_WINDOW_MS + 1;
    store
        .commit(vec![group_by(t, "g4", "a", "v", next_day, 1)])
        .await
        .unwrap();
    assert!(exists("g4").await);
}

/// Profiles (v1.3): a put replaces the row, reads come in the order
/// asked with `None` for users without one, tenants are apart, and the
/// user's erasure removes theirs.
pub async fn profiles_are_stored_replaced_and_erased(store: &Arc<dyn Store>) {
    use switchboard_protocol::profile::{Profile, Status};
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("profiles");
    let put = |p: Profile| Mutation::PutProfile {
        tenant: tenant(t),
        profile: Box::new(p),
    };
    let mut alice = Profile::empty(user("alice"));
    alice.display_name = Some("Alice".into());
    alice.status = Some(Status {
        text: "at lunch".into(),
        emoji: Some("🍜".into()),
        expires_at: Some(Timestamp::from_unix_ms(5_000)),
    });
    alice
        .custom
        .insert("team".into(), serde_json::json!({"name": "blue"}));
    alice.updated_at = Some(Timestamp::from_unix_ms(1_000));
    store.commit(vec![put(alice.clone())]).await.unwrap();
    let mut bob = Profile::empty(user("bob"));
    bob.avatar = Some("avatar-ref".into());
    bob.updated_at = Some(Timestamp::from_unix_ms(1_001));
    store.commit(vec![put(bob.clone())]).await.unwrap();

    let read = |users: &[&str]| {
        let users = users.iter().map(|u| user(u)).collect();
        async move { store.profiles(&tenant(t), users).await.unwrap() }
    };
    assert_eq!(
        read(&["bob", "nobody", "alice"]).await,
        vec![Some(bob.clone()), None, Some(alice.clone())]
    );
    assert_eq!(
        store
            .profiles(&tenant(&unique_tenant("other")), vec![user("alice")])
            .await
            .unwrap(),
        vec![None],
        "another tenant's alice is someone else"
    );

    // A later put replaces the whole row.
    let mut renamed = Profile::empty(user("alice"));
    renamed.display_name = Some("Alice B.".into());
    renamed.updated_at = Some(Timestamp::from_unix_ms(2_000));
    store.commit(vec![put(renamed.clone())]).await.unwrap();
    assert_eq!(read(&["alice"]).await, vec![Some(renamed)]);

    store
        .commit(vec![Mutation::EraseUser {
            tenant: tenant(t),
            user: user("alice"),
        }])
        .await
        .unwrap();
    assert_eq!(read(&["alice", "bob"]).await, vec![None, Some(bob)]);
}

/// Unread counts (issue 43): only what a member would call unread counts,
/// from rows: not their own messages, not system messages,
/// not thread replies, not deleted ones, not those of a user they block;
/// and nothing at or before their read mark.
pub async fn unread_counts_count_what_a_member_would(store: &Arc<dyn Store>) {
    use switchboard_protocol::{Content, MessageId};
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("unread");
    store
        .commit(vec![create(
            t,
            "g",
            ConversationKind::Group,
            &["ann", "bob", "eve", "cal"],
            100,
        )])
        .await
        .unwrap();
    let mut ms = Vec::new();
    // Read by cal, who never sends (a sender's own send marks what came
    // before it read): 1 ann's, 2 bob's, 3 a system message, 4 a reply in
    // 1's thread, 5 ann's, deleted below, 6 eve's, whom cal blocks, 7
    // ann's again.
    for (seq, sender) in [
        (1, "ann"),
        (2, "bob"),
        (3, "ann"),
        (4, "ann"),
        (5, "ann"),
        (6, "eve"),
        (7, "ann"),
    ] {
        let mut m = text_message("g", seq, sender, "d", &format!("u-{seq}"));
        if seq == 3 {
            m.content = Some(
                serde_json::from_value::<Content>(serde_json::json!({
                    "kind": "system", "event": "members_added", "actor": "ann", "user_ids": ["eve"]
                }))
                .unwrap(),
            );
        }
        if seq == 4 {
            m.thread_id = Some(MessageId::from_u64(1_000_001));
        }
        ms.push(m);
    }
    store
        .commit(vec![Mutation::Append {
            key: key(t, "g"),
            expected_last_seq: 0,
            messages: ms,
            inbox: true,
        }])
        .await
        .unwrap();
    store
        .commit(vec![
            Mutation::Delete {
                key: key(t, "g"),
                seq: 5,
                at: Timestamp::from_unix_ms(1_780_000_001_000),
                inbox: true,
            },
            Mutation::SetBlock {
                tenant: tenant(t),
                user: user("cal"),
                target: user("eve"),
                at: Some(Timestamp::from_unix_ms(1_780_000_001_000)),
            },
        ])
        .await
        .unwrap();
    let unread = |who: &'static str| async move {
        let listed = page(store, t, who, None, 10).await[0].unread_count;
        let detail = store
            .conversation(&tenant(t), &conv("g"), &user(who))
            .await
            .unwrap()
            .reader_unread_count;
        assert_eq!(listed, detail, "{who}: the list and the conversation agree");
        listed
    };
    assert_eq!(unread("cal").await, 3, "1, 2 and 7");
    // Bob read through his own 2: ann's 7 and eve's 6 are left.
    assert_eq!(unread("bob").await, 2);
    // After a read mark at 6, only 7 is left for cal.
    store
        .ack_read(&tenant(t), &user("cal"), &conv("g"), 6)
        .await
        .unwrap();
    assert_eq!(unread("cal").await, 1);
}

/// Shadow bans (v1.3): a message stored `shadow` keeps the flag through
/// reads and edits, reaches its sender's other devices' inboxes and no one
/// else's, counts toward nobody's unread count and mentions nobody. (Who
/// may see it is the gateway's to decide from the flag.)
pub async fn a_shadow_message_is_its_senders_alone(store: &Arc<dyn Store>) {
    use switchboard_protocol::Content;

    use super::support::device;
    use crate::HistoryQuery;
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("shadow");
    let tt = tenant(t);
    for (u, d) in [("ann", "phone"), ("ann", "tablet"), ("bob", "phone")] {
        store
            .register_device(&tt, &user(u), &device(d))
            .await
            .unwrap();
    }
    store
        .commit(vec![create(
            t,
            "g",
            ConversationKind::Group,
            &["ann", "bob", "cal"],
            100,
        )])
        .await
        .unwrap();
    // 1 and 3 bob's from his laptop; 2 ann's from her phone, shadow,
    // mentioning bob.
    let mut ms = Vec::new();
    for (seq, sender, dev) in [
        (1, "bob", "laptop"),
        (2, "ann", "phone"),
        (3, "bob", "laptop"),
    ] {
        let mut m = text_message("g", seq, sender, dev, &format!("s-{seq}"));
        if seq == 2 {
            m.shadow = true;
            m.mentions = vec![user("bob")];
        }
        ms.push(m);
    }
    store
        .commit(vec![Mutation::Append {
            key: key(t, "g"),
            expected_last_seq: 0,
            messages: ms,
            inbox: true,
        }])
        .await
        .unwrap();
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
    assert_eq!(
        inbox("ann", "tablet").await,
        vec![1, 2, 3],
        "the sender's other device"
    );
    assert_eq!(inbox("bob", "phone").await, vec![1, 3], "nobody else's");
    let listed = page(store, t, "cal", None, 10).await;
    assert_eq!(
        listed[0].unread_count, 2,
        "1 and 3 count for cal, 2 does not"
    );
    let listed = page(store, t, "bob", None, 10).await;
    assert_eq!(
        listed[0].mention_count, 0,
        "the shadow message names nobody"
    );

    store
        .commit(vec![Mutation::Edit {
            key: key(t, "g"),
            seq: 2,
            content: Content::Text {
                text: "edited".into(),
            },
            editor: user("ann"),
            at: Timestamp::from_unix_ms(1_780_000_002_000),
            inbox: true,
            custom: None,
        }])
        .await
        .unwrap();
    assert_eq!(inbox("bob", "phone").await, vec![1, 3], "nor after an edit");
    let query = HistoryQuery {
        before_seq: None,
        after_seq: None,
        limit: 10,
        thread_root: None,
    };
    let history = store
        .history(&tt, &conv("g"), &user("cal"), query)
        .await
        .unwrap();
    let flags: Vec<(u64, bool)> = history.iter().map(|m| (m.seq, m.shadow)).collect();
    assert_eq!(
        flags,
        [(3, false), (2, true), (1, false)],
        "kept through the edit"
    );
    assert_eq!(
        history[1].content,
        Some(Content::Text {
            text: "edited".into()
        })
    );
    let listed = page(store, t, "cal", None, 10).await;
    assert_eq!(listed[0].unread_count, 2, "still");
}
