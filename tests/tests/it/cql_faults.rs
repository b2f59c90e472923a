//! Faults of a three-node CQL cluster (Apache Cassandra 5.0, replication
//! factor 3, QUORUM) under the CQL store: two workers and two gateways,
//! every one `--store scylla`, no process holding a store, on a
//! three-node NATS cluster (`--replicas 3`), under a steady stream of
//! sends from clients that resend until acked. In turn: one CQL node
//! killed (SIGKILL) and restarted, one stopped (SIGSTOP) for 10 s, a
//! worker and a CQL node killed together; then the NATS faults of
//! `cluster_faults.rs`: each NATS node killed and restarted in turn, and
//! a NATS node killed with a worker.
//!
//! Checked: every acked message stored exactly once, gap-free, in each
//! sender's order; no process that was not killed exits; during each
//! fault but the last, acks anywhere never stop for longer than
//! `MAX_ACK_GAP` (5 s). The last, a NATS node and a worker killed
//! together, is checked per partition, as `cluster_faults.rs` checks its
//! double fault: whether any partition acks meanwhile is a matter of
//! which streams the node led and whether it was the other worker's
//! node too. Each partition the killed worker did not hold acks a send
//! made after the restarts within `RESUME_WITHIN`; each it held, once
//! its leases expired, within `LEASE_TTL` more. The longest stall of
//! each fault, and each partition's of each, is printed. The test starts the three nodes itself and stops them at its
//! end (`switchboard_tests::cql`).
//!
//! Also here, on the same cluster: the fencing test, a worker stopped
//! past its leases under load (`paused_worker.rs`). With no store holder,
//! only the store's writer fence keeps the stopped worker's commits from
//! landing after its successor's.

use std::time::Duration;
use switchboard_protocol::SendAck;

use switchboard_protocol::{ConversationKind, ErrorCode, ServerFrame};

use switchboard_tests::cql::CqlNodes;
use switchboard_tests::steady::{SteadySends, Timeline, longest_gap};
use switchboard_tests::{Cluster, ClusterSpec};
use tokio::time::Instant;

use crate::paused_worker;
use crate::support::*;

