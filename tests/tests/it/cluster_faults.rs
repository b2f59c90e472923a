//! Cluster faults: a three-node JetStream cluster (`--replicas 3`), two
//! workers (one holding the embedded store, one `--store nats`) and two
//! gateways, under a steady stream of sends from clients that resend
//! until acked and reconnect to the other gateway when theirs goes away.
//! Each NATS node is killed (SIGKILL) and restarted in turn, then a
//! gateway (SIGKILL), both gateways one after the other (SIGTERM: a
//! rolling restart, drained), the `--store nats` worker and the
//! store-holding worker.
//!
//! Checked: every acked message is stored exactly once, in a gap-free
//! order that keeps each sender's order; no process that was not killed
//! exits; and, but for the store-holding worker's restart (downtime by
//! design with the embedded store), no stretch of more than five seconds
//! passes without an ack anywhere.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use switchboard_protocol::SendAck;

use switchboard_protocol::{ConversationKind, ServerFrame};
use switchboard_tests::reliable::Session;
use switchboard_tests::steady::{SteadySends, Timeline, longest_gap};
use switchboard_tests::{Cluster, ClusterSpec};
use tokio::time::Instant;

use crate::paused_worker;
use crate::support::*;

/// The longest the platform may go without acking anything while one
/// NATS node, gateway or `--store nats` worker is down.
const MAX_ACK_GAP: Duration = Duration::from_secs(5);
const PARTITIONS: u16 = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_gateway_or_worker_down_never_stops_acks_for_long() {
    let mut cluster = Cluster::start(ClusterSpec {
        workers: 2,
        gateways: 2,
        nats_nodes: 3,
        partitions: PARTITIONS,
        // It measures seconds: nothing else runs beside it.
        exclusive: true,
        ..Default::default()
    })
    .await;
    // One one-to-one conversation in every partition, so that the senders
    // cover every ingest stream and so every node's leaderships: losing a
    // node stalls only the conversations whose partitions it led.
    let load = SteadySends::start(&cluster, PARTITIONS, "cf", Duration::from_millis(1500)).await;

    let pause = |ms| tokio::time::sleep(Duration::from_millis(ms));
    let mut timeline = Timeline::default();
    // A steady state first: the workers share the partitions, the NATS
    // nodes the leaderships.
    cluster
        .wait_for_balanced_workers(PARTITIONS, 2, Duration::from_secs(30))
        .await;
    wait_for_spread_leaders(&cluster, PARTITIONS, Duration::from_secs(40)).await;
    pause(1000).await;
    let measured_from = Instant::now();
    for node in 0..cluster.nats.len() {
        timeline.mark(format!("kill -9 NATS node {}", node + 1));
        cluster.nats.kill9_node(node).await;
        pause(4000).await;
        timeline.mark(format!("restart NATS node {}", node + 1));
        cluster.nats.restart_node(node).await;
        // The node catches up, and the leader worker hands it its share
        // of the ingest streams' leaders back, before the next one goes.
        wait_for_spread_leaders(&cluster, PARTITIONS, Duration::from_secs(40)).await;
        timeline.mark("leaders spread again");
        pause(1000).await;
    }
    timeline.mark("kill -9 gateway 0");
    cluster.gateways[0].kill9().await;
    pause(1500).await;
    cluster.gateways[0].restart().await;
    pause(2000).await;
    // A rolling restart: each gateway drained (SIGTERM) and started again.
    for g in 0..2 {
        timeline.mark(format!("SIGTERM gateway {g} (drain)"));
        let status = cluster.gateways[g].terminate().await;
        assert!(
            status.is_some_and(|s| s.success()),
            "a drained gateway exits cleanly: {status:?}\n{}",
            cluster.logs()
        );
        cluster.gateways[g].restart().await;
        pause(2000).await;
    }
    timeline.mark("kill -9 the --store nats worker");
    cluster.workers[1].kill9().await;
    pause(3000).await;
    cluster.workers[1].restart().await;
    pause(2000).await;
    let store_down = Instant::now();
    timeline.mark("kill -9 the store-holding worker");
    cluster.workers[0].kill9().await;
    pause(1000).await;
    cluster.workers[0].restart().await;
    let store_up = Instant::now();
    pause(4000).await;
    let measured_to = Instant::now();
    let conversations = load.conversations.clone();
    let (acked_by_conv, sends) = load.stop().await;

    assert_all_alive(&mut cluster);

    // Nothing acked was lost, duplicated or reordered.
    let (total, _) = check_every_ack(&cluster, &conversations, &acked_by_conv).await;

    // Acks never stopped for long, but around the store-holder's restart.
    let acks: Vec<Instant> = sends.iter().map(|s| s.acked).collect();
    let (before, at) = longest_gap(&acks, measured_from, store_down);
    let (after, after_at) = longest_gap(&acks, store_up + Duration::from_secs(1), measured_to);
    let (store_gap, _) = longest_gap(&acks, store_down, measured_to);
    let when = |t: Instant| timeline.when(t);
    eprintln!(
        "cluster faults: {total} acked messages; longest gap without an ack {:.2}s ({}), \
         around the store-holder's restart {:.2}s",
        before.as_secs_f32(),
        when(at),
        store_gap.as_secs_f32()
    );
    timeline.report(&sends, measured_to);
    assert!(
        before <= MAX_ACK_GAP,
        "no ack for {before:?}, starting {}\n{}",
        when(at),
        cluster.logs()
    );
    assert!(
        after <= MAX_ACK_GAP,
        "acks did not resume after the store-holder came back: {after:?} from {}\n{}",
        when(after_at),
        cluster.logs()
    );
    assert!(total > 200, "the stream ran through the faults ({total})");
}

