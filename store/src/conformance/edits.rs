//! Checks of edits and deletes: versions, the inbox update an edit brings,
//! deletes that leave no content, and a send with its edits in one commit.

use std::sync::Arc;

use switchboard_protocol::{Content, MessageId, Timestamp};

use crate::{HistoryQuery, MessageKey, Mutation, Store, StoreError};

use super::support::{
    conv, device, everything, key, seed_conversation, tenant, text_message, unique_tenant, user,
};

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
        custom: None,
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
                    thread_root: None,
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
