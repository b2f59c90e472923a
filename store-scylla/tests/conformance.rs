//! The store conformance suite against a real ScyllaDB (or Cassandra 4)
//! node: `SWITCHBOARD_TEST_SCYLLA=host:port cargo test -p
//! switchboard-store-scylla`. Each run uses a fresh keyspace and drops it.
//! Without the variable the test says so and passes: no server is started
//! here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use switchboard_store::{Store, conformance};
use switchboard_store_scylla::{Replication, ScyllaConfig, ScyllaStore};

const VAR: &str = "SWITCHBOARD_TEST_SCYLLA";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_the_store_conformance_suite_on_scylla() {
    let Some(node) = std::env::var(VAR).ok().filter(|v| !v.trim().is_empty()) else {
        // Straight to stderr: the test harness captures print! output of
        // passing tests, and this line should be seen.
        let _ = writeln!(
            std::io::stderr(),
            "Scylla conformance run skipped: {VAR} is not set (set it to the host:port of a \
             ScyllaDB or Cassandra node to run the store conformance suite against it)"
        );
        return;
    };
    let keyspace = format!("sb_conformance_{:016x}", rand::random::<u64>());
    let config = ScyllaConfig {
        nodes: vec![node.trim().to_owned()],
        keyspace: keyspace.clone(),
        // One test node.
        replication: Replication::Simple { factor: 1 },
        consistency: "one".into(),
        // The suite checks that a sweep removes the entries it names.
        inbox_sweep: true,
        request_timeout_ms: 30_000,
        ..ScyllaConfig::default()
    };
    let store = Arc::new(
        ScyllaStore::connect(&config)
            .await
            .unwrap_or_else(|e| panic!("connecting to {node}: {e}")),
    );
    let suite = AssertUnwindSafe(async {
        conformance::run_all(store.as_ref()).await;
        conformance::tiered_reads_are_unchanged(store.clone() as Arc<dyn Store>).await;
    })
    .catch_unwind()
    .await;
    let dropped = store
        .session()
        .query_unpaged(format!("DROP KEYSPACE IF EXISTS {keyspace}"), ())
        .await;
    if let Err(e) = dropped {
        eprintln!("could not drop keyspace {keyspace}: {e}");
    }
    if let Err(panic) = suite {
        std::panic::resume_unwind(panic);
    }
    println!("Scylla conformance suite passed against {node} (keyspace {keyspace}, dropped)");
}
