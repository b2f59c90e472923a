//! Keeps the ingest path's Raft leaders spread over the NATS nodes.
//!
//! Each partition's stream (`SB_INGEST_<p>`) and writer consumer
//! (`writer-p<p>`) is a Raft group with one leader; when the node leading
//! it dies, that partition takes no command until a new leader is elected
//! (4 to 9 s). Leadership moves away from a node that dies and does not
//! come back when the node does, so after a rolling restart one node can
//! lead every partition, and losing that node stalls them all. The leader
//! worker (holder of partition 0) therefore looks every
//! [`BALANCE_EVERY`] and, when one node leads more streams than another by
//! two or more, asks a stream on the busiest node to hand its leadership
//! to the least busy one (a graceful step-down: the preferred follower
//! takes over at once).
//!
//! Writer consumers are not moved from here: a consumer whose leader
//! changes leaves its writer's pull request behind, and the writer would
//! notice only by missed heartbeats. Each writer follows its stream
//! instead: one whose consumer is led apart from its stream starts over
//! between batches, and its new consumer is placed with the stream
//! (`writer/checks.rs`, `apart` and `move_to`). So the consumers spread as
//! the streams do.
//!
//! Only groups whose every replica is current are moved, and at most
//! [`MOVES_PER_ROUND`] per look, so a node that is still catching up is
//! never handed a leadership and the cluster never churns. On one NATS
//! server (no cluster information) there is nothing to do.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::stream::ClusterInfo;
use switchboard_nats::definitions::ingest_stream_name;

use crate::ctx::Ctx;

/// How often the leader worker looks at the leaders.
const BALANCE_EVERY: Duration = Duration::from_secs(5);
/// Most leaderships moved in one look.
const MOVES_PER_ROUND: usize = 3;

/// One partition's leaders as the cluster reports them.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub partition: u16,
    pub stream_leader: String,
    /// Every node holding the stream, when all are current; `None` while
    /// one is lagging or offline (then it is left alone).
    pub healthy_peers: Option<Vec<String>>,
}

/// A stream's leadership to hand over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Move {
    pub partition: u16,
    pub to: String,
}

pub(crate) async fn run(ctx: Arc<Ctx>) {
    let mut every = tokio::time::interval(BALANCE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if !ctx.leader.holds() {
            continue;
        }
        let Some(groups) = read_groups(&ctx).await else {
            continue;
        };
        for m in plan(&groups, MOVES_PER_ROUND) {
            step_down(&ctx, &m).await;
        }
    }
}

fn healthy(cluster: &ClusterInfo) -> Option<Vec<String>> {
    let leader = cluster.leader.clone()?;
    let mut peers = vec![leader];
    for r in &cluster.replicas {
        if !r.current || r.offline {
            return None;
        }
        peers.push(r.name.clone());
    }
    Some(peers)
}

/// Every partition's leaders, or `None` when the cluster cannot tell now
/// (one server, or an API that does not answer: try again later).
async fn read_groups(ctx: &Ctx) -> Option<Vec<Group>> {
    let mut groups = Vec::new();
    for partition in 0..ctx.config.partitions.max(1) {
        let name = ingest_stream_name(partition);
        // `get_stream` fetches the stream's info: no second request.
        let stream = ctx.js.get_stream(&name).await.ok()?;
        let cluster = stream.cached_info().cluster.clone()?;
        let stream_leader = cluster.leader.clone()?;
        groups.push(Group {
            partition,
            stream_leader,
            healthy_peers: healthy(&cluster),
        });
    }
    Some(groups)
}

/// The moves that even out the stream leaders; at most `most` of them.
pub(crate) fn plan(groups: &[Group], most: usize) -> Vec<Move> {
    let mut moves = Vec::new();
    // Leaders per node, counting every node that holds any stream.
    let mut load: BTreeMap<String, usize> = BTreeMap::new();
    for g in groups {
        for peer in g.healthy_peers.iter().flatten() {
            load.entry(peer.clone()).or_default();
        }
    }
    for g in groups {
        *load.entry(g.stream_leader.clone()).or_default() += 1;
    }
    let mut leaders: Vec<(u16, String)> = groups
        .iter()
        .map(|g| (g.partition, g.stream_leader.clone()))
        .collect();
    while moves.len() < most {
        let Some((busiest, high)) = load
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(k, n)| (k.clone(), *n))
        else {
            break;
        };
        let Some((idlest, low)) = load
            .iter()
            .min_by_key(|(_, n)| **n)
            .map(|(k, n)| (k.clone(), *n))
        else {
            break;
        };
        if high < low + 2 {
            break;
        }
        // A stream led by the busiest node that the idlest node holds,
        // current.
        let candidate = groups.iter().find(|g| {
            leaders
                .iter()
                .any(|(p, l)| *p == g.partition && *l == busiest)
                && g.healthy_peers
                    .as_ref()
                    .is_some_and(|peers| peers.contains(&idlest))
        });
        let Some(g) = candidate else {
            break;
        };
        moves.push(Move {
            partition: g.partition,
            to: idlest.clone(),
        });
        for (p, l) in leaders.iter_mut() {
            if *p == g.partition {
                *l = idlest.clone();
            }
        }
        *load.entry(busiest).or_default() -= 1;
        *load.entry(idlest).or_default() += 1;
    }
    moves
}

async fn step_down(ctx: &Ctx, m: &Move) {
    let (partition, to) = (m.partition, &m.to);
    let subject = format!("STREAM.LEADER.STEPDOWN.{}", ingest_stream_name(partition));
    let body = serde_json::json!({ "placement": { "preferred": to } });
    match ctx
        .js
        .request::<_, _, serde_json::Value>(subject.clone(), &body)
        .await
    {
        Ok(answer) if answer.get("error").is_none() => {
            tracing::info!(partition, to = %to, what = %subject, "moved a Raft leader to spread the ingest path");
        }
        Ok(answer) => {
            tracing::debug!(partition, what = %subject, %answer, "leader move refused");
        }
        Err(e) => tracing::debug!(partition, what = %subject, error = %e, "leader move failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(p: u16, leader: &str) -> Group {
        Group {
            partition: p,
            stream_leader: leader.into(),
            healthy_peers: Some(vec!["n1".into(), "n2".into(), "n3".into()]),
        }
    }

    #[test]
    fn spreads_stream_leaders_that_piled_up_on_one_node() {
        let groups: Vec<Group> = (0..6).map(|p| group(p, "n3")).collect();
        let moves = plan(&groups, 10);
        // 6 on n3 becomes 2 each: four moves, two to each other node.
        assert_eq!(moves.len(), 4, "{moves:?}");
        for to in ["n1", "n2"] {
            assert_eq!(moves.iter().filter(|m| m.to == to).count(), 2, "{moves:?}");
        }
        assert_eq!(plan(&groups, 2).len(), 2, "bounded per round");
    }

    #[test]
    fn leaves_a_balanced_cluster_alone() {
        let groups = vec![
            group(0, "n1"),
            group(1, "n2"),
            group(2, "n3"),
            group(3, "n1"),
        ];
        assert!(plan(&groups, 10).is_empty());
    }

    #[test]
    fn never_hands_leadership_to_a_lagging_node() {
        let mut groups: Vec<Group> = (0..4).map(|p| group(p, "n1")).collect();
        for g in &mut groups {
            g.healthy_peers = None;
        }
        assert!(plan(&groups, 10).is_empty());
    }
}