/// The NATS node that leads stream `name` now.
async fn leader_of(cluster: &Cluster, name: &str) -> usize {
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let mut stream = js.get_stream(name).await.unwrap();
    let leader = stream
        .info()
        .await
        .unwrap()
        .cluster
        .clone()
        .and_then(|c| c.leader)
        .unwrap_or_else(|| panic!("{name} has no leader"));
    // Nodes are named n1, n2, ... (`proc.rs`).
    leader[1..].parse::<usize>().unwrap() - 1
}

/// A NATS node and the store-holding worker killed at the same moment (a
/// machine lost with both), both restarted 6.5 s later: acks resume in
/// every conversation within 12 s of the restarts. Then the store holder
/// stalls for 4 s (SIGSTOP, well within its leases' TTL): acks resume
/// soon after it goes on. The node lost is the one leading the partition
/// leases' bucket, so every lease write waits for its new leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_node_and_the_store_holder_lost_together_stop_acks_briefly() {
    const RESUME_WITHIN: Duration = Duration::from_secs(12);
    let mut cluster = Cluster::start(ClusterSpec {
        workers: 2,
        gateways: 2,
        nats_nodes: 3,
        partitions: PARTITIONS,
        exclusive: true,
        ..Default::default()
    })
    .await;
    let load = SteadySends::start(&cluster, PARTITIONS, "df", Duration::from_millis(1500)).await;
    cluster
        .wait_for_balanced_workers(PARTITIONS, 2, Duration::from_secs(30))
        .await;
    wait_for_spread_leaders(&cluster, PARTITIONS, Duration::from_secs(40)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let node = leader_of(&cluster, "KV_sb_workers").await;

    let mut timeline = Timeline::default();
    let killed = timeline.mark(format!(
        "kill -9 NATS node {} (leading sb_workers) and the store-holding worker",
        node + 1
    ));
    tokio::join!(cluster.nats.kill9_node(node), cluster.workers[0].kill9());
    tokio::time::sleep(Duration::from_millis(6500)).await;
    let restarted = timeline.mark("restart both");
    tokio::join!(
        cluster.nats.restart_node(node),
        cluster.workers[0].restart()
    );
    timeline.mark("both started again (the worker ready)");
    tokio::time::sleep_until(restarted + Duration::from_secs(20)).await;
    let paused = timeline.mark("SIGSTOP the store-holding worker for 4 s");
    cluster.workers[0].pause();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let resumed = timeline.mark("SIGCONT the store-holding worker");
    cluster.workers[0].resume();
    tokio::time::sleep(Duration::from_secs(12)).await;
    let to = Instant::now();
    let conversations = load.conversations.clone();
    let (acked, sends) = load.stop().await;
    assert_all_alive(&mut cluster);
    let (total, _) = check_every_ack(&cluster, &conversations, &acked).await;

    let acks: Vec<Instant> = sends.iter().map(|s| s.acked).collect();
    let after_restart = resumed_after(&sends, conversations.len(), restarted, paused);
    let after_pause = resumed_after(&sends, conversations.len(), resumed, to);
    let (fault_gap, fault_at) = longest_gap(&acks, killed, paused);
    let (pause_gap, pause_at) = longest_gap(&acks, paused, to);
    let secs = |d: &[Duration]| {
        d.iter()
            .map(|d| format!("{:.2}", d.as_secs_f32()))
            .collect::<Vec<_>>()
            .join(" ")
    };
    eprintln!(
        "double fault: {total} acked; no ack anywhere for up to {:.2}s ({}); \
         first ack per partition after the restarts (s): {}",
        fault_gap.as_secs_f32(),
        timeline.when(fault_at),
        secs(&after_restart)
    );
    eprintln!(
        "double fault: after the 4 s pause no ack for up to {:.2}s ({}); \
         first ack per partition after SIGCONT (s): {}",
        pause_gap.as_secs_f32(),
        timeline.when(pause_at),
        secs(&after_pause)
    );
    timeline.report(&sends, to);
    let slowest = after_restart.iter().max().copied().unwrap_or_default();
    assert!(
        slowest <= RESUME_WITHIN,
        "a partition waited {slowest:?} after the restarts\n{}",
        cluster.logs()
    );
    let slowest = after_pause.iter().max().copied().unwrap_or_default();
    assert!(
        slowest <= MAX_ACK_GAP,
        "a partition waited {slowest:?} after the pause\n{}",
        cluster.logs()
    );
}

