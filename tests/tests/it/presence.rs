//! F9: presence reaches the user's direct contacts, follows the first and
//! the last connection across devices, survives in `last_seen`, and goes
//! offline by itself when the user's gateway is killed.

use std::time::Duration;

use switchboard_client::WsClient;
use switchboard_protocol::{ConversationKind, PresenceInfo, PresenceStatus, ServerFrame};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

async fn expect_presence(
    ws: &mut WsClient,
    who: &str,
    wait: Duration,
) -> (PresenceStatus, Option<switchboard_protocol::Timestamp>) {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match ws.next_frame_within(left).await {
            Ok(ServerFrame::Presence {
                user_id,
                status,
                last_seen,
            }) if user_id.as_str() == who => {
                return (status, last_seen);
            }
            Ok(_) => continue,
            Err(e) => panic!("no presence of {who}: {e}"),
        }
    }
}

async fn no_presence(ws: &mut WsClient, wait: Duration) {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match ws.next_frame_within(left).await {
            Ok(ServerFrame::Presence {
                user_id, status, ..
            }) => panic!("unexpected presence {user_id} {status:?}"),
            Ok(_) => continue,
            Err(_) => return,
        }
    }
}

async fn lookup(cluster: &Cluster, viewer: &str, user: &str) -> Result<PresenceInfo, u16> {
    let rest = cluster.rest(0, viewer);
    let r = rest
        .raw()
        .get(format!("{}/v1/users/{user}/presence", rest.base()))
        .bearer_auth(rest.token())
        .send()
        .await
        .unwrap();
    if r.status().is_success() {
        Ok(r.json().await.unwrap())
    } else {
        Err(r.status().as_u16())
    }
}

#[tokio::test]
async fn presence_reaches_direct_contacts_only() {
    // An id with characters a KV key cannot hold as they are.
    const ALICE: &str = "alice.b@example.com";
    let cluster = Cluster::start(ClusterSpec::default()).await;
    cluster.wait_for_writers(8, Duration::from_secs(20)).await;
    cluster
        .create(ConversationKind::Direct, ALICE, &["bob"])
        .await;
    cluster
        .create(ConversationKind::Group, ALICE, &["carol"])
        .await;
    let mut bob = cluster.ws(0, "bob", "b").await;
    let mut carol = cluster.ws(0, "carol", "c").await;
    // Bob's own arrival is news to alice only, who is not here yet.
    tokio::time::sleep(Duration::from_millis(700)).await;

    let phone = cluster.ws(0, ALICE, "phone").await;
    assert_eq!(
        expect_presence(&mut bob, ALICE, WAIT).await.0,
        PresenceStatus::Online
    );
    // A second device changes nothing.
    let laptop = cluster.ws(0, ALICE, "laptop").await;
    no_presence(&mut bob, Duration::from_millis(700)).await;
    // Groups are not presence scope.
    no_presence(&mut carol, Duration::from_millis(100)).await;
    let online = lookup(&cluster, "bob", ALICE).await.unwrap();
    assert_eq!(online.status, PresenceStatus::Online);

    phone.close().await;
    no_presence(&mut bob, Duration::from_millis(700)).await;
    laptop.close().await;
    let (status, last_seen) = expect_presence(&mut bob, ALICE, WAIT).await;
    assert_eq!(status, PresenceStatus::Offline);
    let last_seen = last_seen.expect("offline carries last_seen");

    // The lookup agrees once the notifier has recorded it.
    let mut offline = lookup(&cluster, "bob", ALICE).await.unwrap();
    for _ in 0..40 {
        if offline.status == PresenceStatus::Offline && offline.last_seen.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        offline = lookup(&cluster, "bob", ALICE).await.unwrap();
    }
    assert_eq!(
        (offline.status, offline.last_seen),
        (PresenceStatus::Offline, Some(last_seen))
    );
    assert_eq!(lookup(&cluster, "carol", ALICE).await.unwrap_err(), 403);
    assert_eq!(
        lookup(&cluster, ALICE, ALICE).await.unwrap().status,
        PresenceStatus::Offline
    );
    assert_eq!(lookup(&cluster, "bob", "stranger").await.unwrap_err(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_gateway_takes_its_users_offline() {
    let mut cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        extra_config: "presence_ttl_ms = 3000\n".into(),
        ..Default::default()
    })
    .await;
    cluster.wait_for_writers(8, Duration::from_secs(20)).await;
    cluster
        .create(ConversationKind::Direct, "dora", &["ed"])
        .await;
    let mut ed = cluster.ws(0, "ed", "e").await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let _dora = cluster.ws(1, "dora", "d").await;
    assert_eq!(
        expect_presence(&mut ed, "dora", WAIT).await.0,
        PresenceStatus::Online
    );

    let killed_at = std::time::Instant::now();
    cluster.gateways[1].kill9().await;
    let (status, last_seen) = expect_presence(&mut ed, "dora", Duration::from_secs(20)).await;
    assert_eq!(status, PresenceStatus::Offline);
    assert!(last_seen.is_some());
    assert!(
        killed_at.elapsed() < Duration::from_secs(10),
        "offline within the TTL and a little"
    );
}
