//! F8: typing indicators reach the members connected now, are never stored,
//! are rate-limited per connection, and are refused to non-members.

use std::time::Duration;

use switchboard_client::WsClient;
use switchboard_protocol::{
    ClientFrame, ConversationId, ConversationKind, ServerFrame, TypingState,
};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

fn typing(conv: &str, state: TypingState) -> ClientFrame {
    ClientFrame::Typing {
        conversation_id: ConversationId::new(conv).unwrap(),
        state,
    }
}

async fn expect_typing(ws: &mut WsClient) -> (String, TypingState, u64) {
    expect(ws, "typing", |f| match f {
        ServerFrame::Typing {
            user_id,
            state,
            expires_in_ms,
            ..
        } => Some((user_id.as_str().to_owned(), state, expires_in_ms)),
        _ => None,
    })
    .await
}

async fn silent(ws: &mut WsClient, wait: Duration) {
    if let Ok(frame) = ws.next_frame_within(wait).await {
        panic!("expected nothing, got {frame:?}");
    }
}

#[tokio::test]
async fn typing_reaches_connected_members_and_is_never_stored() {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob", "carol"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    let mut bob = cluster.ws(1, "bob", "b").await;
    let published_before = ingest_published(&cluster).await;

    alice
        .send(&typing(&conv, TypingState::Start))
        .await
        .unwrap();
    assert_eq!(
        expect_typing(&mut bob).await,
        ("alice".into(), TypingState::Start, 5000)
    );
    alice.send(&typing(&conv, TypingState::Stop)).await.unwrap();
    assert_eq!(expect_typing(&mut bob).await.1, TypingState::Stop);
    silent(&mut alice, Duration::from_millis(300)).await;

    // Nothing of it was stored: no message, no inbox entry, nothing for
    // carol, who was not connected, when she comes.
    let view = cluster.rest(0, "carol").conversation(&conv).await.unwrap();
    assert_eq!(view.last_seq, 0);
    let mut carol = cluster.ws(0, "carol", "c").await;
    let (backlog, _, _) = pull(&mut carol, None, None, None).await;
    assert!(backlog.is_empty());
    let (backlog, _, _) = pull(&mut bob, None, None, None).await;
    assert!(backlog.is_empty());
    // And no command went to the ingest streams.
    assert_eq!(ingest_published(&cluster).await, published_before);
}

/// Every ingest stream's last sequence.
async fn ingest_published(cluster: &Cluster) -> Vec<u64> {
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let mut last = Vec::new();
    for p in 0..ClusterSpec::default().partitions {
        let mut stream = js.get_stream(format!("SB_INGEST_{p}")).await.unwrap();
        last.push(stream.info().await.unwrap().state.last_sequence);
    }
    last
}

#[tokio::test]
async fn typing_is_rate_limited_and_members_only() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    for _ in 0..10 {
        alice
            .send(&typing(&conv, TypingState::Start))
            .await
            .unwrap();
    }
    let (code, request, _, _) = expect_error(&mut alice).await;
    assert_eq!(
        (code.as_str(), request.as_deref()),
        ("rate_limited", Some("typing"))
    );
    assert_alive(&mut alice).await;

    let mut eve = cluster.ws(0, "eve", "e").await;
    eve.send(&typing(&conv, TypingState::Start)).await.unwrap();
    let (code, _, _, _) = expect_error(&mut eve).await;
    assert_eq!(code.as_str(), "not_a_member");
}
