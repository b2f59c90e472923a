//! Two users chat through two gateway processes (F5, F3, F20).

use switchboard_client::WsClient;
use switchboard_client::rest::HistoryParams;
use switchboard_protocol::{ClientFrame, ClientMsgId, Content, ConversationId, ConversationKind};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

#[tokio::test]
async fn two_users_on_two_gateways_chat() {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let mut bob = cluster.ws(1, "bob", "laptop").await;

    let (id1, seq1) = send_acked(&mut alice, &conv, "a-1", "hello bob").await;
    assert_eq!(seq1, 1);
    let got = expect_message(&mut bob).await;
    assert_eq!(got.message_id, id1);
    assert_eq!(got.seq, 1);
    assert_eq!(got.sender_id.as_str(), "alice");
    assert_eq!(got.sender_device.as_str(), "phone");
    assert_eq!(text_of(&got), "hello bob");

    let (id2, seq2) = send_acked(&mut bob, &conv, "b-1", "hi alice").await;
    assert_eq!(seq2, 2);
    let got = expect_message(&mut alice).await;
    assert_eq!((got.message_id, got.seq), (id2, 2));

    // Delivery marks reach the store (coalesced by the gateway).
    bob.send(&ClientFrame::AckDelivered {
        conversation_id: ConversationId::new(conv.clone()).unwrap(),
        seq: 1,
    })
    .await
    .unwrap();
    let rest = cluster.rest(1, "alice");
    let mut marks = (0, 0);
    for _ in 0..50 {
        let view = rest.conversation(&conv).await.unwrap();
        let switchboard_protocol::conversation::Members::Detailed(members) = view.members else {
            panic!("detailed members expected");
        };
        let bob_row = members
            .iter()
            .find(|m| m.user_id.as_str() == "bob")
            .unwrap();
        let alice_row = members
            .iter()
            .find(|m| m.user_id.as_str() == "alice")
            .unwrap();
        marks = (bob_row.delivered_seq, alice_row.read_seq);
        if marks.0 == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Bob's own send at seq 2 counts as delivered to him; alice read up to her send.
    assert_eq!(marks, (2, 1));

    // Both see the same history from either gateway.
    let page = cluster
        .rest(0, "bob")
        .history(&conv, HistoryParams::default())
        .await
        .unwrap();
    let seqs: Vec<u64> = page.messages.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, vec![2, 1]);
    assert_eq!(page.next_before_seq, None);
}

#[tokio::test]
async fn a_users_other_devices_receive_their_own_messages() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let mut phone = cluster.ws(0, "alice", "phone").await;
    let mut laptop = cluster.ws(0, "alice", "laptop").await;
    let (id, _) = send_acked(&mut phone, &conv, "m1", "from my phone").await;
    let copy = expect_message(&mut laptop).await;
    assert_eq!(copy.message_id, id);
}

#[tokio::test]
async fn a_conversation_list_shows_recent_activity_first() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let first = cluster
        .create(ConversationKind::Direct, "carol", &["dave"])
        .await;
    let second = cluster
        .create(ConversationKind::Group, "carol", &["erin"])
        .await;
    let mut carol = cluster.ws(0, "carol", "d").await;
    send_acked(&mut carol, &first, "x1", "bump").await;
    let list = cluster.rest(0, "dave").conversations().await.unwrap();
    assert_eq!(list.conversations.len(), 1);
    assert_eq!(list.conversations[0].unread_count, 1);
    let list = cluster.rest(0, "carol").conversations().await.unwrap();
    let ids: Vec<&str> = list
        .conversations
        .iter()
        .map(|c| c.conversation_id.as_str())
        .collect();
    assert_eq!(ids, vec![first.as_str(), second.as_str()]);
    assert_eq!(list.conversations[0].last_seq, 1);
    assert!(list.conversations[0].last_message.is_some());
    assert_eq!(list.conversations[0].preview.as_deref(), Some("bump"));

    // Ciphertext has a last message but no preview: the server cannot read it.
    carol
        .send(&ClientFrame::send_message(
            ClientMsgId::new("secret").unwrap(),
            ConversationId::new(second.clone()).unwrap(),
            Content::Ciphertext {
                algorithm: "olm.v1".into(),
                body: "QUJD".into(),
            },
        ))
        .await
        .unwrap();
    expect_ack(&mut carol, "secret").await;
    let list = cluster.rest(0, "erin").conversations().await.unwrap();
    assert!(list.conversations[0].last_message.is_some());
    assert_eq!(list.conversations[0].preview, None);
}

