//! Per-connection limits that protect the gateway from one client: a
//! client that stops reading is closed (and loses nothing: it pulls the
//! backlog on reconnect), and one `pull_backlog` runs at a time.

use std::time::Duration;

use switchboard_protocol::{ClientFrame, ConversationId, ConversationKind, ErrorCode, ServerFrame};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_closed_and_loses_nothing() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config:
            "[limits]\noutbound_queue_bytes = 262144\nslow_client_timeout_ms = 3000\nsends_per_second = 100000.0\nsend_burst = 100000.0\nsends_per_second_per_user = 100000.0\nsend_burst_per_user = 100000.0\n"
                .into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    // Bob connects and then reads nothing.
    let mut bob = cluster.ws(0, "bob", "phone").await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    // Enough to fill the sockets' buffers on loopback (some MB) and then
    // the queue. Alice reads her acks as she goes: a reader that keeps up
    // is never closed.
    let n = 1000;
    send_in_bursts(&mut alice, &conv, n, 25, &"x".repeat(15_000)).await;
    // The sender was never held up; the silent reader was let go.
    let mut received = 0;
    let closed = loop {
        match bob.next_frame_within(Duration::from_secs(10)).await {
            Ok(ServerFrame::Message { .. }) => received += 1,
            Ok(_) => {}
            Err(
                switchboard_client::WsError::Closed
                | switchboard_client::WsError::ClosedBy { .. }
                | switchboard_client::WsError::Socket(_),
            ) => {
                break true;
            }
            Err(_) => break false,
        }
    };
    assert!(
        closed,
        "the slow reader was closed ({received} messages read)"
    );
    assert!(received < n, "not everything fit: {received}");
    let logs = cluster.logs();
    assert!(
        logs.contains("outbound queue over its budget") || logs.contains("slow-client timeout"),
        "the gateway says why it let the reader go"
    );

    // It reconnects and pulls what it missed: nothing lost. All 15 MB of
    // one conversation in one pull: the gateway reads it from the store
    // service in as many NATS messages as it takes (each at most the
    // server's max_payload, 1 MiB).
    let mut bob = cluster.ws(0, "bob", "phone").await;
    let (all, last, more) = pull(&mut bob, Some(&conv), Some(0), Some(1000)).await;
    assert_eq!((all.len(), last, more), (n, n as u64, false));
    // History pages (3 MB here) are read the same way.
    let page = cluster
        .rest(0, "bob")
        .history(
            &conv,
            switchboard_client::rest::HistoryParams {
                limit: Some(200),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let newest: Vec<u64> = page.messages.iter().map(|m| m.seq).collect();
    assert_eq!(
        newest,
        (n as u64 - 199..=n as u64).rev().collect::<Vec<_>>()
    );
    // So is the device's inbox (no conversation named): 15 MB in one pull.
    let (inbox, _, more) = pull(&mut bob, None, None, Some(1000)).await;
    assert_eq!((inbox.len(), more), (n, false));
    let seqs: Vec<u64> = all.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (1..=n as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn one_pull_backlog_runs_at_a_time() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    for i in 0..200 {
        send_acked(&mut alice, &conv, &format!("m{i}"), "hello").await;
    }
    let mut bob = cluster.ws(0, "bob", "phone").await;
    let pull = ClientFrame::PullBacklog {
        conversation_id: Some(ConversationId::new(conv.clone()).unwrap()),
        since_seq: Some(0),
        limit: Some(200),
    };
    bob.send(&pull).await.unwrap();
    bob.send(&pull).await.unwrap();
    let (mut messages, mut done, mut refused) = (0, 0, 0);
    while done < 1 {
        match bob.next_frame_within(WAIT).await.unwrap() {
            ServerFrame::Message { .. } => messages += 1,
            ServerFrame::BacklogDone { .. } => done += 1,
            ServerFrame::Error {
                code, request_type, ..
            } => {
                assert_eq!(code, ErrorCode::RateLimited);
                assert_eq!(request_type.as_deref(), Some("pull_backlog"));
                refused += 1;
            }
            _ => {}
        }
    }
    assert_eq!(
        (messages, refused),
        (200, 1),
        "the second pull waits its turn"
    );
    // Once the first is done, the next is served.
    let (again, _, _) = crate::support::pull(&mut bob, Some(&conv), Some(190), None).await;
    assert_eq!(again.len(), 10);
}

/// A user's messages are limited across all their connections on a
/// gateway (`sends_per_second_per_user`), not only per connection: at the
/// burst every send is taken, one past it is refused `rate_limited`.
#[tokio::test]
async fn a_users_sends_are_limited_across_their_connections() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nsends_per_second_per_user = 0.01\nsend_burst_per_user = 4.0\n"
            .into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "urate", &["ubob"])
        .await;
    let mut phone = cluster.ws(0, "urate", "phone").await;
    let mut laptop = cluster.ws(0, "urate", "laptop").await;
    for i in 0..2 {
        send_acked(&mut phone, &conv, &format!("p{i}"), "hi").await;
        send_acked(&mut laptop, &conv, &format!("l{i}"), "hi").await;
    }
    phone
        .send(&send_frame(&conv, "p-past", "one too many"))
        .await
        .unwrap();
    let (code, request, client_msg_id, message) = expect_error(&mut phone).await;
    assert_eq!(code, ErrorCode::RateLimited, "{message}");
    assert_eq!(request.as_deref(), Some("send_message"));
    assert_eq!(client_msg_id.as_deref(), Some("p-past"));
    assert!(message.contains("this user's connections"), "{message}");
    // Another user of the tenant is not held to this user's rate.
    let mut bob = cluster.ws(0, "ubob", "b").await;
    send_acked(&mut bob, &conv, "b0", "mine").await;
}
