//! Checks of reactions and pins (v1.1) and poll votes (v1.3): idempotent,
//! within their limits, gone with a deleted message, and readable as the
//! reader's own.

use std::sync::Arc;

use switchboard_protocol::conversation::MAX_PINS;
use switchboard_protocol::reaction::{MAX_EMOJI_PER_MESSAGE, MAX_REACTIONS_PER_USER};
use switchboard_protocol::{MessageId, ReactAction, Timestamp};

use super::support::{conv, key, seed_conversation, tenant, unique_tenant, user};
use crate::{ConversationKey, HistoryQuery, Mutation, PinRow, Store, StoreError};

fn react(t: &str, seq: u64, who: &str, emoji: &str, action: ReactAction) -> Mutation {
    Mutation::React {
        key: key(t, "c"),
        seq,
        user: user(who),
        emoji: emoji.to_owned(),
        action,
        at: Timestamp::from_unix_ms(1_780_000_001_000),
        inbox: true,
    }
}

/// Message `seq` of `c` as `reader` reads it, with their own reactions.
async fn read_as(
    store: &dyn Store,
    t: &str,
    seq: u64,
    reader: &str,
) -> switchboard_protocol::Message {
    let query = HistoryQuery {
        before_seq: Some(seq + 1),
        after_seq: Some(seq - 1),
        limit: 1,
        thread_root: None,
    };
    let mut page = store
        .history(&tenant(t), &conv("c"), &user(reader), query)
        .await
        .unwrap();
    crate::mine::mark_mine(store, &tenant(t), &user(reader), &mut page)
        .await
        .unwrap();
    page.remove(0)
}

fn counts(m: &switchboard_protocol::Message) -> Vec<(String, u64, bool)> {
    m.reactions
        .iter()
        .map(|r| (r.emoji.clone(), r.count, r.me))
        .collect()
}

pub async fn reactions_are_idempotent_bounded_and_the_readers_own(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("react");
    seed_conversation(store, t, "c", &["alice", "bob", "carol"], 3).await;
    let k: ConversationKey = key(t, "c");
    for m in [
        react(t, 2, "alice", "👍", ReactAction::Add),
        react(t, 2, "bob", "👍", ReactAction::Add),
        react(t, 2, "bob", "🎉", ReactAction::Add),
        // A repeat changes nothing.
        react(t, 2, "bob", "🎉", ReactAction::Add),
    ] {
        store.commit(vec![m]).await.unwrap();
    }
    assert_eq!(
        counts(&read_as(store, t, 2, "alice").await),
        [("👍".into(), 2, true), ("🎉".into(), 1, false)]
    );
    assert_eq!(
        counts(&read_as(store, t, 2, "bob").await),
        [("👍".into(), 2, true), ("🎉".into(), 1, true)]
    );
    assert_eq!(
        store
            .user_reactions(&k, &user("bob"), vec![1, 2])
            .await
            .unwrap(),
        [Vec::<String>::new(), vec!["🎉".to_owned(), "👍".to_owned()]]
    );
    // Removing twice is removing once; the last one takes the emoji away.
    for _ in 0..2 {
        store
            .commit(vec![react(t, 2, "bob", "🎉", ReactAction::Remove)])
            .await
            .unwrap();
    }
    assert_eq!(
        counts(&read_as(store, t, 2, "bob").await),
        [("👍".into(), 2, true)]
    );
    // A non-member, and a message that is not there.
    assert_eq!(
        store
            .commit(vec![react(t, 2, "mallory", "👍", ReactAction::Add)])
            .await,
        Err(StoreError::NotAMember)
    );
    assert_eq!(
        store
            .commit(vec![react(t, 9, "bob", "👍", ReactAction::Add)])
            .await,
        Err(StoreError::NotFound)
    );
    // One user: at most MAX_REACTIONS_PER_USER emoji on a message.
    let mine: Vec<Mutation> = (0..MAX_REACTIONS_PER_USER)
        .map(|i| react(t, 3, "alice", &format!(":e{i}:"), ReactAction::Add))
        .collect();
    store.commit(mine).await.unwrap();
    let over = store
        .commit(vec![react(t, 3, "alice", ":one-more:", ReactAction::Add)])
        .await;
    assert!(matches!(over, Err(StoreError::Conflict(_))), "{over:?}");
    // One message: at most MAX_EMOJI_PER_MESSAGE different emoji.
    let others: Vec<Mutation> = (MAX_REACTIONS_PER_USER..MAX_EMOJI_PER_MESSAGE)
        .map(|i| {
            let who = if i < 2 * MAX_REACTIONS_PER_USER {
                "bob"
            } else {
                "carol"
            };
            react(t, 3, who, &format!(":e{i}:"), ReactAction::Add)
        })
        .collect();
    store.commit(others).await.unwrap();
    assert_eq!(
        read_as(store, t, 3, "bob").await.reactions.len(),
        MAX_EMOJI_PER_MESSAGE
    );
    let over = store
        .commit(vec![react(
            t,
            3,
            "carol",
            ":fifty-first:",
            ReactAction::Add,
        )])
        .await;
    assert!(matches!(over, Err(StoreError::Conflict(_))), "{over:?}");
    // An emoji already there is not a new one.
    store
        .commit(vec![react(t, 3, "carol", ":e0:", ReactAction::Add)])
        .await
        .unwrap();
    // A deleted message keeps no reaction, and takes none.
    store
        .commit(vec![Mutation::Delete {
            key: k.clone(),
            seq: 2,
            at: Timestamp::from_unix_ms(1_780_000_002_000),
            inbox: true,
        }])
        .await
        .unwrap();
    assert!(read_as(store, t, 2, "bob").await.reactions.is_empty());
    assert_eq!(
        store
            .user_reactions(&k, &user("bob"), vec![2])
            .await
            .unwrap(),
        [Vec::<String>::new()]
    );
    let refused = store
        .commit(vec![react(t, 2, "bob", "👍", ReactAction::Add)])
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
}

