//! Checks of threads and mentions (v1.1): a root's summary, a thread's
//! pages, who takes part and what they have not read, unread mentions,
//! and mentions that reach members of a conversation without inboxes.

use std::sync::Arc;

use switchboard_protocol::{ConversationKind, MessageId, Timestamp};

use super::support::{
    conv, create, device, everything, key, tenant, text_message, unique_tenant, user,
};
use crate::{HistoryQuery, Mutation, Store, StoreError};

fn reply(t: &str, seq: u64, root_seq: u64, sender: &str) -> Vec<Mutation> {
    let mut m = text_message("c", seq, sender, "phone", &format!("r{seq}"));
    m.thread_id = Some(MessageId::from_u64(root_seq * 1000));
    m.created_at = Timestamp::from_unix_ms(1_780_000_000_000 + seq as i64);
    vec![
        Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: seq - 1,
            messages: vec![m],
            inbox: true,
        },
        Mutation::ThreadReply {
            key: key(t, "c"),
            root_seq,
            seq,
            sender: user(sender),
            at: Timestamp::from_unix_ms(1_780_000_000_000 + seq as i64),
        },
    ]
}

fn thread_page(root: u64) -> HistoryQuery {
    HistoryQuery {
        before_seq: None,
        after_seq: None,
        limit: 10,
        thread_root: Some(root),
    }
}

pub async fn threads_count_their_replies_and_each_members_unread(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("threads");
    let mut root = text_message("c", 1, "ann", "phone", "root");
    root.message_id = MessageId::from_u64(1000);
    store
        .commit(vec![
            create(t, "c", ConversationKind::Group, &["ann", "bob", "cat"], 10),
            Mutation::Append {
                key: key(t, "c"),
                expected_last_seq: 0,
                messages: vec![root],
                inbox: true,
            },
        ])
        .await
        .unwrap();
    store.commit(reply(t, 2, 1, "bob")).await.unwrap();
    // A message in the main timeline between the replies.
    store
        .commit(vec![Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: 2,
            messages: vec![text_message("c", 3, "cat", "phone", "main")],
            inbox: true,
        }])
        .await
        .unwrap();
    store.commit(reply(t, 4, 1, "cat")).await.unwrap();
    // The thread's pages: its replies and its root, newest first.
    let page = store
        .history(&tenant(t), &conv("c"), &user("ann"), thread_page(1))
        .await
        .unwrap();
    let seqs: Vec<u64> = page.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, [4, 2, 1]);
    let summary = page[2].thread.clone().expect("the root has its summary");
    assert_eq!(summary.reply_count, 2);
    assert_eq!(summary.participants, [user("cat"), user("bob")]);
    // Who took part: the root's author has read none of it; each replier
    // has read up to their own reply.
    let unread = |who: &'static str| async move {
        store
            .threads(&tenant(t), &conv("c"), &user(who))
            .await
            .unwrap()
            .iter()
            .map(|e| (e.root.seq, e.unread))
            .collect::<Vec<_>>()
    };
    assert_eq!(unread("ann").await, [(1, 2)]);
    assert_eq!(unread("bob").await, [(1, 1)]);
    assert_eq!(unread("cat").await, [(1, 0)]);
    // Reading moves the mark forward only; a thread one never took part
    // in keeps no mark.
    store
        .ack_thread_read(
            &tenant(t),
            &user("ann"),
            &conv("c"),
            MessageId::from_u64(1000),
            2,
        )
        .await
        .unwrap();
    assert_eq!(unread("ann").await, [(1, 1)]);
    store
        .ack_thread_read(
            &tenant(t),
            &user("ann"),
            &conv("c"),
            MessageId::from_u64(1000),
            1,
        )
        .await
        .unwrap();
    assert_eq!(unread("ann").await, [(1, 1)]);
    assert_eq!(
        store
            .ack_thread_read(
                &tenant(t),
                &user("zed"),
                &conv("c"),
                MessageId::from_u64(1000),
                4
            )
            .await,
        Err(StoreError::NotAMember)
    );
    assert_eq!(
        store.threads(&tenant(t), &conv("c"), &user("zed")).await,
        Err(StoreError::NotAMember)
    );
}

