//! F6 / F16: per-device inboxes and `pull_backlog` replay in `seq` order,
//! per conversation and across conversations.

use std::time::Duration;

use switchboard_protocol::{ClientFrame, ConversationId, ConversationKind};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

fn seqs(ms: &[switchboard_protocol::Message]) -> Vec<(String, u64)> {
    ms.iter()
        .map(|m| (m.conversation_id.as_str().to_owned(), m.seq))
        .collect()
}

#[tokio::test]
async fn each_device_replays_what_it_missed() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let one = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let two = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    // Bob's devices become known by connecting once.
    cluster.ws(0, "bob", "phone").await.close().await;
    cluster.ws(0, "bob", "laptop").await.close().await;

    let mut alice = cluster.ws(0, "alice", "a").await;
    for i in 0..5 {
        send_acked(&mut alice, &one, &format!("one-{i}"), "x").await;
    }
    for i in 0..2 {
        send_acked(&mut alice, &two, &format!("two-{i}"), "y").await;
    }

    let mut phone = cluster.ws(0, "bob", "phone").await;
    let (all, _, more) = pull(&mut phone, None, None, None).await;
    assert!(!more);
    let mut expected: Vec<(String, u64)> = (1..=5).map(|s| (one.clone(), s)).collect();
    expected.extend((1..=2).map(|s| (two.clone(), s)));
    let mut got = seqs(&all);
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "everything, once");
    // Within each conversation, in seq order.
    let ones: Vec<u64> = all
        .iter()
        .filter(|m| m.conversation_id.as_str() == one)
        .map(|m| m.seq)
        .collect();
    assert_eq!(ones, vec![1, 2, 3, 4, 5]);

    // The phone acks part of it; only the rest comes back.
    phone
        .send(&ClientFrame::AckDelivered {
            conversation_id: ConversationId::new(one.clone()).unwrap(),
            seq: 3,
        })
        .await
        .unwrap();
    phone
        .send(&ClientFrame::AckDelivered {
            conversation_id: ConversationId::new(two.clone()).unwrap(),
            seq: 2,
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (rest, _, _) = pull(&mut phone, None, None, None).await;
    assert_eq!(seqs(&rest), vec![(one.clone(), 4), (one.clone(), 5)]);

    // The laptop's inbox is its own.
    let mut laptop = cluster.ws(0, "bob", "laptop").await;
    let (laptop_all, _, _) = pull(&mut laptop, None, None, None).await;
    assert_eq!(laptop_all.len(), 7);

    // A limit cuts the replay and says there is more.
    let (first, _, more) = pull(&mut laptop, None, None, Some(4)).await;
    assert_eq!(first.len(), 4);
    assert!(more);
}

#[tokio::test]
async fn a_conversation_replays_from_a_seq() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    for i in 0..6 {
        send_acked(&mut alice, &conv, &format!("m{i}"), "x").await;
    }
    let mut bob = cluster.ws(0, "bob", "b").await;
    let (ms, last, more) = pull(&mut bob, Some(&conv), Some(2), None).await;
    assert_eq!(
        ms.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![3, 4, 5, 6]
    );
    assert_eq!((last, more), (6, false));
    let (ms, last, more) = pull(&mut bob, Some(&conv), Some(2), Some(2)).await;
    assert_eq!(ms.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![3, 4]);
    assert_eq!((last, more), (4, true));
    let (ms, last, _) = pull(&mut bob, Some(&conv), Some(6), None).await;
    assert!(ms.is_empty());
    assert_eq!(last, 6, "nothing new: last_seq is where the client stands");

    // Not a member: refused, and the connection keeps working.
    let mut eve = cluster.ws(0, "eve", "e").await;
    eve.send(&ClientFrame::PullBacklog {
        conversation_id: Some(ConversationId::new(conv.clone()).unwrap()),
        since_seq: None,
        limit: None,
    })
    .await
    .unwrap();
    let (code, request, _, _) = expect_error(&mut eve).await;
    assert_eq!(code.as_str(), "not_a_member");
    assert_eq!(request.as_deref(), Some("pull_backlog"));
    assert_alive(&mut eve).await;
}
