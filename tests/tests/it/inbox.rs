//! F6: every device of a user has its own inbox, emptied by that device's
//! acks alone, and entries a device never fetches expire.

use std::time::Duration;

use switchboard_client::WsClient;
use switchboard_client::rest::HistoryParams;
use switchboard_protocol::{ClientFrame, ConversationId, ConversationKind};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

async fn ack_delivered(ws: &mut WsClient, conversation: &str, seq: u64) {
    ws.send(&ClientFrame::AckDelivered {
        conversation_id: ConversationId::new(conversation).unwrap(),
        seq,
    })
    .await
    .unwrap();
}

/// Pulls the device's backlog until it is `expected` (acks are written once
/// per receipt window, and expiry once per sweep).
async fn backlog_becomes(ws: &mut WsClient, expected: &[u64], within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let (ms, _, _) = pull(ws, None, None, None).await;
        let seqs: Vec<u64> = ms.iter().map(|m| m.seq).collect();
        if seqs == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "backlog is {seqs:?}, expected {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn three_devices_each_receive_and_ack_on_their_own() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let mut phone = cluster.ws(0, "bob", "phone").await;
    let mut laptop = cluster.ws(0, "bob", "laptop").await;
    let mut tablet = cluster.ws(0, "bob", "tablet").await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    for i in 1..=3 {
        send_acked(&mut alice, &conv, &format!("m{i}"), &format!("hi {i}")).await;
    }
    // All three receive everything live.
    for ws in [&mut phone, &mut laptop, &mut tablet] {
        let seqs = [
            expect_message(ws).await.seq,
            expect_message(ws).await.seq,
            expect_message(ws).await.seq,
        ];
        assert_eq!(seqs, [1, 2, 3]);
    }
    // Each acks on its own: the phone all, the laptop the first, the
    // tablet nothing.
    ack_delivered(&mut phone, &conv, 3).await;
    ack_delivered(&mut laptop, &conv, 1).await;
    let within = Duration::from_secs(10);
    backlog_becomes(&mut phone, &[], within).await;
    backlog_becomes(&mut laptop, &[2, 3], within).await;
    backlog_becomes(&mut tablet, &[1, 2, 3], within).await;

    // After a reconnect the backlog is still per device.
    drop((phone, laptop, tablet));
    let mut laptop = cluster.ws(0, "bob", "laptop").await;
    let mut tablet = cluster.ws(0, "bob", "tablet").await;
    backlog_becomes(&mut laptop, &[2, 3], within).await;
    backlog_becomes(&mut tablet, &[1, 2, 3], within).await;

    // Once every device has acked, every inbox is empty.
    ack_delivered(&mut laptop, &conv, 3).await;
    ack_delivered(&mut tablet, &conv, 3).await;
    backlog_becomes(&mut laptop, &[], within).await;
    backlog_becomes(&mut tablet, &[], within).await;
    let mut phone = cluster.ws(0, "bob", "phone").await;
    backlog_becomes(&mut phone, &[], within).await;
}

#[tokio::test]
async fn an_abandoned_devices_inbox_expires() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "inbox_ttl_secs = 5\ninbox_sweep_secs = 1\n".into(),
        ..ClusterSpec::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    // The old tablet is known, then put away.
    cluster.ws(0, "bob", "old-tablet").await.close().await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    send_acked(&mut alice, &conv, "m1", "one").await;
    send_acked(&mut alice, &conv, "m2", "two").await;

    let mut tablet = cluster.ws(0, "bob", "old-tablet").await;
    let (waiting, _, _) = pull(&mut tablet, None, None, None).await;
    assert_eq!(waiting.len(), 2, "the entries exist before they expire");
    tablet.close().await;

    // Past the lifetime the sweep removes them...
    let mut tablet = cluster.ws(0, "bob", "old-tablet").await;
    backlog_becomes(&mut tablet, &[], Duration::from_secs(30)).await;
    // ...and the device catches up from the conversation list and history:
    // nothing is lost, and the marks did not move.
    let bob = cluster.rest(0, "bob");
    let list = bob.conversations().await.unwrap();
    assert_eq!(list.conversations[0].last_seq, 2);
    assert_eq!(list.conversations[0].unread_count, 2);
    let page = bob.history(&conv, HistoryParams::default()).await.unwrap();
    assert_eq!(page.messages.len(), 2);
}
