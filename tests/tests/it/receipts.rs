//! F7: delivered and read marks, coalesced per receipt window, stored, and
//! broadcast as `receipt` frames to the other members; not broadcast where
//! the conversation fans out on read.

use std::time::Duration;

use switchboard_client::WsClient;
use switchboard_protocol::conversation::Members;
use switchboard_protocol::{
    ClientFrame, ConversationId, ConversationKind, ReceiptKind, ServerFrame,
};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

fn ack(kind: ReceiptKind, conv: &str, seq: u64) -> ClientFrame {
    let conversation_id = ConversationId::new(conv).unwrap();
    match kind {
        ReceiptKind::Delivered => ClientFrame::AckDelivered {
            conversation_id,
            seq,
        },
        ReceiptKind::Read => ClientFrame::AckRead {
            conversation_id,
            seq,
            thread_id: None,
        },
    }
}

/// The next receipt: (user, kind, seq).
async fn expect_receipt(ws: &mut WsClient) -> (String, ReceiptKind, u64) {
    expect(ws, "a receipt", |f| match f {
        ServerFrame::Receipt {
            user_id, kind, seq, ..
        } => Some((user_id.as_str().to_owned(), kind, seq)),
        _ => None,
    })
    .await
}

/// No receipt arrives within `wait`.
async fn expect_no_receipt(ws: &mut WsClient, wait: Duration) {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match ws.next_frame_within(left).await {
            Ok(ServerFrame::Receipt { .. }) => panic!("unexpected receipt"),
            Ok(_) => continue,
            Err(_) => return,
        }
    }
}

/// (delivered, read) of `user` as `viewer` sees them.
async fn marks(cluster: &Cluster, viewer: &str, conv: &str, user: &str) -> (u64, u64) {
    let view = cluster.rest(0, viewer).conversation(conv).await.unwrap();
    let Members::Detailed(members) = view.members else {
        panic!("detailed members expected");
    };
    let m = members.iter().find(|m| m.user_id.as_str() == user).unwrap();
    (m.delivered_seq, m.read_seq)
}

#[tokio::test]
async fn marks_reach_the_other_members_as_receipts() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob", "carol"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    let mut carol = cluster.ws(0, "carol", "c").await;
    let mut phone = cluster.ws(0, "bob", "phone").await;
    let mut laptop = cluster.ws(0, "bob", "laptop").await;
    for i in 0..3 {
        send_acked(&mut alice, &conv, &format!("r{i}"), "x").await;
    }

    // Bob's phone got everything: one delivered receipt, to alice and carol.
    phone
        .send(&ack(ReceiptKind::Delivered, &conv, 3))
        .await
        .unwrap();
    assert_eq!(
        expect_receipt(&mut alice).await,
        ("bob".into(), ReceiptKind::Delivered, 3)
    );
    assert_eq!(
        expect_receipt(&mut carol).await,
        ("bob".into(), ReceiptKind::Delivered, 3)
    );
    // The laptop acking the same adds nothing: the user's mark did not move.
    laptop
        .send(&ack(ReceiptKind::Delivered, &conv, 3))
        .await
        .unwrap();
    expect_no_receipt(&mut alice, Duration::from_millis(600)).await;

    // Reads in quick succession are coalesced into one window's receipt.
    for seq in 1..=3 {
        phone
            .send(&ack(ReceiptKind::Read, &conv, seq))
            .await
            .unwrap();
    }
    let mut last = expect_receipt(&mut alice).await;
    assert_eq!((last.0.as_str(), last.1), ("bob", ReceiptKind::Read));
    if last.2 < 3 {
        // The acks straddled a window: at most one more.
        last = expect_receipt(&mut alice).await;
    }
    assert_eq!(last.2, 3);
    // Bob's own connections are not told of his marks.
    expect_no_receipt(&mut phone, Duration::from_millis(300)).await;
    assert_eq!(marks(&cluster, "alice", &conv, "bob").await, (3, 3));

    // Marks never move back.
    phone.send(&ack(ReceiptKind::Read, &conv, 1)).await.unwrap();
    expect_no_receipt(&mut alice, Duration::from_millis(600)).await;
    assert_eq!(marks(&cluster, "alice", &conv, "bob").await, (3, 3));

    // Acks for a conversation one does not belong to are refused.
    let mut eve = cluster.ws(0, "eve", "e").await;
    eve.send(&ack(ReceiptKind::Read, &conv, 1)).await.unwrap();
    let (code, request, _, _) = expect_error(&mut eve).await;
    assert_eq!(
        (code.as_str(), request.as_deref()),
        ("not_a_member", Some("ack_read"))
    );
}

