//! Checks of media references: who may read a blob, and when a blob is
//! referenced no more and collected.

use std::sync::Arc;

use switchboard_protocol::{Content, Message, Timestamp};

use crate::{Mutation, Store};

use super::support::{conv, key, seed_conversation, tenant, text_message, unique_tenant, user};

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
            custom: None,
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
                custom: None,
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

/// Link previews (v1.3): the cards whose links the text has are kept,
/// their images readable by the members from then on; an edit that
/// takes a link away takes its card and its image's reference, and a
/// deletion the rest; a card for a deleted message changes nothing.
pub async fn link_previews_follow_their_links_and_reference_their_images(store: &Arc<dyn Store>) {
    use switchboard_protocol::previews::{LinkPreview, PreviewImage};
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("previews");
    let tt = tenant(t);
    seed_conversation(store, t, "c", &["a", "b"], 1).await;
    let mut m = text_message("c", 2, "a", "phone", "links");
    m.content = Some(Content::Text {
        text: "see https://one.example and https://two.example".into(),
    });
    store
        .commit(vec![Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: 1,
            messages: vec![m],
            inbox: true,
        }])
        .await
        .unwrap();
    let card = |url: &str, blob: &str| LinkPreview {
        url: url.into(),
        title: Some(format!("{url} title")),
        description: None,
        site_name: None,
        image: Some(PreviewImage {
            blob_ref: blob.into(),
            mime: "image/png".into(),
            size: 4,
        }),
    };
    let at = Timestamp::from_unix_ms(1_780_000_002_000);
    let set = |previews: Vec<LinkPreview>| Mutation::SetPreviews {
        key: key(t, "c"),
        seq: 2,
        previews,
        at,
        inbox: true,
    };
    store
        .commit(vec![set(vec![
            card("https://one.example", "p1"),
            card("https://two.example", "p2"),
            card("https://not-in-the-text.example", "p3"),
        ])])
        .await
        .unwrap();
    let read = || async {
        let page = store
            .history(
                &tt,
                &conv("c"),
                &user("b"),
                crate::HistoryQuery {
                    before_seq: None,
                    after_seq: None,
                    limit: 10,
                    thread_root: None,
                },
            )
            .await
            .unwrap();
        page.into_iter().find(|m| m.seq == 2).unwrap()
    };
    let urls = |m: &switchboard_protocol::Message| -> Vec<String> {
        m.previews.iter().map(|p| p.url.clone()).collect()
    };
    assert_eq!(
        urls(&read().await),
        ["https://one.example", "https://two.example"]
    );
    for (blob, readable) in [("p1", true), ("p2", true), ("p3", false)] {
        assert_eq!(
            store.media_readable(&tt, blob, &user("b")).await.unwrap(),
            readable,
            "{blob}"
        );
    }

    store
        .commit(vec![Mutation::Edit {
            key: key(t, "c"),
            seq: 2,
            content: Content::Text {
                text: "only https://two.example now".into(),
            },
            editor: user("a"),
            at,
            inbox: true,
            custom: None,
        }])
        .await
        .unwrap();
    assert_eq!(urls(&read().await), ["https://two.example"]);
    assert!(!store.media_referenced(&tt, "p1").await.unwrap());
    assert!(store.media_referenced(&tt, "p2").await.unwrap());

    store
        .commit(vec![Mutation::Delete {
            key: key(t, "c"),
            seq: 2,
            at,
            inbox: true,
        }])
        .await
        .unwrap();
    assert!(read().await.previews.is_empty());
    assert!(!store.media_referenced(&tt, "p2").await.unwrap());
    store
        .commit(vec![set(vec![card("https://two.example", "p2")])])
        .await
        .unwrap();
    assert!(
        read().await.previews.is_empty(),
        "a deleted message takes no card"
    );
}
