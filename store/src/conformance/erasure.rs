//! Checks of erasure (v1.2): a user's messages become tombstones under a
//! pseudonym, others' rows name the pseudonym, their reactions and rows
//! go, and the conversations they ever joined (left ones included) are
//! found, and listed no more once each is done.

use std::sync::Arc;

use switchboard_protocol::{ClientMsgId, ConversationKind, ReactAction, Timestamp, UserId};

use super::support::{conv, create, device, key, tenant, text_message, unique_tenant, user};
use crate::{HistoryQuery, Mutation, PinRow, SentKey, Store};

pub async fn erasure_leaves_tombstones_and_nothing_of_the_user(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("erase");
    let (ann, bob) = (user("ann"), user("bob"));
    let pseudonym = UserId::new("erased-00000000000000aa").unwrap();
    store
        .commit(vec![
            create(t, "g", ConversationKind::Group, &["ann", "bob"], 10),
            create(t, "left", ConversationKind::Group, &["ann", "bob"], 10),
        ])
        .await
        .unwrap();
    store
        .register_device(&tenant(t), &ann, &device("p"))
        .await
        .unwrap();
    let mut mention = text_message("g", 2, "bob", "b", "b1");
    mention.mentions = vec![ann.clone()];
    store
        .commit(vec![
            Mutation::Append {
                key: key(t, "g"),
                expected_last_seq: 0,
                messages: vec![text_message("g", 1, "ann", "p", "a1"), mention],
                inbox: true,
            },
            Mutation::Append {
                key: key(t, "left"),
                expected_last_seq: 0,
                messages: vec![text_message("left", 1, "ann", "p", "a2")],
                inbox: true,
            },
            Mutation::React {
                key: key(t, "g"),
                seq: 2,
                user: ann.clone(),
                emoji: "👍".into(),
                action: ReactAction::Add,
                at: Timestamp::from_unix_ms(20),
                inbox: true,
            },
            Mutation::Pin {
                key: key(t, "g"),
                pin: PinRow {
                    message_id: text_message("g", 2, "bob", "b", "b1").message_id,
                    by: ann.clone(),
                    at: Timestamp::from_unix_ms(30),
                },
            },
            Mutation::SetBlock {
                tenant: tenant(t),
                user: bob.clone(),
                target: ann.clone(),
                at: Some(Timestamp::from_unix_ms(40)),
            },
            Mutation::SetBlock {
                tenant: tenant(t),
                user: ann.clone(),
                target: bob.clone(),
                at: Some(Timestamp::from_unix_ms(40)),
            },
        ])
        .await
        .unwrap();
    store
        .commit(vec![Mutation::RemoveMembers {
            key: key(t, "left"),
            users: vec![ann.clone()],
        }])
        .await
        .unwrap();

    // Both conversations are found, the one she left included.
    let joined = store.joined(&tenant(t), &ann, None, 10).await.unwrap();
    assert_eq!(joined, vec![conv("g"), conv("left")]);
    assert_eq!(
        store
            .joined(&tenant(t), &ann, Some(conv("g")), 10)
            .await
            .unwrap(),
        vec![conv("left")]
    );
    // The scan finds her message, the one naming her and the one she
    // reacted to, in steps.
    let first = store.naming(&key(t, "g"), &ann, 0, 1).await.unwrap();
    assert_eq!((first.seqs.as_slice(), first.done), (&[1][..], false));
    let rest = store
        .naming(&key(t, "g"), &ann, first.last_seen, 10)
        .await
        .unwrap();
    assert_eq!((rest.seqs.as_slice(), rest.done), (&[2][..], true));

    // Her own index lists her messages, in the conversation she left too.
    for c in ["g", "left"] {
        let mine = store.sent_by(&key(t, c), &ann, None, 10).await.unwrap();
        assert_eq!(mine.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![1]);
    }

    let at = Timestamp::from_unix_ms(50);
    for c in ["g", "left"] {
        store
            .commit(vec![
                Mutation::EraseMessages {
                    key: key(t, c),
                    user: ann.clone(),
                    pseudonym: pseudonym.clone(),
                    seqs: vec![1, 2],
                    at,
                },
                Mutation::EraseMember {
                    key: key(t, c),
                    user: ann.clone(),
                    pseudonym: pseudonym.clone(),
                },
            ])
            .await
            .unwrap();
    }
    assert!(
        store
            .joined(&tenant(t), &ann, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    store
        .commit(vec![Mutation::EraseUser {
            tenant: tenant(t),
            user: ann.clone(),
        }])
        .await
        .unwrap();

    let query = HistoryQuery {
        before_seq: None,
        after_seq: None,
        limit: 10,
        thread_root: None,
    };
    let history = store
        .history(&tenant(t), &conv("g"), &bob, query)
        .await
        .unwrap();
    let (own, named) = (&history[1], &history[0]);
    assert_eq!((own.seq, own.sender_id.clone()), (1, pseudonym.clone()));
    assert!(own.content.is_none() && own.deleted_at == Some(at));
    assert_eq!(named.mentions, vec![pseudonym.clone()]);
    assert!(named.reactions.is_empty(), "her reaction went");
    assert!(named.content.is_some());
    let left = store
        .history(&tenant(t), &conv("left"), &bob, query)
        .await
        .unwrap();
    assert_eq!(left[0].sender_id, pseudonym);
    assert!(!serde_json::to_string(&history).unwrap().contains("ann"));
    assert_eq!(store.pins(&key(t, "g")).await.unwrap()[0].by, pseudonym);
    // Her idempotency key, membership and blocks both ways are gone.
    let sent = store
        .find_sent(vec![SentKey {
            tenant: tenant(t),
            conversation_id: conv("g"),
            sender: ann.clone(),
            client_msg_id: ClientMsgId::new("a1").unwrap(),
        }])
        .await
        .unwrap();
    assert_eq!(sent, vec![None]);
    for c in ["g", "left"] {
        let mine = store.sent_by(&key(t, c), &ann, None, 10).await.unwrap();
        assert!(mine.is_empty(), "{c}: her index went: {mine:?}");
    }
    assert!(
        store
            .memberships(&tenant(t), &ann)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.blocks(&tenant(t), &ann).await.unwrap().is_empty());
    assert!(store.blocks(&tenant(t), &bob).await.unwrap().is_empty());
    let (_, members) = store.members(&tenant(t), &conv("g"), &bob).await.unwrap();
    assert_eq!(members, vec![bob.clone()]);
    let detail = store
        .conversation(&tenant(t), &conv("g"), &bob)
        .await
        .unwrap();
    assert_eq!(detail.record.created_by, pseudonym, "she created it");

    // Again: nothing changes, nothing fails.
    store
        .commit(vec![
            Mutation::EraseMessages {
                key: key(t, "g"),
                user: ann.clone(),
                pseudonym: pseudonym.clone(),
                seqs: vec![1, 2],
                at: Timestamp::from_unix_ms(99),
            },
            Mutation::EraseMember {
                key: key(t, "g"),
                user: ann.clone(),
                pseudonym: pseudonym.clone(),
            },
            Mutation::EraseUser {
                tenant: tenant(t),
                user: ann.clone(),
            },
        ])
        .await
        .unwrap();
    let again = store
        .history(&tenant(t), &conv("g"), &bob, query)
        .await
        .unwrap();
    assert_eq!(again, history);
}
