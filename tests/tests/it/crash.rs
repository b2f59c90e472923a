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
