//! The store served over NATS passes the same conformance suite as the
//! embedded store it serves.

use std::sync::Arc;
use std::time::Duration;

use switchboard_store::conformance::Subject;
use switchboard_store_remote::RemoteStore;
use switchboard_tests::{Cluster, ClusterSpec};

/// A cluster of its own for each check: NATS and one worker serving the
/// store (no gateway).
async fn served_store() -> Option<Subject> {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 0,
        ..Default::default()
    })
    .await;
    let store = RemoteStore::new(cluster.nats.client().await, Duration::from_secs(10));
    Some(Subject::new(Arc::new(store)).keeping(cluster))
}

mod the_store_over_nats {
    switchboard_store::conformance_tests!(super::served_store, served);
}

/// `--store scylla` with no Scylla to reach: the process says so and
/// exits, rather than serving without a store or hanging. (No CQL server
/// installs on these machines; the Scylla backend's conformance run needs
/// `SWITCHBOARD_TEST_SCYLLA`, see `store-scylla/README.md`.)
#[tokio::test]
async fn a_worker_without_its_scylla_cluster_exits_with_a_clear_error() {
    let cluster = Cluster::start(ClusterSpec {
        workers: 0,
        gateways: 0,
        ..Default::default()
    })
    .await;
    // A port nothing listens on: bind one and let it go.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let config = cluster.dir.path().join("scylla.toml");
    std::fs::write(
        &config,
        format!(
            "store = \"scylla\"\n[scylla]\nnodes = [\"127.0.0.1:{port}\"]\nkeyspace = \"sb_test\"\n"
        ),
    )
    .unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(switchboard_tests::switchboard_bin())
            .args(["worker", "--config", &config.display().to_string()])
            .args(["--nats-url", &cluster.nats.url()])
            .output(),
    )
    .await
    .expect("the worker exits")
    .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("connecting to Scylla at [\"127.0.0.1:{port}\"]")),
        "{stderr}"
    );
}