pub async fn pins_are_bounded_listed_newest_first_and_unpinned(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("pins");
    seed_conversation(store, t, "c", &["alice", "bob"], 1).await;
    let pin = |id: u64, at: i64| Mutation::Pin {
        key: key(t, "c"),
        pin: PinRow {
            message_id: MessageId::from_u64(id),
            by: user("alice"),
            at: Timestamp::from_unix_ms(at),
        },
    };
    let ids =
        |pins: Vec<PinRow>| -> Vec<u64> { pins.iter().map(|p| p.message_id.as_u64()).collect() };
    store.commit(vec![pin(1, 10), pin(2, 20)]).await.unwrap();
    // Pinned again: it stays as first pinned.
    store.commit(vec![pin(1, 30)]).await.unwrap();
    let pins = store.pins(&key(t, "c")).await.unwrap();
    assert_eq!(ids(pins.clone()), [2, 1]);
    assert_eq!(pins[1].at, Timestamp::from_unix_ms(10));
    // Up to MAX_PINS, then refused with nothing written.
    let more: Vec<Mutation> = (3..=MAX_PINS as u64)
        .map(|i| pin(i, 100 + i as i64))
        .collect();
    store.commit(more).await.unwrap();
    let over = store.commit(vec![pin(999, 1_000)]).await;
    assert!(matches!(over, Err(StoreError::Conflict(_))), "{over:?}");
    // Unpinned (twice is once): room again.
    for _ in 0..2 {
        store
            .commit(vec![Mutation::Unpin {
                key: key(t, "c"),
                message_id: MessageId::from_u64(2),
            }])
            .await
            .unwrap();
    }
    store.commit(vec![pin(999, 1_000)]).await.unwrap();
    let pins = ids(store.pins(&key(t, "c")).await.unwrap());
    assert_eq!(pins.len(), MAX_PINS);
    assert_eq!(pins[0], 999);
    assert!(!pins.contains(&2));
}

fn poll_message(c: &str, seq: u64, sender: &str, multiple: bool) -> switchboard_protocol::Message {
    use switchboard_protocol::Content;
    use switchboard_protocol::poll::{PollContent, PollOption};
    let mut m = super::support::text_message(c, seq, sender, "phone", &format!("poll-{seq}"));
    let poll = PollContent {
        question: "Lunch?".into(),
        options: ["a", "b", "c"]
            .iter()
            .map(|id| PollOption {
                id: (*id).into(),
                text: format!("option {id}"),
            })
            .collect(),
        multiple,
        anonymous: false,
        closes_at: None,
    };
    m.poll_results = Some(poll.fresh_results());
    m.content = Some(Content::Poll(poll));
    m
}

fn vote(t: &str, seq: u64, who: &str, options: &[&str]) -> Mutation {
    Mutation::Vote {
        key: key(t, "c"),
        seq,
        user: user(who),
        options: options.iter().map(|o| (*o).to_owned()).collect(),
        at: Timestamp::from_unix_ms(1_780_000_001_000),
        inbox: true,
    }
}

fn results(m: &switchboard_protocol::Message) -> (Vec<(String, u64)>, Vec<String>, bool) {
    let r = m.poll_results.as_ref().expect("a poll has results");
    (
        r.counts.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        r.me.clone(),
        r.closed,
    )
}