/// Sends `n` messages at once, then waits for all their acks.
async fn burst(ws: &mut WsClient, conv: &str, prefix: &str, n: u32) {
    for i in 0..n {
        ws.send(&send_frame(conv, &format!("{prefix}-{i}"), "burst"))
            .await
            .unwrap();
    }
    for i in 0..n {
        expect_ack(ws, &format!("{prefix}-{i}")).await;
    }
}

#[tokio::test]
async fn the_list_orders_and_counts_after_bursts_in_several_conversations() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let mut convs = Vec::new();
    for (kind, creator, others) in [
        (ConversationKind::Direct, "alice", ["bob"].as_slice()),
        (
            ConversationKind::Group,
            "carol",
            ["bob", "alice"].as_slice(),
        ),
        (ConversationKind::Group, "alice", ["bob"].as_slice()),
        (ConversationKind::Direct, "carol", ["bob"].as_slice()),
    ] {
        convs.push(cluster.create(kind, creator, others).await);
    }
    let mut alice = cluster.ws(0, "alice", "a").await;
    let mut carol = cluster.ws(0, "carol", "c").await;
    // Bursts, each sent without waiting for its acks: 5 in the first, 3 in
    // the second (2 of them from carol), none in the third, 2 in the
    // fourth, then one more in the first.
    burst(&mut alice, &convs[0], "b0", 5).await;
    burst(&mut alice, &convs[1], "b1", 1).await;
    burst(&mut carol, &convs[1], "b1", 2).await;
    burst(&mut carol, &convs[3], "b3", 2).await;
    send_acked(&mut alice, &convs[0], "last", "latest").await;

    let view = |list: &switchboard_protocol::conversation::ConversationList| {
        list.conversations
            .iter()
            .map(|c| {
                let at = convs.iter().position(|id| id == c.conversation_id.as_str());
                (at.unwrap(), c.last_seq, c.unread_count)
            })
            .collect::<Vec<_>>()
    };
    // Most recent activity first; the empty conversation last. Unread
    // counts everything after the reader's read mark...
    let bob = cluster.rest(0, "bob").conversations().await.unwrap();
    assert_eq!(view(&bob), vec![(0, 6, 6), (3, 2, 2), (1, 3, 3), (2, 0, 0)]);
    let previews: Vec<Option<&str>> = bob
        .conversations
        .iter()
        .map(|c| c.preview.as_deref())
        .collect();
    assert_eq!(
        previews,
        vec![Some("latest"), Some("burst"), Some("burst"), None]
    );
    // ...and sending reads what came before: alice's own messages are not
    // unread for her, carol's later ones are.
    let list = cluster.rest(0, "alice").conversations().await.unwrap();
    assert_eq!(view(&list), vec![(0, 6, 0), (1, 3, 2), (2, 0, 0)]);

    // Reading part of a conversation lowers its count and keeps the order.
    let mut phone = cluster.ws(0, "bob", "phone").await;
    phone
        .send(&ClientFrame::AckRead {
            conversation_id: ConversationId::new(convs[0].clone()).unwrap(),
            seq: 4,
            thread_id: None,
        })
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let bob = cluster.rest(0, "bob").conversations().await.unwrap();
        if view(&bob)[0] == (0, 6, 2) {
            assert_eq!(view(&bob), vec![(0, 6, 2), (3, 2, 2), (1, 3, 3), (2, 0, 0)]);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{:?}", view(&bob));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn users_with_the_same_device_id_are_still_different_devices() {
    // Tokens without a `device` claim all mean the device "default".
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "default").await;
    let mut bob = cluster.ws(0, "bob", "default").await;
    let (id, _) = send_acked(&mut alice, &conv, "same-device", "hi").await;
    let got = expect_message(&mut bob).await;
    assert_eq!(got.message_id, id);
}