#[tokio::test]
async fn receipts_converge_after_a_member_reconnects() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    for i in 0..4 {
        send_acked(&mut alice, &conv, &format!("c{i}"), "x").await;
    }
    alice.close().await;
    // Bob reads while alice is away: nobody is connected to hear it.
    let mut bob = cluster.ws(0, "bob", "b").await;
    bob.send(&ack(ReceiptKind::Read, &conv, 4)).await.unwrap();
    let mut converged = false;
    for _ in 0..50 {
        if marks(&cluster, "alice", &conv, "bob").await == (4, 4) {
            converged = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(converged, "alice sees bob's marks when she comes back");
    // Her list counts nothing unread of her own messages.
    let list = cluster.rest(0, "alice").conversations().await.unwrap();
    assert_eq!(list.conversations[0].unread_count, 0);
}

#[tokio::test]
async fn conversations_that_fan_out_on_read_store_marks_without_broadcasting() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "fanout_threshold = 2\n".into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Channel, "alice", &["bob", "carol"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    send_acked(&mut alice, &conv, "big-1", "to many").await;
    let mut bob = cluster.ws(0, "bob", "b").await;
    bob.send(&ack(ReceiptKind::Read, &conv, 1)).await.unwrap();
    expect_no_receipt(&mut alice, Duration::from_millis(800)).await;
    assert_eq!(marks(&cluster, "alice", &conv, "bob").await, (1, 1));
}

/// A conversation past the members a mark's answer lists
/// (`MarkChange::MEMBERS_INLINE`) that still fans out on write (here by a
/// raised threshold; a tenant's plugin may do the same): the gateway
/// reads the members itself, and the receipt still reaches the sender.
#[tokio::test]
async fn a_large_conversation_that_fans_out_on_write_still_broadcasts_receipts() {
    let size = switchboard_store::MarkChange::MEMBERS_INLINE;
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!("fanout_threshold = {}\n", size * 2),
        ..Default::default()
    })
    .await;
    let names: Vec<String> = (0..size).map(|i| format!("lg{i}")).collect();
    let others: Vec<&str> = names.iter().map(String::as_str).collect();
    // The creator and `size` others: one past what an answer lists.
    let conv = cluster
        .create(ConversationKind::Group, "lgalice", &others)
        .await;
    let mut alice = cluster.ws(0, "lgalice", "a").await;
    send_acked(&mut alice, &conv, "lg-1", "to a crowd").await;
    let mut reader = cluster.ws(0, "lg7", "b").await;
    reader
        .send(&ack(ReceiptKind::Read, &conv, 1))
        .await
        .unwrap();
    loop {
        match alice.next_frame_within(Duration::from_secs(5)).await {
            Ok(ServerFrame::Receipt {
                user_id, kind, seq, ..
            }) if user_id.as_str() == "lg7" && kind == ReceiptKind::Read => {
                assert_eq!(seq, 1);
                break;
            }
            Ok(_) => {}
            Err(e) => panic!("no read receipt from lg7: {e}"),
        }
    }
}

/// Read, then reply within one receipt window: the reply moves the
/// replier's marks up to itself when it is stored, so the read mark
/// written at the window's end moves nothing; it is broadcast all the
/// same, as the replier's mark now stands past what was asked (otherwise
/// the other member's tick never turned read).
#[tokio::test]
async fn a_reply_within_the_receipt_window_does_not_swallow_its_read_receipt() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Direct, "rralice", &["rrbob"])
        .await;
    let mut alice = cluster.ws(0, "rralice", "a").await;
    let mut bob = cluster.ws(0, "rrbob", "b").await;
    send_acked(&mut alice, &conv, "q1", "lunch?").await;
    send_acked(&mut alice, &conv, "q2", "at noon").await;

    bob.send(&ack(ReceiptKind::Delivered, &conv, 2))
        .await
        .unwrap();
    bob.send(&ack(ReceiptKind::Read, &conv, 2)).await.unwrap();
    let (_, reply_seq) = send_acked(&mut bob, &conv, "a1", "sure").await;
    assert_eq!(reply_seq, 3);

    // Alice sees the reply and a read receipt that covers her messages.
    let mut receipts = Vec::new();
    let mut replied = false;
    let read_past = |r: &Vec<(String, ReceiptKind, u64)>| {
        r.iter()
            .any(|(u, k, seq)| u == "rrbob" && *k == ReceiptKind::Read && *seq >= 2)
    };
    while !read_past(&receipts) || !replied {
        match alice.next_frame_within(Duration::from_secs(5)).await {
            Ok(ServerFrame::Receipt {
                user_id, kind, seq, ..
            }) => receipts.push((user_id.as_str().to_owned(), kind, seq)),
            Ok(ServerFrame::Message { message }) => {
                assert_eq!(message.seq, 3);
                replied = true;
            }
            Ok(_) => {}
            Err(e) => panic!("alice saw receipts {receipts:?}, reply {replied}: {e}"),
        }
    }
    assert!(receipts.iter().all(|(_, _, seq)| *seq <= 3), "{receipts:?}");
    assert_eq!(marks(&cluster, "rralice", &conv, "rrbob").await.1, 3);
    // A mark that moves nothing and stands where it was asked is not
    // broadcast again.
    bob.send(&ack(ReceiptKind::Read, &conv, 3)).await.unwrap();
    expect_no_receipt(&mut alice, Duration::from_millis(800)).await;
}