/// Polls (v1.3): one vote per member, replaced by the next, retracted
/// by an empty one; the counts, the latest voters and the reader's own
/// `me`; a closed poll takes no vote; a vote leaves the voter's
/// reactions and their limit alone, and goes with the voter's erasure.
pub async fn votes_are_one_per_member_counted_once_and_the_readers_own(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("poll");
    seed_conversation(store, t, "c", &["alice", "bob", "carol"], 1).await;
    store
        .commit(vec![Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: 1,
            messages: vec![
                poll_message("c", 2, "alice", false),
                poll_message("c", 3, "alice", true),
            ],
            inbox: true,
        }])
        .await
        .unwrap();
    for m in [
        vote(t, 2, "alice", &["a"]),
        vote(t, 2, "bob", &["a"]),
        // A repeat changes nothing; a new choice replaces the old.
        vote(t, 2, "bob", &["a"]),
        vote(t, 2, "carol", &["b"]),
        vote(t, 2, "carol", &["c"]),
        react(t, 2, "bob", "👍", ReactAction::Add),
    ] {
        store.commit(vec![m]).await.unwrap();
    }
    let seen = read_as(store, t, 2, "carol").await;
    assert_eq!(
        results(&seen),
        (
            vec![("a".into(), 2), ("b".into(), 0), ("c".into(), 1)],
            vec!["c".into()],
            false
        )
    );
    let voters = seen.poll_results.as_ref().unwrap().voters.clone().unwrap();
    assert_eq!(voters["a"], vec![user("bob"), user("alice")]);
    assert!(voters["b"].is_empty());
    // Bob's vote is not one of his emoji.
    assert_eq!(
        counts(&read_as(store, t, 2, "bob").await),
        [("👍".into(), 1, true)]
    );
    assert_eq!(
        results(&read_as(store, t, 2, "bob").await).1,
        vec!["a".to_string()]
    );

    // More than one option only where the poll allows it, and only its own.
    for refused in [vote(t, 2, "bob", &["a", "b"]), vote(t, 2, "bob", &["x"])] {
        assert!(matches!(
            store.commit(vec![refused]).await,
            Err(StoreError::Conflict(_))
        ));
    }
    store
        .commit(vec![vote(t, 3, "bob", &["c", "a"])])
        .await
        .unwrap();
    assert_eq!(
        results(&read_as(store, t, 3, "bob").await).1,
        vec!["a".to_string(), "c".to_string()]
    );
    // An empty vote retracts.
    store.commit(vec![vote(t, 3, "bob", &[])]).await.unwrap();
    let (counts3, me, _) = results(&read_as(store, t, 3, "bob").await);
    assert!(me.is_empty());
    assert!(counts3.iter().all(|(_, n)| *n == 0));

    // Not a member's; not a message that is no poll.
    assert!(matches!(
        store.commit(vec![vote(t, 2, "dave", &["a"])]).await,
        Err(StoreError::NotAMember)
    ));
    assert!(matches!(
        store.commit(vec![vote(t, 1, "bob", &["a"])]).await,
        Err(StoreError::Conflict(_))
    ));

    // Closed: no more votes; closing again changes nothing.
    let close = || Mutation::ClosePoll {
        key: key(t, "c"),
        seq: 2,
        at: Timestamp::from_unix_ms(1_780_000_002_000),
        inbox: true,
    };
    store.commit(vec![close()]).await.unwrap();
    store.commit(vec![close()]).await.unwrap();
    assert!(results(&read_as(store, t, 2, "alice").await).2);
    assert!(matches!(
        store.commit(vec![vote(t, 2, "alice", &["b"])]).await,
        Err(StoreError::Conflict(_))
    ));

    // Carol's erasure takes her vote and what it counted.
    let pseudonym = switchboard_protocol::UserId::new("erased-7").unwrap();
    store
        .commit(vec![Mutation::EraseMessages {
            key: key(t, "c"),
            user: user("carol"),
            pseudonym,
            seqs: vec![2],
            at: Timestamp::from_unix_ms(1_780_000_003_000),
        }])
        .await
        .unwrap();
    let seen = read_as(store, t, 2, "alice").await;
    assert_eq!(
        results(&seen).0,
        vec![("a".into(), 2), ("b".into(), 0), ("c".into(), 0)]
    );
    assert!(seen.poll_results.unwrap().voters.unwrap()["c"].is_empty());

    // A deleted poll shows no results.
    store
        .commit(vec![Mutation::Delete {
            key: key(t, "c"),
            seq: 3,
            at: Timestamp::from_unix_ms(1_780_000_004_000),
            inbox: true,
        }])
        .await
        .unwrap();
    assert_eq!(read_as(store, t, 3, "bob").await.poll_results, None);
}
