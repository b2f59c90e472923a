//! F4 / I3: a retry with the same `client_msg_id` returns the same
//! `message_id` and `seq` and stores nothing new, inside JetStream's
//! dedupe window and beyond it.

use std::collections::HashMap;
use std::time::Duration;
use switchboard_protocol::SendAck;

use switchboard_client::rest::HistoryParams;
use switchboard_protocol::{ConversationKind, MessageId, ServerFrame};
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

/// Sends that queue up at a gateway go to JetStream several to one
/// message (`gateway/src/ingest.rs`), and JetStream cannot drop a retry
/// inside one: the store's idempotency keys do. A burst of sends, each
/// sent twice in a row, is stored once each, in the connection's order,
/// and every answer to either copy names the same message.
#[tokio::test]
async fn retries_among_sends_published_together_return_the_original() {
    burst_of_retries(true).await;
}

/// The same burst with batching off (`ingest_batch_max_sends = 1`): every
/// send travels alone, publishes are pipelined, and JetStream's dedupe
/// drops the retries it sees.
#[tokio::test]
async fn retries_of_sends_published_alone_return_the_original() {
    burst_of_retries(false).await;
}

async fn burst_of_retries(batching: bool) {
    let cluster = Cluster::start(ClusterSpec {
        partitions: 1,
        // A top-level key: first, before any table the harness adds.
        extra_config: if batching {
            String::new()
        } else {
            "ingest_batch_max_sends = 1\n".into()
        },
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let sends = 100;
    for n in 0..sends {
        for _ in 0..2 {
            alice
                .send(&send_frame(&conv, &format!("m{n}"), &format!("text {n}")))
                .await
                .unwrap();
        }
    }
    // Every copy is answered with the original's ack, except a copy that
    // JetStream dropped while its original was still on its way to the
    // writer: the original's one ack answers both (PROTOCOL: one ack per
    // `client_msg_id`). So: at least one ack per send, all alike, and
    // then whatever else comes within a quiet second.
    let ack_of = |f: ServerFrame| match f {
        ServerFrame::Ack(SendAck {
            client_msg_id,
            message_id: Some(message_id),
            seq: Some(seq),
            ..
        }) => Some((client_msg_id.as_str().to_owned(), (message_id, seq))),
        ServerFrame::Error { code, message, .. } => panic!("{code:?}: {message}"),
        _ => None,
    };
    let mut acks: HashMap<String, Vec<(MessageId, u64)>> = HashMap::new();
    while acks.len() < sends {
        let (id, ack) = expect(&mut alice, "an ack", ack_of).await;
        acks.entry(id).or_default().push(ack);
    }
    while let Ok(frame) = alice.next_frame_within(Duration::from_secs(1)).await {
        if let Some((id, ack)) = ack_of(frame) {
            acks.entry(id).or_default().push(ack);
        }
    }
    let mut seqs = Vec::new();
    for n in 0..sends {
        let answers = &acks[&format!("m{n}")];
        assert!((1..=2).contains(&answers.len()), "m{n}: {answers:?}");
        assert!(
            answers.iter().all(|a| *a == answers[0]),
            "m{n}: the retry got another message: {answers:?}"
        );
        seqs.push(answers[0].1);
    }
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "the connection's order, without gaps: {seqs:?}"
    );
    let page = cluster
        .rest(0, "alice")
        .history(
            &conv,
            HistoryParams {
                limit: Some(200),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.messages.len(), sends, "the retries created nothing");

    // And they did travel together, or alone: the partition's stream took
    // fewer messages than there were sends, or at least one per send (a
    // message of several would have brought it under `sends`).
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let info = js
        .get_stream("SB_INGEST_0")
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .clone();
    let published = info.state.last_sequence;
    if batching {
        assert!(
            published < 2 * sends as u64,
            "{published} ingest messages for {} sends",
            2 * sends
        );
    } else {
        assert!(
            (sends as u64..=2 * sends as u64).contains(&published),
            "{published} ingest messages for {} sends",
            2 * sends
        );
    }
}

/// A resend is answered to its sender alone (issue 27): the sender's
/// device gets its `ack` again, and no member (nor the sender's other
/// devices) sees the message a second time, inside the dedupe window and
/// beyond it, alone and among other sends.
#[tokio::test]
async fn a_resend_is_answered_to_its_sender_alone() {
    let cluster = Cluster::start(ClusterSpec {
        duplicate_window_ms: Some(500),
        partitions: 1,
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "rena", &["rbob"])
        .await;
    let mut alice = cluster.ws(0, "rena", "phone").await;
    let mut tablet = cluster.ws(0, "rena", "tablet").await;
    let mut bob = cluster.ws(0, "rbob", "b").await;
    // A device of bob's that is known, then offline: what reaches it goes
    // to its inbox.
    cluster.ws(0, "rbob", "laptop").await.close().await;
    let mut acks = Vec::new();
    for i in 1..=5 {
        acks.push(send_acked(&mut alice, &conv, &format!("r{i}"), &format!("m{i}")).await);
    }
    for (_, seq) in &acks {
        assert_eq!(expect_message(&mut bob).await.seq, *seq);
        assert_eq!(expect_message(&mut tablet).await.seq, *seq);
    }
    // Inside the window, alone.
    assert_eq!(send_acked(&mut alice, &conv, "r3", "m3").await, acks[2]);
    // Beyond it, alone: JetStream takes it, its writer answers.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(send_acked(&mut alice, &conv, "r3", "m3").await, acks[2]);
    // Beyond it, among new sends published together.
    tokio::time::sleep(Duration::from_millis(800)).await;
    for (id, text) in [("r6", "m6"), ("r3", "m3"), ("r7", "m7")] {
        alice.send(&send_frame(&conv, id, text)).await.unwrap();
    }
    let mut answers = HashMap::new();
    while answers.len() < 3 {
        if let ServerFrame::Ack(SendAck {
            client_msg_id,
            seq: Some(seq),
            ..
        }) = alice
            .next_frame_within(Duration::from_secs(10))
            .await
            .unwrap()
        {
            answers.insert(client_msg_id.as_str().to_owned(), seq);
        }
    }
    assert_eq!(answers["r3"], acks[2].1, "the original answers the resend");
    let last = acks[4].1;
    assert_eq!((answers["r6"], answers["r7"]), (last + 1, last + 2));
    // The others see the new two next: nothing of the resends came
    // between (a message frame for one would come first).
    for other in [&mut bob, &mut tablet] {
        assert_eq!(expect_message(other).await.seq, last + 1);
        assert_eq!(expect_message(other).await.seq, last + 2);
    }
    // Nor did a resend put anything in an inbox: the offline device finds
    // each message once.
    let mut laptop = cluster.ws(0, "rbob", "laptop").await;
    let (inbox, _, _) = pull(&mut laptop, None, None, None).await;
    let seqs: Vec<u64> = inbox.iter().map(|m| m.seq).collect();
    assert_eq!(
        seqs,
        (1..=last + 2).collect::<Vec<_>>(),
        "each once, in order"
    );
}
