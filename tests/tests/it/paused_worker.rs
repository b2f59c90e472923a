//! A worker stopped past its leases' TTL (SIGSTOP for 25 s, the TTL being
//! 20 s) under steady sends, then resumed: the scenario of the fencing
//! tests, on the embedded store (`cluster_faults.rs`) and on CQL
//! (`cql_faults.rs`, where the store's writer fence is what holds).
//!
//! Another worker takes the stopped one's partitions once their leases
//! expire and never stops acking its own meanwhile; the stopped worker,
//! once it goes on, writes nothing until it holds a lease again: no
//! message made by it before the pause lands after one of the new
//! owner's, and none is made by it between the pause and its next lease.
//! Every ack is stored once, gap-free, in order.

use std::time::Duration;

use switchboard_tests::Cluster;
use switchboard_tests::steady::{SteadySends, Timeline, longest_gap};
use tokio::time::Instant;

use crate::support::*;

/// Runs the scenario on `cluster` (its workers balanced over
/// `partitions`, `load` running) with worker `stalled` stopped.
pub(crate) async fn writes_nothing_once_resumed(
    cluster: &mut Cluster,
    load: SteadySends,
    stalled: usize,
    partitions: u16,
    max_ack_gap: Duration,
) {
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let leases = js.get_key_value("sb_workers").await.unwrap();
    // The stopped worker's lease value: its id, which it logs at start.
    let log = cluster.workers[stalled].log();
    let id = log
        .lines()
        .find_map(|l| {
            l.split("worker started worker=")
                .nth(1)?
                .split_whitespace()
                .next()
        })
        .unwrap_or_else(|| panic!("worker {stalled} logged no id\n{log}"))
        .to_owned();
    let mut stalled_holder = None;
    for p in 0..partitions {
        let holder = leases.get(format!("p.{p}")).await.unwrap().unwrap();
        if String::from_utf8_lossy(&holder) == id {
            stalled_holder = Some(holder);
        }
    }
    let stalled_holder = stalled_holder.expect("the worker to stop holds partitions");

    let mut timeline = Timeline::default();
    let paused = timeline.mark("SIGSTOP a worker for 25 s");
    let paused_ms = unix_ms();
    cluster.workers[stalled].pause();
    // The signal was delivered once `kill` returned (on a loaded machine
    // starting it may take a while): nothing made after is the worker's.
    let stopped_ms = unix_ms();
    tokio::time::sleep(Duration::from_secs(25)).await;
    let resumed = timeline.mark("SIGCONT the stopped worker");
    cluster.workers[stalled].resume();
    // When it holds a partition again (the other worker hands some back
    // at its next rebalance): no later than the start of the last look
    // that did not see it, so that nothing it wrote under its new lease
    // counts as written without one.
    let mut retaken_ms = None;
    let mut last_miss_ms = unix_ms();
    while resumed.elapsed() < Duration::from_secs(40) && retaken_ms.is_none() {
        let looked_ms = unix_ms();
        for p in 0..partitions {
            if let Ok(Some(v)) = leases.get(format!("p.{p}")).await
                && v == stalled_holder
            {
                retaken_ms = Some(last_miss_ms);
            }
        }
        last_miss_ms = looked_ms;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let retaken_ms = retaken_ms.expect("the resumed worker takes partitions again");
    timeline.mark("the resumed worker holds a partition again");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let to = Instant::now();
    let conversations = load.conversations.clone();
    let (acked, sends) = load.stop().await;
    assert_all_alive(cluster);
    let (total, histories) = check_every_ack(cluster, &conversations, &acked).await;

    // What the stalled worker wrote, by the node ids of its message ids.
    let stalled_nodes = node_ids_of(&cluster.workers[stalled].log());
    assert!(
        !stalled_nodes.is_empty(),
        "{}",
        cluster.workers[stalled].log()
    );
    let mut stale_after_new_owner = Vec::new();
    let mut made_while_fenced = Vec::new();
    for history in &histories {
        let mut new_owner_seen = false;
        for m in history {
            let parts = switchboard_protocol::snowflake::decompose(m.message_id);
            let by_stalled = stalled_nodes.contains(&parts.node);
            // Made after the stop took effect, before it held a lease
            // again.
            if by_stalled && parts.unix_ms > stopped_ms + 200 && parts.unix_ms < retaken_ms {
                made_while_fenced.push((m.conversation_id.to_string(), m.seq));
            }
            if !by_stalled && parts.unix_ms >= paused_ms {
                new_owner_seen = true;
            } else if by_stalled && parts.unix_ms < paused_ms && new_owner_seen {
                stale_after_new_owner.push((m.conversation_id.to_string(), m.seq));
            }
        }
    }
    let acks: Vec<Instant> = sends.iter().map(|s| s.acked).collect();
    let (during, during_at) = longest_gap(&acks, paused, resumed);
    let (after, after_at) = longest_gap(&acks, resumed, to);
    let waits = sends_after_acked_after(&sends, conversations.len(), paused, to);
    eprintln!(
        "paused worker: {total} acked; while it was stopped no ack anywhere for up to {:.2}s ({}), \
         after SIGCONT {:.2}s ({}); first ack of a send made after SIGSTOP per partition (s): {}",
        during.as_secs_f32(),
        timeline.when(during_at),
        after.as_secs_f32(),
        timeline.when(after_at),
        waits
            .iter()
            .map(|d| format!("{:.2}", d.as_secs_f32()))
            .collect::<Vec<_>>()
            .join(" ")
    );
    eprintln!(
        "paused worker: {} lines of its log mention a lease; \
         {} a batch the store refused",
        cluster.workers[stalled]
            .log()
            .lines()
            .filter(|l| l.contains("lease"))
            .count(),
        cluster.workers[stalled]
            .log()
            .lines()
            .filter(|l| l.contains("store refused the batch"))
            .count()
    );
    timeline.report(&sends, to);
    // The stopped worker held partitions when it stopped: theirs waited
    // for its leases to expire (else the test proves nothing).
    assert!(
        waits.iter().any(|w| *w >= Duration::from_secs(10)),
        "no partition waited for the stopped worker's leases: {waits:?}"
    );
    assert!(
        stale_after_new_owner.is_empty(),
        "messages the stalled worker made before its pause landed after the new owner's: {stale_after_new_owner:?}"
    );
    assert!(
        made_while_fenced.is_empty(),
        "the stalled worker wrote without a lease: {made_while_fenced:?}"
    );
    // The other worker's own partitions never stopped, and the handover
    // back did not stall anyone for long.
    assert!(
        during <= max_ack_gap,
        "no ack for {during:?} while a worker was stopped\n{}",
        cluster.logs()
    );
    assert!(
        after <= max_ack_gap,
        "no ack for {after:?} after the stopped worker went on\n{}",
        cluster.logs()
    );
}

/// Snowflake node ids a worker leased, from its log.
fn node_ids_of(log: &str) -> Vec<u16> {
    log.lines()
        .filter(|l| l.contains("leased Snowflake node id"))
        .filter_map(|l| l.split("node=").nth(1))
        .filter_map(|n| n.split_whitespace().next()?.parse().ok())
        .collect()
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
