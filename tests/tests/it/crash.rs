//! I1 / I3 / F23: kill -9 of nats-server, a gateway, a worker and the
//! store-holding worker in the middle of a stream of sends. Every acked
//! message must survive with its `message_id` and `seq`, every
//! conversation stays gap-free without duplicates, each sender's order
//! holds, and the system recovers by itself (processes are restarted the
//! way a supervisor would).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use switchboard_protocol::SendAck;

use switchboard_protocol::ConversationKind;
use switchboard_tests::reliable::{Acked, Session};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acked_messages_survive_kill9_of_every_process() {
    let mut cluster = Cluster::start(ClusterSpec {
        workers: 2,
        gateways: 2,
        ..Default::default()
    })
    .await;
    let pairs = [("ka", "kb"), ("kc", "kd"), ("ke", "kf")];
    let mut conversations = Vec::new();
    for (a, b) in pairs {
        conversations.push((
            cluster.create(ConversationKind::Direct, a, &[b]).await,
            a,
            b,
        ));
    }
    // The readers' devices exist before the chaos, so they get inboxes.
    for (_, _, b) in &conversations {
        cluster.ws(1, b, "inbox").await.close().await;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let mut senders = Vec::new();
    for (conv, a, b) in &conversations {
        for user in [*a, *b] {
            let mut session = Session::new(cluster.ws_urls(), cluster.token(user, "sender"));
            let (conv, user, stop) = (conv.clone(), user.to_owned(), stop.clone());
            senders.push(tokio::spawn(async move {
                let mut acked: Vec<(String, Acked)> = Vec::new();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) || n < 10 {
                    let id = format!("{user}-{n:04}");
                    let ack = session
                        .send(&conv, &id, &format!("{user} {n}"), Duration::from_secs(120))
                        .await
                        .unwrap_or_else(|| panic!("{id} was never acked"));
                    acked.push((id, ack));
                    n += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                (conv, user, acked)
            }));
        }
    }

    let pause = |ms| tokio::time::sleep(Duration::from_millis(ms));
    pause(1000).await;
    cluster.gateways[0].kill9().await;
    pause(700).await;
    cluster.gateways[0].restart().await;
    pause(1000).await;
    cluster.nats.kill9().await;
    pause(700).await;
    cluster.nats.restart().await;
    pause(2000).await;
    cluster.workers[1].kill9().await;
    pause(700).await;
    cluster.workers[1].restart().await;
    pause(1500).await;
    cluster.workers[0].kill9().await; // holds the store
    pause(700).await;
    cluster.workers[0].restart().await;
    pause(1500).await;
    stop.store(true, Ordering::Relaxed);

    let mut acked_by_conv: HashMap<String, Vec<(String, String, Acked)>> = HashMap::new();
    for s in senders {
        let (conv, user, acked) = s.await.unwrap();
        assert!(acked.len() >= 10, "{user} sent too little");
        acked_by_conv
            .entry(conv)
            .or_default()
            .extend(acked.into_iter().map(|(id, a)| (user.clone(), id, a)));
    }

    let mut total = 0;
    for (conv, _, b) in &conversations {
        let history = check_history_against_acks(&cluster, conv, b, &acked_by_conv[conv]).await;
        total += history.len();

        // The reader's device replays everything it missed, once.
        let mut inbox = cluster.ws(1, b, "inbox").await;
        let mut seen = HashSet::new();
        loop {
            let (ms, _, more) = pull(&mut inbox, None, None, Some(1000)).await;
            for m in ms {
                if m.conversation_id.as_str() == conv {
                    seen.insert(m.seq);
                }
            }
            if !more {
                break;
            }
        }
        let others: HashSet<u64> = history
            .iter()
            .filter(|m| m.sender_device.as_str() != "inbox")
            .map(|m| m.seq)
            .collect();
        assert_eq!(seen, others, "{b}'s inbox for {conv}");
    }
    eprintln!("crash test: {total} messages stored across the kills");
    assert!(
        total > 100,
        "the stream ran through the kills ({total} messages)"
    );
}

/// kill -9 of the store-holding worker while it writes sends that arrived
/// several to a JetStream message, and plans them in parts of 4 commands
/// (`worker_max_batch = 4`): some parts of a message are stored, the rest
/// are not, and the message is not acked. On restart it is delivered
/// again. Its stored sends are answered with the originals, and the rest
/// are stored once, in the connection's order, without gaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill9_inside_a_batch_of_several_loses_and_repeats_nothing() {
    use switchboard_protocol::ServerFrame;

    let mut cluster = Cluster::start(ClusterSpec {
        partitions: 1,
        extra_config: "worker_max_batch = 4\n".into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let sends = 400;
    let id = |n: usize| format!("m{n:04}");
    let mut acked: HashMap<String, Acked> = HashMap::new();
    let take = |acked: &mut HashMap<String, Acked>, frame: ServerFrame| match frame {
        ServerFrame::Ack(SendAck {
            client_msg_id,
            message_id: Some(message_id),
            seq: Some(seq),
            ..
        }) => {
            let ack = Acked { message_id, seq };
            if let Some(earlier) = acked.insert(client_msg_id.as_str().to_owned(), ack) {
                assert_eq!(earlier, ack, "{client_msg_id} answered twice, differently");
            }
        }
        ServerFrame::Error { code, message, .. } => panic!("{code:?}: {message}"),
        _ => {}
    };
    // All at once: they queue behind the partition's publish and travel
    // several to a message.
    for n in 0..sends {
        alice
            .send(&send_frame(&conv, &id(n), "burst"))
            .await
            .unwrap();
    }
    while acked.len() < 40 {
        let frame = alice
            .next_frame_within(Duration::from_secs(20))
            .await
            .unwrap();
        take(&mut acked, frame);
    }
    cluster.workers[0].kill9().await; // holds the store
    // The kill came in the middle: the stream still holds messages the
    // writer had not acked, and they carried several sends each.
    let (acked_through, last) = cluster.writer_progress(0).await.unwrap();
    assert!(
        acked_through < last,
        "the writer had finished: {last} commands, acked through {acked_through}"
    );
    assert!(last < sends as u64 / 2, "sends went alone: {last} messages");
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.workers[0].restart().await;
    // Whatever was not answered is sent again, as a client would.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while acked.len() < sends {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {sends} acked",
            acked.len()
        );
        match alice.next_frame_within(Duration::from_secs(3)).await {
            Ok(frame) => take(&mut acked, frame),
            Err(_) => {
                for n in (0..sends).filter(|n| !acked.contains_key(&id(*n))) {
                    alice
                        .send(&send_frame(&conv, &id(n), "burst"))
                        .await
                        .unwrap();
                }
            }
        }
    }
    let acked: Vec<(String, String, Acked)> = acked
        .into_iter()
        .map(|(id, ack)| ("alice".to_owned(), id, ack))
        .collect();
    let history = check_history_against_acks(&cluster, &conv, "bob", &acked).await;
    assert_eq!(history.len(), sends, "every send stored once");
}
