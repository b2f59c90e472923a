//! Issue 26, case 7: one user put another into 185 groups with a 48 KiB
//! message each, and the victim's `GET /v1/conversations` answered 413 for
//! good on a gateway that reads the store over NATS (one answer is at most
//! 1 MiB there). The list now comes a page at a time, and a page of large
//! previews is read from the store service in parts.

use std::collections::HashSet;
use std::time::Duration;

use switchboard_protocol::conversation::ConversationList;
use switchboard_protocol::{
    ClientFrame, ClientMsgId, Content, ConversationId, ConversationKind, ConversationView,
};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

/// A 48 KiB message: ciphertext (text stops at 16 KiB), numbered.
fn large(i: usize) -> Content {
    let mut body = format!("{i:08}");
    body.push_str(&"QUFB".repeat((48 * 1024 - body.len()) / 4));
    Content::Ciphertext {
        algorithm: "test".into(),
        body,
    }
}

/// When a conversation last saw activity, as the list orders it.
fn activity(c: &ConversationView) -> switchboard_protocol::Timestamp {
    c.last_message
        .as_ref()
        .map_or(c.created_at, |m| m.created_at)
}

fn ids(list: &ConversationList) -> Vec<String> {
    list.conversations
        .iter()
        .map(|c| c.conversation_id.as_str().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case7_many_groups_with_large_last_messages_page_through_over_the_store_service() {
    // Every gateway of the harness reads the store over NATS (`--store
    // nats`). Pages of at most 180: a full one (181 asked of the store,
    // 8.9 MB) is past the test server's max_payload of 8 MiB.
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nconversations_max_limit = 180\n".into(),
        ..Default::default()
    })
    .await;
    cluster.wait_for_writers(8, Duration::from_secs(20)).await;
    // The victim once opened a conversation with the sender, so consent
    // to groups lets every one of them through: this is about the list.
    cluster
        .create(ConversationKind::Direct, "victim", &["mallory"])
        .await;
    let mut mallory = cluster.ws(0, "mallory", "m").await;
    let mut groups = Vec::new();
    for i in 0..185 {
        let conv = cluster
            .create(ConversationKind::Group, "mallory", &["victim"])
            .await;
        let frame = ClientFrame::send_message(
            ClientMsgId::new(format!("big-{i}")).unwrap(),
            ConversationId::new(&conv).unwrap(),
            large(i),
        );
        mallory.send(&frame).await.unwrap();
        expect_ack(&mut mallory, &format!("big-{i}")).await;
        groups.push(conv);
    }

    let victim = cluster.rest(0, "victim");
    // No limit: the default page of 50, newest first, and a cursor.
    let first = victim.conversations().await.unwrap();
    assert_eq!(first.conversations.len(), 50);
    assert_eq!(first.conversations[0].conversation_id.as_str(), groups[184]);
    assert!(first.next_cursor.is_some());

    // Pages of the largest size: more previews than one NATS message
    // holds, which the gateway reads from the store service in parts.
    let mut seen: Vec<ConversationView> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut sizes = Vec::new();
    loop {
        let page = victim
            .conversation_page(Some(500), cursor.as_deref())
            .await
            .unwrap_or_else(|e| panic!("page {}: {e}\n{}", sizes.len(), cluster.logs()));
        sizes.push(page.conversations.len());
        seen.extend(page.conversations);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(sizes, [180, 6], "a limit past the maximum is capped");
    assert_eq!(seen.len(), 186);
    // The maximum, and one past it.
    for (asked, got) in [(180, 180), (181, 180)] {
        let page = victim.conversation_page(Some(asked), None).await.unwrap();
        assert_eq!(page.conversations.len(), got, "limit {asked}");
    }
    let distinct: HashSet<&str> = seen.iter().map(|c| c.conversation_id.as_str()).collect();
    assert_eq!(distinct.len(), 186);
    assert!(seen.windows(2).all(|w| activity(&w[0]) >= activity(&w[1])));
    for (i, g) in groups.iter().enumerate() {
        let view = seen
            .iter()
            .find(|c| c.conversation_id.as_str() == g)
            .unwrap();
        let last = view.last_message.as_ref().unwrap();
        assert_eq!(last.content.as_ref(), Some(&large(i)));
    }

    // Small pages follow each other without a gap or a repeat.
    let mut walked = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = victim
            .conversation_page(Some(37), cursor.as_deref())
            .await
            .unwrap();
        walked.extend(ids(&page));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let all: Vec<&str> = seen.iter().map(|c| c.conversation_id.as_str()).collect();
    assert_eq!(walked, all);

    // A conversation moving while the victim pages: listed once, first.
    let page = victim.conversation_page(Some(10), None).await.unwrap();
    let oldest = groups[0].clone();
    let frame = send_frame(&oldest, "bump", "moved up");
    mallory.send(&frame).await.unwrap();
    expect_ack(&mut mallory, "bump").await;
    let mut rest = Vec::new();
    let mut cursor = page.next_cursor.clone();
    while let Some(c) = cursor {
        let next = victim.conversation_page(Some(100), Some(&c)).await.unwrap();
        rest.extend(ids(&next));
        cursor = next.next_cursor;
    }
    assert!(!rest.contains(&oldest), "it moved above the cursor");
    assert_eq!(rest.len() + ids(&page).len(), 185);
    let top = victim.conversation_page(Some(1), None).await.unwrap();
    assert_eq!(ids(&top), [oldest]);

    // A cursor this server never gave.
    let e = victim
        .conversation_page(None, Some("bm90IGEgY3Vyc29y"))
        .await
        .unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(400), Some("invalid_request")));
}
