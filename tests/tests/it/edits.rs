//! F11 / F12: edits are new versions, deletes remove all content, every
//! device and the history agree, and an edit racing a delete ends the same
//! everywhere.

use std::time::Duration;

use switchboard_client::WsClient;
use switchboard_client::rest::HistoryParams;
use switchboard_protocol::{Content, ConversationKind, Message, MessageId};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

async fn stored(cluster: &Cluster, conv: &str, seq: u64) -> Message {
    let page = cluster
        .rest(0, "bob")
        .history(
            conv,
            HistoryParams {
                before_seq: Some(seq + 1),
                after_seq: Some(seq - 1),
                limit: Some(1),
            },
        )
        .await
        .unwrap();
    page.messages.into_iter().next().unwrap()
}

async fn versions(cluster: &Cluster, conv: &str, id: MessageId) -> serde_json::Value {
    let rest = cluster.rest(0, "bob");
    rest.raw()
        .get(format!(
            "{}/v1/conversations/{conv}/messages/{id}/versions",
            rest.base()
        ))
        .bearer_auth(rest.token())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn every_device_and_the_history_see_edits_and_deletes() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    cluster.ws(0, "bob", "tablet").await.close().await; // known, offline
    let mut alice = cluster.ws(0, "alice", "a").await;
    let mut phone = cluster.ws(0, "bob", "phone").await;
    let mut laptop = cluster.ws(0, "bob", "laptop").await;
    let (id, seq) = send_acked(&mut alice, &conv, "e1", "helo").await;
    expect_message(&mut phone).await;
    expect_message(&mut laptop).await;

    alice.send(&edit_frame(&conv, id, "hello")).await.unwrap();
    for ws in [&mut alice, &mut phone, &mut laptop] {
        let m = expect_update(ws).await;
        assert_eq!((m.message_id, m.seq), (id, seq));
        assert_eq!(
            m.content,
            Some(Content::Text {
                text: "hello".into()
            })
        );
        assert!(m.edited_at.is_some());
    }
    let m = stored(&cluster, &conv, seq).await;
    assert_eq!(
        m.content,
        Some(Content::Text {
            text: "hello".into()
        })
    );
    let v = versions(&cluster, &conv, id).await;
    assert_eq!(v["versions"].as_array().unwrap().len(), 2);
    assert_eq!(v["versions"][0]["content"]["text"], "helo");
    assert_eq!(v["versions"][1]["content"]["text"], "hello");

    // The offline device finds the edited message in its backlog.
    let mut tablet = cluster.ws(0, "bob", "tablet").await;
    let (backlog, _, _) = pull(&mut tablet, None, None, None).await;
    let copy = backlog.iter().find(|m| m.message_id == id).unwrap();
    assert_eq!(
        copy.content,
        Some(Content::Text {
            text: "hello".into()
        })
    );

    // Only the sender edits.
    phone
        .send(&edit_frame(&conv, id, "bob was here"))
        .await
        .unwrap();
    let (code, request, _, _) = expect_error(&mut phone).await;
    assert_eq!(
        (code.as_str(), request.as_deref()),
        ("forbidden", Some("edit_message"))
    );

    // Delete: no content anywhere.
    alice.send(&delete_frame(&conv, id)).await.unwrap();
    for ws in [&mut alice, &mut phone, &mut laptop, &mut tablet] {
        let m = expect_update(ws).await;
        assert_eq!(m.content, None);
        assert!(m.deleted_at.is_some());
    }
    let m = stored(&cluster, &conv, seq).await;
    assert_eq!((m.content, m.deleted_at.is_some()), (None, true));
    assert!(
        versions(&cluster, &conv, id).await["versions"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let list = cluster.rest(0, "bob").conversations().await.unwrap();
    assert_eq!(
        list.conversations[0].last_message.as_ref().unwrap().content,
        None
    );
    assert_eq!(
        list.conversations[0].preview, None,
        "no preview of a deleted message"
    );
    let (backlog, _, _) = pull(&mut tablet, Some(&conv), Some(0), None).await;
    assert!(backlog.iter().all(|m| m.content.is_none()));
}

#[tokio::test]
async fn an_edit_racing_a_delete_ends_the_same_everywhere() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut phone = cluster.ws(0, "alice", "phone").await;
    let mut laptop = cluster.ws(0, "alice", "laptop").await;
    let mut bob = cluster.ws(0, "bob", "b").await;
    for round in 0..5 {
        let (id, seq) = send_acked(&mut phone, &conv, &format!("race{round}"), "v1").await;
        expect_message(&mut bob).await;
        expect_message(&mut laptop).await;
        // Both at once, from two devices.
        let (e, d) = (edit_frame(&conv, id, "v2"), delete_frame(&conv, id));
        let (a, b) = tokio::join!(phone.send(&e), laptop.send(&d));
        a.unwrap();
        b.unwrap();
        // Bob sees one or two updates; the last is the deletion.
        let mut last = expect_update(&mut bob).await;
        if last.deleted_at.is_none() {
            last = expect_update(&mut bob).await;
        }
        assert_eq!((last.message_id, last.content.clone()), (id, None));
        assert_eq!(stored(&cluster, &conv, seq).await.content, None);
        // Drain what the senders got (an update or a refusal each).
        let drain = async |ws: &mut WsClient| {
            while ws
                .next_frame_within(Duration::from_millis(300))
                .await
                .is_ok()
            {}
        };
        drain(&mut phone).await;
        drain(&mut laptop).await;
        drain(&mut bob).await;
    }
}

#[tokio::test]
async fn edits_close_after_the_window() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "edit_window_secs = 1\n".into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    let (id, _) = send_acked(&mut alice, &conv, "w1", "quick").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    alice
        .send(&edit_frame(&conv, id, "too slow"))
        .await
        .unwrap();
    let (code, _, _, message) = expect_error(&mut alice).await;
    assert_eq!(code.as_str(), "forbidden", "{message}");
    // Deleting is still allowed.
    alice.send(&delete_frame(&conv, id)).await.unwrap();
    assert!(expect_update(&mut alice).await.deleted_at.is_some());
}
