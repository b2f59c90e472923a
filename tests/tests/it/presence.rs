//! F9: presence reaches the user's direct contacts, follows the first and
//! the last connection across devices, survives in `last_seen`, and goes
//! offline by itself when the user's gateway is killed.

use std::time::Duration;

use switchboard_client::WsClient;
use switchboard_protocol::{ConversationKind, PresenceInfo, PresenceStatus, ServerFrame};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

pub(crate) async fn expect_presence(
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

pub(crate) async fn no_presence(ws: &mut WsClient, wait: Duration) {
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

pub(crate) async fn lookup(
    cluster: &Cluster,
    viewer: &str,
    user: &str,
) -> Result<PresenceInfo, u16> {
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

/// The session registry's sync (`nats/src/sessions.rs`): every process
/// that routes events is a router in `sb_presence` and confirms a
/// revision once its view has applied it; one that does not answer (here
/// a key no process holds, as a dead router leaves) is named when the
/// wait ends, and later syncs do not wait the whole timeout for it again.
#[tokio::test]
async fn every_router_confirms_a_registration_and_a_dead_one_is_waited_for_in_bounds() {
    use futures::StreamExt;
    use switchboard_nats::definitions::PRESENCE_BUCKET;
    use switchboard_nats::records::presence::{presence_key, router_key};
    use switchboard_nats::sessions::{Sessions, SyncError};

    let cluster = Cluster::start(ClusterSpec {
        workers: 2,
        gateways: 2,
        ..Default::default()
    })
    .await;
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let bucket = js.get_key_value(PRESENCE_BUCKET).await.unwrap();
    // Each gateway and each worker is a router.
    let routers = || async {
        let keys: Vec<String> = bucket
            .keys()
            .await
            .unwrap()
            .filter_map(|k| async { k.ok() })
            .collect()
            .await;
        keys.into_iter()
            .filter(|k| k.starts_with("routers."))
            .count()
    };
    assert_eq!(routers().await, 4);
    let sessions = Sessions::start(
        cluster.nats.client().await,
        bucket.clone(),
        "test-router".into(),
        Default::default(),
    )
    .await
    .unwrap();
    let tenant = switchboard_protocol::TenantId::new("demo").unwrap();
    let user = switchboard_protocol::UserId::new("zed").unwrap();
    let key = presence_key(&tenant, &user, "gw-test");
    let revision = bucket.put(&key, "1".into()).await.unwrap();
    let within = Duration::from_secs(5);
    let started = tokio::time::Instant::now();
    sessions.sync(revision, within).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(sessions.routing_table().is_online(&tenant, &user));

    // A router that died: its key stays until the TTL.
    bucket.put(router_key("dead:1"), "1".into()).await.unwrap();
    let revision = bucket.put(&key, "2".into()).await.unwrap();
    let within = Duration::from_millis(600);
    let started = tokio::time::Instant::now();
    match sessions.sync(revision, within).await {
        Err(SyncError::Unconfirmed { missing, .. }) => assert_eq!(missing, ["dead:1"]),
        other => panic!("expected the dead router to be missing: {other:?}"),
    }
    let waited = started.elapsed();
    assert!(
        waited >= within && waited < within + Duration::from_secs(1),
        "{waited:?}"
    );
    // Now a suspect: the next syncs wait only a short grace for it, not
    // the whole timeout again, and succeed once the live ones answer.
    let revision = bucket.put(&key, "3".into()).await.unwrap();
    let started = tokio::time::Instant::now();
    sessions.sync(revision, within).await.unwrap();
    assert!(
        started.elapsed() < within / 2,
        "{:?} waiting for a suspect",
        started.elapsed()
    );
    bucket.delete(router_key("dead:1")).await.unwrap();
    let revision = bucket.put(&key, "4".into()).await.unwrap();
    sessions
        .sync(revision, Duration::from_secs(5))
        .await
        .unwrap();
}

/// A user who reconnects at once to the same gateway, again and again,
/// stays routed there. The leaving connection deletes the registry key
/// only at the revision its own stint wrote (`gateway/src/presence.rs`),
/// so it cannot undo the new connection's write. Here the delete usually
/// lands first anyway; the test guards the whole leave-and-join path.
#[tokio::test]
async fn a_user_who_reconnects_at_once_stays_routed_to_the_gateway() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    cluster.wait_for_writers(8, Duration::from_secs(20)).await;
    // Bob opens it, so that his presence concerns alice.
    let conv = cluster
        .create(ConversationKind::Direct, "bob", &["alice"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    let mut bob = cluster.ws(0, "bob", "b").await;
    // Each time, bob's only connection ends while a new one starts: the
    // gateway's leave (a delete of bob's key) and join (a write of it) run
    // side by side.
    for _ in 0..30 {
        let (next, ()) = tokio::join!(cluster.ws(0, "bob", "b"), bob.close());
        bob = next;
    }
    // Every leave has been handled by now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..5 {
        let id = format!("m{i}");
        alice
            .send(&send_frame(&conv, &id, "still here?"))
            .await
            .unwrap();
        expect_ack(&mut alice, &id).await;
        let m = expect_message(&mut bob).await;
        assert_eq!(text_of(&m), "still here?");
    }
    assert_eq!(
        lookup(&cluster, "alice", "bob").await.unwrap().status,
        PresenceStatus::Online
    );
}

/// With only a dead router to hear from (besides the asking process,
/// which answers itself), a sync waits the whole timeout once, and
/// afterwards only the suspect's grace.
#[tokio::test]
async fn with_only_a_dead_router_left_a_sync_waits_its_grace_only() {
    use switchboard_nats::definitions::{self, BackboneConfig, PRESENCE_BUCKET};
    use switchboard_nats::records::presence::{presence_key, router_key};
    use switchboard_nats::sessions::{Sessions, SyncError};

    // NATS alone: this test's Sessions is the only live router.
    let cluster = Cluster::start(ClusterSpec {
        workers: 0,
        gateways: 0,
        ..Default::default()
    })
    .await;
    let client = cluster.nats.client().await;
    let js = async_nats::jetstream::new(client.clone());
    definitions::ensure(&js, &BackboneConfig::default())
        .await
        .unwrap();
    let bucket = js.get_key_value(PRESENCE_BUCKET).await.unwrap();
    let sessions = Sessions::start(client, bucket.clone(), "only".into(), Default::default())
        .await
        .unwrap();
    bucket.put(router_key("dead:2"), "1".into()).await.unwrap();
    let tenant = switchboard_protocol::TenantId::new("demo").unwrap();
    let user = switchboard_protocol::UserId::new("zoe").unwrap();
    let key = presence_key(&tenant, &user, "gw-test");
    let within = Duration::from_millis(600);
    let revision = bucket.put(&key, "1".into()).await.unwrap();
    assert!(matches!(
        sessions.sync(revision, within).await,
        Err(SyncError::Unconfirmed { .. })
    ));
    let revision = bucket.put(&key, "2".into()).await.unwrap();
    let started = tokio::time::Instant::now();
    sessions.sync(revision, within).await.unwrap();
    assert!(
        started.elapsed() < within / 2,
        "{:?} waiting for a suspect alone",
        started.elapsed()
    );
}
