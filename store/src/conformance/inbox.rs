//! Checks of the per-device inbox: delivery per device, read marks that
//! only move forward, expiry sweeps, and reading on after a cursor.

use std::sync::Arc;

use switchboard_protocol::{Content, ConversationKind, Message, Timestamp};

use crate::{MarkChange, Mutation, Store, StoreError};

use super::support::{
    conv, device, key, seed_conversation, seed_more, tenant, text_message, unique_tenant, user,
};

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
    assert_eq!(change.member_count, 2);
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

    // A mark's answer lists the members up to MEMBERS_INLINE, and past
    // that only counts them, at the threshold and one past it.
    for size in [MarkChange::MEMBERS_INLINE, MarkChange::MEMBERS_INLINE + 1] {
        let name = format!("big{size}");
        let names: Vec<String> = (0..size).map(|i| format!("m{i}")).collect();
        let members: Vec<&str> = names.iter().map(String::as_str).collect();
        seed_conversation(store, t, &name, &members, 1).await;
        let change = store
            .ack_read(&tt, &user("m1"), &conv(&name), 1)
            .await
            .unwrap();
        assert!(change.read_moved);
        assert_eq!(change.member_count, size);
        assert_eq!(change.members_total(), size);
        let listed = if size <= MarkChange::MEMBERS_INLINE {
            size
        } else {
            0
        };
        assert_eq!(change.members.len(), listed, "{size} members");
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
            custom: None,
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