const PARTITIONS: u16 = 6;
/// The longest the platform may go without an ack during one fault. A
/// writer's commits go UNLOGGED (no batch log on a node gossip has not
/// convicted yet) and a request to a stopped node is also sent to another
/// after 1 s; measured on the 2-core machine: 0.9 s (a CQL node killed),
/// 1.8 s (stopped), 1.6 s (a worker and a CQL node), 0.1-0.5 s (NATS
/// faults).
const MAX_ACK_GAP: Duration = Duration::from_secs(5);
/// How soon after a NATS node and a worker killed together are back each
/// partition the worker did not hold acks a new send again: a stream the
/// node led elects a new leader (nats-server waits 4-9 s for it), and
/// the other worker's writers make new consumers once it has; as in
/// `cluster_faults.rs`' double fault.
const RESUME_WITHIN: Duration = Duration::from_secs(12);
/// The partition leases' TTL (`nats/kv/sb_workers.json`, `max_age`): a
/// killed worker's partitions are taken over when its leases expire,
/// since a restarted CQL worker is a new worker with an id of its own.
const LEASE_TTL: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cql_node_killed_or_stopped_loses_no_ack_and_stalls_briefly() {
    // The machine to itself before the three JVMs start.
    let turn = Cluster::exclusive_turn().await;
    let Some(cql) = CqlNodes::start().await else {
        return;
    };
    let mut cluster = Cluster::start_in_turn_of(
        ClusterSpec {
            workers: 2,
            gateways: 2,
            partitions: PARTITIONS,
            nats_nodes: 3,
            exclusive: true,
            cql: cql.contact_points(),
            ..Default::default()
        },
        turn,
    )
    .await;
    let load = SteadySends::start(&cluster, PARTITIONS, "cq", Duration::from_millis(1500)).await;
    cluster
        .wait_for_balanced_workers(PARTITIONS, 2, Duration::from_secs(30))
        .await;
    wait_for_spread_leaders(&cluster, PARTITIONS, Duration::from_secs(60)).await;
    let pause = |ms| tokio::time::sleep(Duration::from_millis(ms));
    pause(2000).await;

    let mut timeline = Timeline::default();
    // (what, from, to): each fault's window, from its start until the
    // cluster is whole again and has had two seconds.
    let mut windows: Vec<(String, Instant, Instant)> = Vec::new();

    print_holders(&cluster).await;
    let from = timeline.mark("kill -9 CQL node 2");
    cql.kill9(1).await;
    pause(5000).await;
    timeline.mark("restart CQL node 2");
    cql.restart(1).await;
    pause(3000).await;
    windows.push((
        "kill -9 of a CQL node, then its restart".into(),
        from,
        Instant::now(),
    ));

    print_holders(&cluster).await;
    let from = timeline.mark("SIGSTOP CQL node 3 for 10 s");
    cql.pause(2).await;
    pause(10_000).await;
    timeline.mark("SIGCONT CQL node 3");
    cql.resume(2).await;
    pause(3000).await;
    windows.push((
        "SIGSTOP of a CQL node for 10 s".into(),
        from,
        Instant::now(),
    ));

    print_holders(&cluster).await;
    let from = timeline.mark("kill -9 worker 1 and CQL node 1");
    cluster.workers[1].kill9().await;
    cql.kill9(0).await;
    pause(5000).await;
    timeline.mark("restart CQL node 1 and worker 1");
    cql.restart(0).await;
    cluster.workers[1].restart().await;
    pause(3000).await;
    windows.push((
        "kill -9 of a worker and a CQL node together".into(),
        from,
        Instant::now(),
    ));

    // The NATS faults: each node, and one with a worker. Before each, the
    // cluster is whole: every ingest stream current on its three nodes
    // and their leaders spread again.
    for node in 0..cluster.nats.len() {
        wait_for_spread_leaders(&cluster, PARTITIONS, Duration::from_secs(60)).await;
        pause(1000).await;
        print_holders(&cluster).await;
        let from = timeline.mark(format!("kill -9 NATS node {}", node + 1));
        cluster.nats.kill9_node(node).await;
        pause(4000).await;
        timeline.mark(format!("restart NATS node {}", node + 1));
        cluster.nats.restart_node(node).await;
        pause(3000).await;
        windows.push((
            format!("kill -9 of NATS node {}, then its restart", node + 1),
            from,
            Instant::now(),
        ));
    }
    wait_for_spread_leaders(&cluster, PARTITIONS, Duration::from_secs(60)).await;
    pause(1000).await;
    print_holders(&cluster).await;
    // The double fault, checked per partition (below), not cluster-wide:
    // the killed worker's partitions wait out its leases whatever else
    // happens, and the node may have been the other worker's too.
    let killed = worker_id(&cluster.workers[0].log());
    let held_by_killed: Vec<bool> = cluster
        .partition_holders(PARTITIONS)
        .await
        .iter()
        .map(|h| h.is_some() && *h == killed)
        .collect();
    let double = timeline.mark("kill -9 NATS node 2 and worker 0");
    cluster.nats.kill9_node(1).await;
    cluster.workers[0].kill9().await;
    pause(4000).await;
    timeline.mark("restart NATS node 2 and worker 0");
    cluster.nats.restart_node(1).await;
    cluster.workers[0].restart().await;
    let restarted = timeline.mark("NATS node 2 and worker 0 started again");
    // Until every partition acked a send made since, or the bound of the
    // slowest passed.
    let deadline = restarted + LEASE_TTL + RESUME_WITHIN;
    while Instant::now() < deadline {
        let sends = load.sends();
        let acked_since = |c: usize| {
            sends
                .iter()
                .any(|s| s.conversation == c && s.sent >= restarted)
        };
        if (0..usize::from(PARTITIONS)).all(acked_since) {
            break;
        }
        pause(200).await;
    }
    pause(1000).await;
    let to = Instant::now();
    let conversations = load.conversations.clone();
    let (acked, sends) = load.stop().await;
    for (i, w) in cluster.workers.iter_mut().enumerate() {
        assert_eq!(w.exited(), None, "worker {i} exited\n{}", w.log());
    }
    for (i, g) in cluster.gateways.iter_mut().enumerate() {
        assert_eq!(g.exited(), None, "gateway {i} exited\n{}", g.log());
    }
    let mut total = 0;
    for c in &conversations {
        let acked = &acked[&c.id];
        let history = check_history_against_acks(&cluster, &c.id, &c.reader, acked).await;
        assert!(history.len() >= acked.len());
        total += acked.len();
    }
    timeline.report(&sends, to);
    let acks: Vec<Instant> = sends.iter().map(|s| s.acked).collect();
    let mut stalls = Vec::new();
    for (what, from, to) in &windows {
        let (gap, at) = longest_gap(&acks, *from, *to);
        eprintln!(
            "CQL faults: {what}: longest stall {:.2} s (from {})",
            gap.as_secs_f32(),
            timeline.when(at)
        );
        // Each partition's own: which writers the fault held up.
        let per_partition: Vec<String> = conversations
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let acks: Vec<Instant> = sends
                    .iter()
                    .filter(|s| s.conversation == i)
                    .map(|s| s.acked)
                    .collect();
                let (gap, _) = longest_gap(&acks, *from, *to);
                format!("p{} {:.2}", c.partition, gap.as_secs_f32())
            })
            .collect();
        eprintln!(
            "CQL faults: {what}: per partition (s): {}",
            per_partition.join(", ")
        );
        stalls.push((what.clone(), gap, timeline.when(at)));
    }
    let resumed = sends_after_acked_after(&sends, conversations.len(), restarted, to);
    let (gap, at) = longest_gap(&acks, double, to);
    eprintln!(
        "CQL faults: kill -9 of a NATS node and a worker together: longest stall {:.2} s (from {}); \
         first ack per partition after the restarts (s): {}",
        gap.as_secs_f32(),
        timeline.when(at),
        conversations
            .iter()
            .zip(&resumed)
            .map(|(c, r)| {
                let whose = if held_by_killed[usize::from(c.partition)] {
                    " (killed worker's)"
                } else {
                    ""
                };
                format!("p{} {:.2}{whose}", c.partition, r.as_secs_f32())
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    eprintln!("CQL faults: {total} acked messages, every one stored once, gap-free");
    for (what, gap, at) in stalls {
        assert!(
            gap <= MAX_ACK_GAP,
            "{what}: no ack for {gap:?} from {at}\n{}",
            cluster.logs()
        );
    }
    for (c, r) in conversations.iter().zip(&resumed) {
        let bound = if held_by_killed[usize::from(c.partition)] {
            LEASE_TTL + RESUME_WITHIN
        } else {
            RESUME_WITHIN
        };
        assert!(
            *r <= bound,
            "kill -9 of a NATS node and a worker together: partition {} acked nothing sent \
             after the restarts for {r:?} (bound {bound:?})\n{}",
            c.partition,
            cluster.logs()
        );
    }
    assert!(total > 100, "the stream ran through the faults ({total})");
}

/// The id a worker announced last (`worker started worker=...` in its
/// log): a restarted worker is a new one.
fn worker_id(log: &str) -> Option<String> {
    let line = log.lines().rev().find(|l| l.contains("worker started"))?;
    let id = line.split("worker=").nth(1)?.split_whitespace().next()?;
    Some(id.to_owned())
}

/// Which worker writes each partition, printed before a fault: the
/// stall a worker's death causes depends on what it held.
async fn print_holders(cluster: &Cluster) {
    let holders = cluster.partition_holders(PARTITIONS).await;
    eprintln!("CQL faults: partition holders {holders:?}");
}

/// A worker stopped (SIGSTOP) past its leases' TTL under load while the
/// other takes its partitions and writes, then resumed: nothing it
/// planned lands after its successor's writes, every ack stored once,
/// gap-free (`paused_worker.rs`). Both workers write to the CQL cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cql_worker_paused_past_its_lease_ttl_writes_nothing_once_resumed() {
    let turn = Cluster::exclusive_turn().await;
    let Some(cql) = CqlNodes::start().await else {
        return;
    };
    let mut cluster = Cluster::start_in_turn_of(
        ClusterSpec {
            workers: 2,
            gateways: 1,
            partitions: PARTITIONS,
            exclusive: true,
            cql: cql.contact_points(),
            ..Default::default()
        },
        turn,
    )
    .await;
    let load = SteadySends::start(&cluster, PARTITIONS, "cw", Duration::from_millis(1500)).await;
    cluster
        .wait_for_balanced_workers(PARTITIONS, 2, Duration::from_secs(30))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    paused_worker::writes_nothing_once_resumed(&mut cluster, load, 0, PARTITIONS, MAX_ACK_GAP)
        .await;
    // The CQL store's metrics, from the worker that was not stopped.
    let addr = cluster.workers[1]
        .metrics_addr
        .expect("workers serve metrics");
    let samples = scrape(addr).await;
    for kind in ["batch", "fence_decide", "fence_claim", "read"] {
        let ok = sum(
            &samples,
            "switchboard_cql_requests_total",
            &format!("kind=\"{kind}\",outcome=\"ok\""),
        );
        assert!(ok > 0.0, "no {kind} request counted");
    }
    assert!(
        sum(
            &samples,
            "switchboard_cql_request_seconds_count",
            "kind=\"batch\""
        ) > 0.0
    );
    assert_eq!(
        sum(&samples, "switchboard_cql_nodes", "state=\"up\""),
        3.0,
        "the driver reaches the three nodes"
    );
    the_cluster_down_makes_readyz_fail_and_sends_unavailable(&cluster, &cql).await;
    let claims = cluster
        .workers
        .iter()
        .map(|w| {
            w.log()
                .matches("claimed the partition's writer fence")
                .count()
        })
        .sum::<usize>();
    assert!(
        claims >= PARTITIONS as usize,
        "writers claim their partitions: {claims}"
    );
}

/// The whole CQL cluster stopped (SIGSTOP of every node): the gateway's
/// `/readyz` names the store, and a send is answered `unavailable` once
/// the gateway gives up on it (30 s), never left waiting. Once the nodes
/// go on, its resend is acked.
async fn the_cluster_down_makes_readyz_fail_and_sends_unavailable(
    cluster: &Cluster,
    cql: &CqlNodes,
) {
    let conv = cluster
        .create(ConversationKind::Direct, "downa", &["downb"])
        .await;
    let mut ws = cluster.ws(0, "downa", "phone").await;
    send_acked(&mut ws, &conv, "down-0", "before").await;
    for i in 0..3 {
        cql.pause(i).await;
    }
    let stopped = Instant::now();
    ws.send(&send_frame(&conv, "down-1", "while the store is down"))
        .await
        .unwrap();
    let addr = cluster.gateways[0]
        .metrics_addr
        .expect("gateways serve /readyz");
    let mut readyz = (0, String::new());
    while stopped.elapsed() < Duration::from_secs(15) {
        let answer = reqwest::get(format!("http://{addr}/readyz")).await.unwrap();
        readyz = (answer.status().as_u16(), answer.text().await.unwrap());
        if readyz.0 == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        readyz.0, 503,
        "/readyz with the CQL cluster down: {}",
        readyz.1
    );
    assert!(
        readyz.1.contains("\"store\":\"unavailable\""),
        "{}",
        readyz.1
    );
    let code = loop {
        match ws.next_frame_within(Duration::from_secs(45)).await {
            Ok(ServerFrame::Error {
                code,
                client_msg_id: Some(id),
                ..
            }) if id.as_str() == "down-1" => break code,
            Ok(ServerFrame::Ack(SendAck { client_msg_id, .. }))
                if client_msg_id.as_str() == "down-1" =>
            {
                panic!("acked while every CQL node was stopped")
            }
            Ok(_) => {}
            Err(e) => panic!("no answer to a send while the store was down: {e}"),
        }
    };
    assert_eq!(code, ErrorCode::Unavailable);
    let answered_after = stopped.elapsed();
    assert!(
        answered_after < Duration::from_secs(40),
        "answered after {answered_after:?}"
    );
    eprintln!(
        "CQL cluster down: /readyz 503, the send answered unavailable after {:.1} s",
        answered_after.as_secs_f32()
    );
    for i in 0..3 {
        cql.resume(i).await;
    }
    // The nodes take a few seconds to see each other again after so long
    // a stop: the resend's ack may take longer than a usual wait.
    ws.send(&send_frame(&conv, "down-1", "while the store is down"))
        .await
        .unwrap();
    let resumed = Instant::now();
    loop {
        match ws.next_frame_within(Duration::from_secs(60)).await {
            Ok(ServerFrame::Ack(SendAck { client_msg_id, .. }))
                if client_msg_id.as_str() == "down-1" =>
            {
                break;
            }
            Ok(ServerFrame::Error {
                code: ErrorCode::Unavailable,
                client_msg_id: Some(id),
                ..
            }) if id.as_str() == "down-1" && resumed.elapsed() < Duration::from_secs(60) => {
                ws.send(&send_frame(&conv, "down-1", "while the store is down"))
                    .await
                    .unwrap();
            }
            Ok(ServerFrame::Error {
                code,
                client_msg_id,
                ..
            }) if client_msg_id.as_deref() == Some("down-1") => {
                panic!("the resend after the cluster came back got {code:?}")
            }
            Ok(_) => {}
            Err(e) => panic!("no ack of the resend after the cluster came back: {e}"),
        }
    }
}