/// A `--store nats` worker stalls past its leases' TTL: the scenario of
/// `paused_worker.rs`, where the store holder takes its partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_paused_past_its_lease_ttl_writes_nothing_once_resumed() {
    let mut cluster = Cluster::start(ClusterSpec {
        workers: 2,
        gateways: 1,
        partitions: PARTITIONS,
        exclusive: true,
        ..Default::default()
    })
    .await;
    let load = SteadySends::start(&cluster, PARTITIONS, "ps", Duration::from_millis(1500)).await;
    cluster
        .wait_for_balanced_workers(PARTITIONS, 2, Duration::from_secs(30))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Worker 1 is the `--store nats` one.
    paused_worker::writes_nothing_once_resumed(&mut cluster, load, 1, PARTITIONS, MAX_ACK_GAP)
        .await;
}

/// Several seed URLs, the first of them down when the processes start:
/// they connect through the others and serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_start_with_the_first_seed_down() {
    let mut cluster = Cluster::start(ClusterSpec {
        workers: 1,
        gateways: 1,
        nats_nodes: 3,
        partitions: 4,
        // A new Raft leader for what node 0 led takes up to about 12 s;
        // alone, so that a busy machine does not stretch it further.
        exclusive: true,
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "seeda", &["seedb"])
        .await;
    // Stop everything, take the first seed away, start again: the seed
    // list (`--nats-url n1,n2,n3`) leads with the dead node.
    cluster.gateways[0].kill9().await;
    cluster.workers[0].kill9().await;
    cluster.nats.kill9_node(0).await;
    cluster.workers[0].restart().await;
    cluster.gateways[0].restart().await;
    let mut b = cluster.ws(0, "seedb", "b").await;
    // The conversation's stream may have been led by the dead node: the
    // send waits for its new leader (deploy/README.md, "When something
    // fails"), resent with the same client_msg_id as a client would.
    let mut a = Session::new(cluster.ws_urls(), cluster.token("seeda", "a"));
    let acked = a
        .send(&conv, "after-seed-loss", "hello", Duration::from_secs(45))
        .await
        .expect("acked once the stream has a leader");
    assert_eq!(acked.seq, 1);
    let m = expect_message(&mut b).await;
    assert_eq!(text_of(&m), "hello");
}