pub async fn mentions_are_counted_until_read_and_reach_those_without_inboxes(
    store: &Arc<dyn Store>,
) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("mentions");
    store
        .commit(vec![create(
            t,
            "c",
            ConversationKind::Channel,
            &["ann", "bob", "cat"],
            10,
        )])
        .await
        .unwrap();
    for u in ["bob", "cat"] {
        store
            .register_device(&tenant(t), &user(u), &device("phone"))
            .await
            .unwrap();
    }
    // A conversation without inboxes (it fans out on read): a message
    // naming bob reaches his inbox anyway; cat's stays empty.
    let mut named = text_message("c", 1, "ann", "phone", "hey-bob");
    named.mentions = vec![user("bob"), user("nobody")];
    let mut everyone = text_message("c", 2, "ann", "phone", "all-hands");
    everyone.mention_all = true;
    store
        .commit(vec![Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: 0,
            messages: vec![named, everyone],
            inbox: false,
        }])
        .await
        .unwrap();
    let inbox = |who: &'static str| async move {
        store
            .inbox(&tenant(t), &user(who), &device("phone"), None, 10)
            .await
            .unwrap()
            .iter()
            .map(|m| m.seq)
            .collect::<Vec<_>>()
    };
    assert_eq!(inbox("bob").await, [1, 2]);
    assert_eq!(inbox("cat").await, [2]);
    // The list entry and the conversation's detail count the same.
    let mentions = |who: &'static str| async move {
        let listed = store
            .conversation_page(&tenant(t), &user(who), everything())
            .await
            .unwrap()[0]
            .mention_count;
        let detail = store
            .conversation(&tenant(t), &conv("c"), &user(who))
            .await
            .unwrap()
            .reader_mention_count;
        assert_eq!(
            listed, detail,
            "{who}'s mention count, listed and in detail"
        );
        listed
    };
    assert_eq!(mentions("bob").await, 2);
    assert_eq!(mentions("cat").await, 1);
    // The sender is not counted, and reading clears the count.
    assert_eq!(mentions("ann").await, 0);
    store
        .ack_read(&tenant(t), &user("bob"), &conv("c"), 1)
        .await
        .unwrap();
    assert_eq!(mentions("bob").await, 1);
    // A deleted message counts in nobody's mentions, `@all` included.
    let mut also_cat = text_message("c", 3, "ann", "phone", "hey-cat");
    also_cat.mentions = vec![user("cat")];
    store
        .commit(vec![Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: 2,
            messages: vec![also_cat],
            inbox: false,
        }])
        .await
        .unwrap();
    assert_eq!(mentions("cat").await, 2);
    let delete = |seq| Mutation::Delete {
        key: key(t, "c"),
        seq,
        at: Timestamp::from_unix_ms(1_780_000_100_000),
        inbox: false,
    };
    store.commit(vec![delete(2)]).await.unwrap();
    assert_eq!(mentions("bob").await, 0);
    assert_eq!(mentions("cat").await, 1);
    store.commit(vec![delete(3)]).await.unwrap();
    assert_eq!(mentions("cat").await, 0);
    // What a deleted message shows names nobody.
    let page = store
        .history(
            &tenant(t),
            &conv("c"),
            &user("cat"),
            HistoryQuery {
                before_seq: None,
                after_seq: None,
                limit: 10,
                thread_root: None,
            },
        )
        .await
        .unwrap();
    let deleted: Vec<_> = page.iter().filter(|m| m.deleted_at.is_some()).collect();
    assert_eq!(deleted.len(), 2);
    assert!(
        deleted
            .iter()
            .all(|m| m.mentions.is_empty() && !m.mention_all)
    );
    // One who leaves takes their mentions along: back again, reading from
    // 0, they find none of the old ones counted.
    let mut for_cat = text_message("c", 4, "ann", "phone", "cat-again");
    for_cat.mentions = vec![user("cat")];
    store
        .commit(vec![Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: 3,
            messages: vec![for_cat],
            inbox: false,
        }])
        .await
        .unwrap();
    assert_eq!(mentions("cat").await, 1);
    store
        .commit(vec![Mutation::RemoveMembers {
            key: key(t, "c"),
            users: vec![user("cat")],
        }])
        .await
        .unwrap();
    store
        .commit(vec![Mutation::AddMembers {
            key: key(t, "c"),
            users: vec![user("cat")],
            at: Timestamp::from_unix_ms(1_780_000_200_000),
            unsolicited: None,
        }])
        .await
        .unwrap();
    assert_eq!(mentions("cat").await, 0);
}
