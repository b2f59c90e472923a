//! The store served over NATS passes the same conformance suite as the
//! embedded store it serves.

use std::time::Duration;

use switchboard_backbone::store_service::RemoteStore;
use switchboard_store::conformance;
use switchboard_tests::{Cluster, ClusterSpec};

#[tokio::test]
async fn the_store_over_nats_passes_the_conformance_suite() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let store = RemoteStore::new(cluster.nats.client().await, Duration::from_secs(10));
    conformance::run_all(&store).await;
}
