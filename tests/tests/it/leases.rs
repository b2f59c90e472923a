//! F1 node ids and partition ownership through JetStream KV leases.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use switchboard_nats::definitions::{self, BackboneConfig, NODES_BUCKET, WORKERS_BUCKET};
use switchboard_nats::node_id::IdGenerator;
use switchboard_protocol::ConversationKind;
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

#[tokio::test]
async fn node_ids_are_never_shared() {
    let cluster = Cluster::start(ClusterSpec {
        workers: 2,
        gateways: 2,
        ..Default::default()
    })
    .await;
    let client = cluster.nats.client().await;
    let js = async_nats::jetstream::new(client);
    let kv = js.get_key_value(NODES_BUCKET).await.unwrap();
    // 40 more leases taken at once, racing for the same keys.
    let ttl = definitions::nodes_bucket(&BackboneConfig::default())
        .unwrap()
        .max_age;
    let leases = futures::future::join_all(
        (0..40).map(|i| IdGenerator::lease(kv.clone(), format!("test-{i}"), ttl)),
    )
    .await;
    let mut nodes = HashSet::new();
    for l in &leases {
        let g = l.as_ref().unwrap();
        assert!(nodes.insert(g.node()), "node {} leased twice", g.node());
        g.next_id().unwrap();
    }
    // The four processes hold one key each, and none of those.
    let keys: Vec<String> = kv
        .keys()
        .await
        .unwrap()
        .filter_map(|k| async { k.ok() })
        .collect()
        .await;
    let mut owners = HashSet::new();
    for key in &keys {
        let id: u16 = key.trim_start_matches('n').parse().unwrap();
        let owner = String::from_utf8(kv.get(key).await.unwrap().unwrap().to_vec()).unwrap();
        if !owner.starts_with("test-") {
            assert!(!nodes.contains(&id));
            assert!(owners.insert(owner.clone()), "{owner} holds two node ids");
        }
    }
    assert_eq!(owners.len(), 4, "{owners:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_split_partitions_and_take_over_a_dead_ones() {
    let mut cluster = Cluster::start(ClusterSpec {
        workers: 2,
        ..Default::default()
    })
    .await;
    let client = cluster.nats.client().await;
    let js = async_nats::jetstream::new(client);
    let kv = js.get_key_value(WORKERS_BUCKET).await.unwrap();
    let owners = || async {
        let mut v = Vec::new();
        for p in 0..8 {
            v.push(
                kv.get(format!("p.{p}"))
                    .await
                    .unwrap()
                    .map(|b| String::from_utf8(b.to_vec()).unwrap()),
            );
        }
        v
    };
    // Both workers hold half.
    let mut split = Vec::new();
    for _ in 0..100 {
        split = owners().await;
        let distinct: HashSet<_> = split.iter().flatten().collect();
        if split.iter().all(Option::is_some) && distinct.len() == 2 {
            let first = split[0].clone();
            let mine = split.iter().filter(|o| **o == first).count();
            if mine == 4 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let distinct: HashSet<_> = split.iter().flatten().cloned().collect();
    assert_eq!(distinct.len(), 2, "{split:?}");

    // Conversations across all partitions work.
    let mut conversations = Vec::new();
    for i in 0..16 {
        conversations.push(
            cluster
                .create(ConversationKind::Direct, &format!("p{i}"), &["q"])
                .await,
        );
    }
    // One worker dies; the other takes every partition within the TTL.
    cluster.workers[1].kill9().await;
    let mut survivor = HashSet::new();
    for _ in 0..150 {
        let now = owners().await;
        survivor = now.iter().flatten().cloned().collect();
        if now.iter().all(Option::is_some) && survivor.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(survivor.len(), 1, "one worker owns everything now");
    for (i, conv) in conversations.iter().enumerate() {
        let mut ws = cluster.ws(0, &format!("p{i}"), "d").await;
        let (_, seq) = send_acked(&mut ws, conv, "after-failover", "x").await;
        assert_eq!(seq, 1);
    }
}

/// NATS gone for longer than a partition lease stays valid: the writers
/// stop, and when NATS is back the worker holds its partitions again and
/// serves, with no restart by hand. Losing leases this way used to panic
/// the worker ("JoinHandle polled after completion") and take the store
/// down with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_outlives_a_nats_outage_longer_than_its_leases() {
    let mut cluster = Cluster::start(ClusterSpec {
        workers: 1,
        gateways: 1,
        partitions: 4,
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "outa", &["outb"])
        .await;
    let mut a = cluster.ws(0, "outa", "a").await;
    send_acked(&mut a, &conv, "before", "before the outage").await;
    // Leases are valid for four fifths of the 20 s TTL after their last
    // renewal: 18 s without NATS lets every one lapse.
    cluster.nats.kill9().await;
    tokio::time::sleep(Duration::from_secs(18)).await;
    cluster.nats.restart().await;
    cluster.wait_for_writers(4, Duration::from_secs(30)).await;
    assert_eq!(
        cluster.workers[0].exited(),
        None,
        "the worker must outlive the outage\n{}",
        cluster.logs()
    );
    let mut session =
        switchboard_tests::reliable::Session::new(cluster.ws_urls(), cluster.token("outa", "a2"));
    let ack = session
        .send(&conv, "after", "after the outage", Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("no ack after the outage\n{}", cluster.logs()));
    assert_eq!(ack.seq, 2);
    assert!(!cluster.workers[0].log().contains("panicked"));
}

/// A worker stopped gracefully leaves every command it answered acked:
/// its writers hand their last batches' acks to the worker's index feed,
/// which acks up to 50 ms later, and the worker waits for it before it
/// frees each lease. Otherwise the next owner would start before them
/// and answer them again as repeats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_stops_leaves_every_command_it_answered_acked() {
    let mut cluster = Cluster::start(ClusterSpec {
        partitions: 1,
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    for n in 0..20 {
        send_acked(&mut alice, &conv, &format!("m{n}"), "before the stop").await;
    }
    // At once after the last answer: its batch's ack is still waiting in
    // the feed's round.
    let status = cluster.workers[0].terminate().await;
    assert!(
        status.is_some_and(|s| s.success()),
        "the worker stops cleanly on SIGTERM: {status:?}"
    );
    let (acked, last) = cluster
        .writer_progress(0)
        .await
        .expect("the ingest stream outlives its worker");
    assert_eq!(
        acked, last,
        "the stopped worker left commands it answered unacked"
    );
}
