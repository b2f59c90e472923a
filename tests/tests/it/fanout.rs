//! F10: conversations above the fan-out threshold store one copy, write no
//! inboxes, and reach their connected members through the conversation's
//! own subject, across gateways; members who join, and conversations that
//! grow past the threshold, keep receiving live.

use std::collections::HashSet;
use std::time::Duration;

use switchboard_client::WsClient;
use switchboard_client::rest::HistoryParams;
use switchboard_protocol::{ConversationKind, MessageId};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

/// Every client gets the message with this id, live.
async fn all_receive(clients: &mut [WsClient], id: MessageId) {
    for ws in clients.iter_mut() {
        let m = expect_message(ws).await;
        assert_eq!(m.message_id, id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_600_member_channel_fans_out_on_read() {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let members: Vec<String> = (1..600).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = members.iter().map(String::as_str).collect();
    let channel = cluster.create(ConversationKind::Channel, "m0", &refs).await;
    assert_eq!(
        cluster
            .rest(0, "m0")
            .conversation(&channel)
            .await
            .unwrap()
            .last_seq,
        0
    );
    // An offline member whose device is known.
    cluster.ws(0, "m599", "phone").await.close().await;

    // 50 connected members over two gateways; m0 speaks.
    let mut sender = cluster.ws(0, "m0", "d").await;
    let mut listeners = Vec::new();
    for i in 1..50 {
        listeners.push(cluster.ws(i % 2, &format!("m{i}"), "d").await);
    }
    for n in 0..3 {
        let (id, seq) = send_acked(&mut sender, &channel, &format!("big{n}"), "to everyone").await;
        assert_eq!(seq, n + 1);
        all_receive(&mut listeners, id).await;
    }

    // No inbox entries for anyone: the offline member's device has none,
    // and reads the history instead.
    let mut offline = cluster.ws(1, "m599", "phone").await;
    let (inbox, _, _) = pull(&mut offline, None, None, None).await;
    assert!(inbox.is_empty(), "fan-out on read writes no inbox");
    let page = cluster
        .rest(1, "m599")
        .history(&channel, HistoryParams::default())
        .await
        .unwrap();
    assert_eq!(page.messages.len(), 3);
    let (backlog, last, _) = pull(&mut offline, Some(&channel), Some(0), None).await;
    assert_eq!((backlog.len(), last), (3, 3));

    // A member added while connected hears what follows.
    let mut newbie = cluster.ws(1, "newbie", "d").await;
    cluster
        .rest(0, "m0")
        .add_members(&channel, &["newbie"])
        .await
        .unwrap();
    let added = expect_message(&mut newbie).await;
    assert!(matches!(
        added.content,
        Some(switchboard_protocol::Content::System(_))
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (id, _) = send_acked(&mut sender, &channel, "welcome", "welcome").await;
    let seen = loop {
        let m = expect_message(&mut newbie).await;
        if m.message_id == id {
            break m;
        }
    };
    assert_eq!(seen.message_id, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_that_grows_past_the_threshold_stays_live() {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        extra_config: "fanout_threshold = 3\n".into(),
        ..Default::default()
    })
    .await;
    let group = cluster
        .create(ConversationKind::Group, "g0", &["g1", "g2"])
        .await;
    // A device of g1 that is known but offline throughout.
    cluster.ws(0, "g1", "offline").await.close().await;
    let mut g0 = cluster.ws(0, "g0", "d").await;
    let mut others = vec![
        cluster.ws(1, "g1", "d").await,
        cluster.ws(0, "g2", "d").await,
    ];

    // Three members: fan-out on write; the offline device gets an inbox entry.
    let (small, _) = send_acked(&mut g0, &group, "small", "x").await;
    all_receive(&mut others, small).await;

    // A fourth member takes the group past the threshold: the members
    // already connected keep hearing, now through the group's subject.
    let mut g3 = cluster.ws(1, "g3", "d").await;
    cluster
        .rest(0, "g0")
        .add_members(&group, &["g3"])
        .await
        .unwrap();
    for ws in others.iter_mut().chain(std::iter::once(&mut g3)) {
        expect_message(ws).await; // the system message
    }
    others.push(g3);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (big, _) = send_acked(&mut g0, &group, "big", "y").await;
    all_receive(&mut others, big).await;

    // The offline device has the first message in its inbox, not the second.
    let mut offline = cluster.ws(0, "g1", "offline").await;
    let (inbox, _, _) = pull(&mut offline, None, None, None).await;
    let ids: HashSet<MessageId> = inbox.iter().map(|m| m.message_id).collect();
    assert!(ids.contains(&small));
    assert!(!ids.contains(&big));
}
