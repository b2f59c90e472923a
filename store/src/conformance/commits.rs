//! Checks of writing: conversation creation is exclusive, appends keep
//! seqs gapless, idempotency keys find the original, tenants stay apart,
//! and concurrent commits all land.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::join_all;

use switchboard_protocol::{ClientMsgId, ConversationKind};

use crate::{Mutation, SentKey, Store, StoreError};

use super::support::{
    check_seeded_conversation, conv, create, everything, key, seed_conversation, tenant,
    text_message, unique_tenant, user,
};

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
