//! F4 / I3: a retry with the same `client_msg_id` returns the same
//! `message_id` and `seq` and stores nothing new, inside JetStream's
//! dedupe window and beyond it.

use std::time::Duration;

use switchboard_client::rest::HistoryParams;
use switchboard_protocol::ConversationKind;
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

#[tokio::test]
async fn retries_inside_and_beyond_the_dedupe_window_return_the_original() {
    let cluster = Cluster::start(ClusterSpec {
        duplicate_window_ms: Some(1000),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let first = send_acked(&mut alice, &conv, "same-id", "once").await;

    // Inside the window: JetStream drops the duplicate, the gateway
    // answers from the store.
    let again = send_acked(&mut alice, &conv, "same-id", "once").await;
    assert_eq!(again, first);

    // Beyond the window: JetStream takes it, the writer finds the key.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let later = send_acked(&mut alice, &conv, "same-id", "once").await;
    assert_eq!(later, first);

    // From another connection of the same device, too.
    let mut again_conn = cluster.ws(0, "alice", "phone").await;
    let other = send_acked(&mut again_conn, &conv, "same-id", "once").await;
    assert_eq!(other, first);

    // Another sender may use the same client_msg_id: it is per sender.
    let mut bob = cluster.ws(0, "bob", "b").await;
    let bobs = send_acked(&mut bob, &conv, "same-id", "mine").await;
    assert_ne!(bobs.0, first.0);
    assert_eq!(bobs.1, 2);

    let page = cluster
        .rest(0, "alice")
        .history(&conv, HistoryParams::default())
        .await
        .unwrap();
    assert_eq!(page.messages.len(), 2, "the retries created nothing");
}
