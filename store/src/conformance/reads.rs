//! Checks of reading: history order and bounds, membership as the key to
//! every read, the conversation list's order, and what removing a member
//! takes away.

use std::sync::Arc;

use switchboard_protocol::{ConversationKind, Timestamp};

use crate::{HistoryQuery, Mutation, Store, StoreError};

use super::support::{
    conv, create, device, everything, key, seed_conversation, tenant, text_message, unique_tenant,
    user,
};

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
                    thread_root: None,
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
        thread_root: None,
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

/// A sender's own messages come from their own rows: newest first, paged
/// by seq, nobody else's, and per conversation and tenant.
pub async fn a_senders_messages_are_listed_from_their_own_rows(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("sentby");
    let other = &unique_tenant("sentby-other");
    for (tn, c) in [(t, "c"), (t, "d"), (other, "c")] {
        store
            .commit(vec![create(
                tn,
                c,
                ConversationKind::Group,
                &["a", "b"],
                10,
            )])
            .await
            .unwrap();
    }
    // a sends the odd seqs of `c`, b the even ones; a sends once in `d`
    // and in the other tenant.
    let messages = (1..=9)
        .map(|seq| {
            let who = if seq % 2 == 1 { "a" } else { "b" };
            text_message("c", seq, who, "phone", &format!("m{seq}"))
        })
        .collect();
    let mut commits = vec![Mutation::Append {
        key: key(t, "c"),
        expected_last_seq: 0,
        messages,
        inbox: true,
    }];
    for (tn, c) in [(t, "d"), (other, "c")] {
        commits.push(Mutation::Append {
            key: key(tn, c),
            expected_last_seq: 0,
            messages: vec![text_message(c, 1, "a", "phone", "elsewhere")],
            inbox: true,
        });
    }
    store.commit(commits).await.unwrap();

    let page = |c: &'static str, who: &'static str, before, limit| async move {
        store
            .sent_by(&key(t, c), &user(who), before, limit)
            .await
            .unwrap()
            .into_iter()
            .map(|row| {
                let m = row.message.expect("a live message comes with its row");
                assert_eq!((m.seq, m.sender_id.as_str()), (row.seq, who));
                row.seq
            })
            .collect::<Vec<u64>>()
    };
    assert_eq!(page("c", "a", None, 100).await, vec![9, 7, 5, 3, 1]);
    assert_eq!(page("c", "b", None, 100).await, vec![8, 6, 4, 2]);
    assert_eq!(page("c", "a", None, 2).await, vec![9, 7]);
    assert_eq!(page("c", "a", Some(7), 2).await, vec![5, 3]);
    assert_eq!(page("c", "a", Some(1), 2).await, Vec::<u64>::new());
    assert_eq!(page("c", "a", None, 0).await, Vec::<u64>::new());
    assert_eq!(page("d", "a", None, 100).await, vec![1]);
    assert_eq!(page("d", "b", None, 100).await, Vec::<u64>::new());
    assert_eq!(page("c", "nobody", None, 100).await, Vec::<u64>::new());

    // A deleted message stays listed, as the tombstone it is now.
    store
        .commit(vec![Mutation::Delete {
            key: key(t, "c"),
            seq: 5,
            at: Timestamp::from_unix_ms(20),
            inbox: true,
        }])
        .await
        .unwrap();
    let rows = store
        .sent_by(&key(t, "c"), &user("a"), Some(6), 1)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let m = rows[0].message.as_ref().expect("live");
    assert_eq!(m.seq, 5);
    assert!(m.deleted_at.is_some());
}
