//! A burst larger than the gateway's limit on publishes waiting for
//! JetStream's ack must slow down, not stall: every send is acked. (A
//! gateway that parked pub-ack futures in its connection loops once
//! deadlocked here: each loop waited to publish while holding the permits
//! the others needed.) The limit is set low so the burst passes it.

use std::time::Duration;
use switchboard_protocol::SendAck;

use switchboard_protocol::ConversationKind;
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_beyond_the_in_flight_limit_is_all_acked() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "jetstream_max_inflight = 16\n[limits]\nsends_per_second = 100000.0\nsend_burst = 100000.0\nsends_per_second_per_user = 100000.0\nsend_burst_per_user = 100000.0\nmax_inflight_sends = 2000\n".into(),
        ..Default::default()
    })
    .await;
    const CONNECTIONS: usize = 100;
    const EACH: usize = 50;
    let mut tasks = Vec::new();
    for i in 0..CONNECTIONS {
        let user = format!("burst{i}");
        let conv = cluster
            .create(ConversationKind::Direct, &user, &["sink"])
            .await;
        let mut ws = cluster.ws(0, &user, "d").await;
        tasks.push(tokio::spawn(async move {
            // Everyone's frames first, so the loops are busy at once.
            for n in 0..EACH {
                ws.send(&send_frame(&conv, &format!("{n}"), "burst"))
                    .await
                    .unwrap();
            }
            let mut acked = 0;
            while acked < EACH {
                match ws.next_frame_within(Duration::from_secs(60)).await {
                    Ok(switchboard_protocol::ServerFrame::Ack(SendAck { .. })) => acked += 1,
                    Ok(switchboard_protocol::ServerFrame::Error { code, message, .. }) => {
                        panic!("send refused: {code} {message}")
                    }
                    Ok(_) => {}
                    Err(e) => panic!("{acked} of {EACH} acked, then: {e}"),
                }
            }
        }));
    }
    // A stalled gateway stops reading, so even sending may hang: bound it all.
    let all = futures::future::join_all(tasks);
    let results = tokio::time::timeout(Duration::from_secs(90), all)
        .await
        .unwrap_or_else(|_| panic!("the burst stalled: not every send was acked within 90 s"));
    for r in results {
        r.unwrap();
    }
}
