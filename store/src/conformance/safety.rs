//! Checks of the v1.2 safety rows: a conversation's policy (in its
//! record and the sequencer's state), bans, and blocks (listed, and a
//! direct conversation's state saying who blocks whom).

use std::sync::Arc;

use switchboard_protocol::safety::{Ban, ConversationPolicy};
use switchboard_protocol::{ConversationKind, Timestamp};

use super::support::{conv, create, everything, key, tenant, unique_tenant, user};
use crate::{Mutation, Store, StoreError};

pub async fn policies_bans_and_blocks_are_stored_and_shown(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("safety");
    store
        .commit(vec![
            create(t, "g", ConversationKind::Group, &["ann", "bob"], 10),
            create(t, "d", ConversationKind::Direct, &["ann", "bob"], 10),
        ])
        .await
        .unwrap();

    // A policy shows in the record, the list and the sequencer's state;
    // the default removes it.
    let policy = ConversationPolicy {
        slow_mode_secs: 30,
        retention_days: Some(7),
        disappearing_secs: None,
    };
    store
        .commit(vec![Mutation::SetPolicy {
            key: key(t, "g"),
            policy,
        }])
        .await
        .unwrap();
    let detail = store
        .conversation(&tenant(t), &conv("g"), &user("bob"))
        .await
        .unwrap();
    assert_eq!(detail.record.policy, policy);
    let listed = store
        .conversation_page(&tenant(t), &user("bob"), everything())
        .await
        .unwrap();
    let g = listed
        .iter()
        .find(|s| s.record.conversation_id == conv("g"))
        .unwrap();
    assert_eq!(g.record.policy, policy);
    let states = store
        .sequencer_states(vec![key(t, "g"), key(t, "d")])
        .await
        .unwrap();
    assert_eq!(states[0].as_ref().unwrap().policy, policy);
    assert!(states[1].as_ref().unwrap().policy.is_default());
    store
        .commit(vec![Mutation::SetPolicy {
            key: key(t, "g"),
            policy: ConversationPolicy::default(),
        }])
        .await
        .unwrap();
    let detail = store
        .conversation(&tenant(t), &conv("g"), &user("ann"))
        .await
        .unwrap();
    assert!(detail.record.policy.is_default());
    // A policy of a conversation that does not exist is refused.
    let missing = store
        .commit(vec![Mutation::SetPolicy {
            key: key(t, "nope"),
            policy,
        }])
        .await;
    assert_eq!(missing, Err(StoreError::NotFound));

    // Bans: newest first, one per user (a second replaces the first),
    // lifted by an unban.
    let ban = |u: &str, at: i64, until: Option<i64>| Ban {
        user_id: user(u),
        by: user("ann"),
        banned_at: Timestamp::from_unix_ms(at),
        until: until.map(Timestamp::from_unix_ms),
    };
    store
        .commit(vec![
            Mutation::Ban {
                key: key(t, "g"),
                ban: ban("cat", 100, None),
            },
            Mutation::Ban {
                key: key(t, "g"),
                ban: ban("dan", 200, Some(5_000)),
            },
        ])
        .await
        .unwrap();
    store
        .commit(vec![Mutation::Ban {
            key: key(t, "g"),
            ban: ban("cat", 300, Some(9_000)),
        }])
        .await
        .unwrap();
    let bans = store.bans(&key(t, "g")).await.unwrap();
    assert_eq!(
        bans,
        vec![ban("cat", 300, Some(9_000)), ban("dan", 200, Some(5_000))]
    );
    store
        .commit(vec![Mutation::Unban {
            key: key(t, "g"),
            user: user("dan"),
        }])
        .await
        .unwrap();
    assert_eq!(
        store.bans(&key(t, "g")).await.unwrap(),
        vec![ban("cat", 300, Some(9_000))]
    );
    assert!(store.bans(&key(t, "d")).await.unwrap().is_empty());

    // Blocks: the blocker's list, newest first; a direct conversation's
    // state names who blocks; an unblock undoes it; idempotent.
    let block = |u: &str, target: &str, at: Option<i64>| Mutation::SetBlock {
        tenant: tenant(t),
        user: user(u),
        target: user(target),
        at: at.map(Timestamp::from_unix_ms),
    };
    store
        .commit(vec![
            block("bob", "ann", Some(50)),
            block("bob", "eve", Some(60)),
        ])
        .await
        .unwrap();
    store
        .commit(vec![block("bob", "ann", Some(50))])
        .await
        .unwrap();
    let blocks = store.blocks(&tenant(t), &user("bob")).await.unwrap();
    let names: Vec<&str> = blocks.iter().map(|b| b.user_id.as_str()).collect();
    assert_eq!(names, ["eve", "ann"]);
    assert_eq!(blocks[1].blocked_at, Timestamp::from_unix_ms(50));
    assert!(
        store
            .blocks(&tenant(t), &user("ann"))
            .await
            .unwrap()
            .is_empty()
    );
    let states = store
        .sequencer_states(vec![key(t, "d"), key(t, "g")])
        .await
        .unwrap();
    let blocked_by: Vec<&str> = states[0]
        .as_ref()
        .unwrap()
        .blocked_by
        .iter()
        .map(|u| u.as_str())
        .collect();
    assert_eq!(blocked_by, ["bob"]);
    // Groups never say who blocks whom.
    assert!(states[1].as_ref().unwrap().blocked_by.is_empty());
    store
        .commit(vec![block("bob", "ann", None), block("bob", "ann", None)])
        .await
        .unwrap();
    let states = store.sequencer_states(vec![key(t, "d")]).await.unwrap();
    assert!(states[0].as_ref().unwrap().blocked_by.is_empty());
    let names: Vec<String> = store
        .blocks(&tenant(t), &user("bob"))
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.user_id.as_str().to_owned())
        .collect();
    assert_eq!(names, ["eve"]);
}