/// SIGTERM drains a gateway: sends already taken are answered, then every
/// client is told to reconnect (1012), new connections are refused, and
/// the process exits well before its drain timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_gateway_answers_in_flight_sends_then_closes_with_1012() {
    let mut cluster = Cluster::start(ClusterSpec {
        workers: 1,
        gateways: 2,
        partitions: 4,
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "draina", &["drainb"])
        .await;
    let mut a = cluster.ws(1, "draina", "a").await;
    let mut b = cluster.ws(1, "drainb", "b").await;
    send_acked(&mut a, &conv, "warm", "warm").await;
    // Twenty sends in flight, then SIGTERM at once.
    for i in 0..20 {
        a.send(&send_frame(&conv, &format!("d{i:02}"), "in flight"))
            .await
            .unwrap();
    }
    let started = Instant::now();
    let pid = cluster.gateways[1].pid().unwrap();
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let mut acked = 0;
    let close = loop {
        match a.next_frame_within(Duration::from_secs(15)).await {
            Ok(switchboard_protocol::ServerFrame::Ack(SendAck { .. })) => acked += 1,
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    assert!(
        matches!(
            close,
            switchboard_client::WsError::ClosedBy { code: 1012, .. }
        ),
        "told to reconnect: {close}"
    );
    // The twenty were read before the drain began or not at all; those
    // read were answered before the close.
    assert!(acked <= 20);
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "the drain waited {waited:?} for answers that had come"
    );
    assert!(matches!(
        b.next_frame_within(Duration::from_secs(5)).await,
        Err(switchboard_client::WsError::ClosedBy { code: 1012, .. })
            | Ok(switchboard_protocol::ServerFrame::Message { .. })
    ));
    let status = cluster.gateways[1].wait_exit(Duration::from_secs(15)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    // Whatever was not acked is resent elsewhere and stored once.
    let mut session =
        switchboard_tests::reliable::Session::new(cluster.ws_urls(), cluster.token("draina", "a"));
    for i in 0..20 {
        session
            .send(
                &conv,
                &format!("d{i:02}"),
                "in flight",
                Duration::from_secs(20),
            )
            .await
            .unwrap_or_else(|| panic!("d{i:02} not acked after the drain"));
    }
    let history = full_history(&cluster, &conv, "drainb").await;
    assert_eq!(history.len(), 21, "each send stored once");
}

/// Waits until neither partition 0's ingest stream nor any of its
/// consumers is led by the NATS node named `avoid`, moving the stream's
/// leader to `to` if it is (the writer then places a new consumer with
/// the stream, `worker/src/writer/consume.rs`).
async fn lead_ingest_away_from(cluster: &Cluster, avoid: &str, to: &str, within: Duration) {
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let deadline = Instant::now() + within;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(mut stream) = js.get_stream("SB_INGEST_0").await {
            let stream_leader = stream
                .info()
                .await
                .ok()
                .and_then(|i| i.cluster.clone())
                .and_then(|c| c.leader);
            let mut consumer_leaders = Vec::new();
            let mut consumers = stream.consumers();
            while let Some(Ok(info)) = futures::StreamExt::next(&mut consumers).await {
                consumer_leaders.push(info.cluster.and_then(|c| c.leader));
            }
            last = format!("stream {stream_leader:?}, consumers {consumer_leaders:?}");
            if stream_leader.as_deref() == Some(avoid) {
                let body = serde_json::json!({ "placement": { "preferred": to } });
                let _ = js
                    .request::<_, _, serde_json::Value>(
                        "STREAM.LEADER.STEPDOWN.SB_INGEST_0".to_owned(),
                        &body,
                    )
                    .await;
            } else if stream_leader.is_some()
                && !consumer_leaders.is_empty()
                && consumer_leaders
                    .iter()
                    .all(|l| l.is_some() && l.as_deref() != Some(avoid))
            {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!(
        "partition 0 still led by {avoid}: {last}\n{}",
        cluster.logs()
    );
}

/// A gateway whose NATS node dies loses the pub-acks it was waiting for,
/// and the writers' acks published until it has reconnected to another
/// node. It publishes those sends again at once rather than after the
/// JetStream timeout (5 s), and answers the stored ones whose acks did not
/// come from the store, so its senders barely notice and need not resend;
/// nothing is lost, doubled or reordered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_whose_nats_node_dies_publishes_again_and_answers_from_the_store() {
    let mut cluster = Cluster::start(ClusterSpec {
        workers: 0,
        gateways: 0,
        nats_nodes: 3,
        partitions: 1,
        // It measures seconds: nothing else runs beside it.
        exclusive: true,
        // A sender that never lets up.
        extra_config: "[limits]\nsends_per_second = 100000.0\nsend_burst = 100000.0\nsends_per_second_per_user = 100000.0\nsend_burst_per_user = 100000.0\n".into(),
        ..Default::default()
    })
    .await;
    // The worker and the message path's leaders on n1 and n2, the gateway
    // on n3 alone: losing n3 costs the gateway its connection and nothing
    // else the message path needs.
    let (n1, n2, n3) = (
        cluster.nats.node_url(0),
        cluster.nats.node_url(1),
        cluster.nats.node_url(2),
    );
    cluster.add_worker_via(true, &format!("{n1},{n2}")).await;
    cluster
        .wait_for_balanced_workers(1, 1, Duration::from_secs(30))
        .await;
    lead_ingest_away_from(&cluster, "n3", "n1", Duration::from_secs(40)).await;
    cluster.add_gateway_via(&n3).await;
    let conv = cluster
        .create(ConversationKind::Direct, "gwlossa", &["gwlossb"])
        .await;
    let mut ws = cluster.ws(0, "gwlossa", "a").await;
    send_acked(&mut ws, &conv, "warm", "warm").await;

    // A sender that always has sends in flight, so that some wait for
    // their pub-acks when the node dies, and some for their writer's ack,
    // which is lost if published while the gateway reconnects. It never
    // resends: every ack must come by itself.
    const IN_FLIGHT: usize = 16;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let (stop, conv) = (stop.clone(), conv.clone());
        tokio::spawn(async move {
            let mut sent = 0usize;
            let mut unacked: std::collections::BTreeSet<String> = Default::default();
            let mut acked: HashMap<String, (u64, Instant)> = HashMap::new();
            loop {
                while unacked.len() < IN_FLIGHT && !stop.load(std::sync::atomic::Ordering::Relaxed)
                {
                    let id = format!("g{sent:05}");
                    ws.send(&send_frame(&conv, &id, "in flight")).await.unwrap();
                    unacked.insert(id);
                    sent += 1;
                }
                if unacked.is_empty() {
                    return (acked, ws);
                }
                match ws.next_frame_within(Duration::from_secs(10)).await {
                    // A copy published again may be answered twice, with
                    // the same seq: the first answer counts.
                    Ok(ServerFrame::Ack(SendAck {
                        client_msg_id,
                        seq: Some(seq),
                        ..
                    })) => {
                        unacked.remove(client_msg_id.as_str());
                        let first = acked
                            .entry(client_msg_id.to_string())
                            .or_insert((seq, Instant::now()));
                        assert_eq!(first.0, seq, "{client_msg_id} acked with two seqs");
                    }
                    Ok(ServerFrame::Error {
                        client_msg_id,
                        message,
                        ..
                    }) => panic!("{client_msg_id:?} was not stored: {message}"),
                    Ok(_) => {}
                    Err(e) => panic!("never acked: {unacked:?} ({e})"),
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let killed = Instant::now();
    cluster.nats.kill9_node(2).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (acked, _open) = sender.await.unwrap();

    // Acks went on within a reconnect, well inside the JetStream timeout.
    let times: Vec<Instant> = acked.values().map(|(_, at)| *at).collect();
    let (gap, _) = longest_gap(&times, killed, killed + Duration::from_secs(3));
    eprintln!(
        "gateway's node lost: {} sends acked, no ack for up to {:.2}s after the kill",
        acked.len(),
        gap.as_secs_f32()
    );
    // Under the JetStream timeout (5 s), which a send whose pub-ack died
    // with the node would wait out without the republish. Measured: 0.01
    // to 0.3 s on an idle machine, up to 1.4 s with both cores busy
    // elsewhere (a debug build); CI machines are slower still.
    assert!(
        gap < Duration::from_secs(4),
        "no ack for {gap:?} after the gateway's node died\n{}",
        cluster.logs()
    );
    // Each stored once, in the order sent.
    let history = full_history(&cluster, &conv, "gwlossb").await;
    assert_eq!(history.len(), acked.len() + 1, "each send stored once");
    let mut ids: Vec<&str> = history
        .iter()
        .map(|m| m.client_msg_id.as_str())
        .filter(|id| *id != "warm")
        .collect();
    let sent_order = ids.clone();
    ids.sort_unstable();
    assert_eq!(ids, sent_order, "stored in the order sent");
    // The answers from the store were counted once each: a drain, which
    // waits for an answer to every send stored, ends at once rather than
    // at its timeout (10 s), the sender's connection still open.
    let draining = Instant::now();
    let status = cluster.gateways[0].terminate().await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(
        draining.elapsed() < Duration::from_secs(5),
        "the drain waited {:?} for answers already given",
        draining.elapsed()
    );
}
