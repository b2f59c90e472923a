//! The store conformance suite against a real ScyllaDB (or Cassandra 4)
//! node: `SWITCHBOARD_TEST_SCYLLA=host:port cargo test -p
//! switchboard-store-scylla`. Each check uses a fresh keyspace and drops
//! it once the check passed (a failed check leaves it to look at).
//! Without the variable every check says so and passes: no server is
//! started here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::sync::Arc;

use switchboard_store::conformance::Subject;
use switchboard_store_scylla::{Replication, ScyllaConfig, ScyllaStore};

const VAR: &str = "SWITCHBOARD_TEST_SCYLLA";

async fn subject() -> Option<Subject> {
    let Some(node) = std::env::var(VAR).ok().filter(|v| !v.trim().is_empty()) else {
        // Straight to stderr: the test harness captures print! output of
        // passing tests, and this line should be seen.
        let _ = writeln!(
            std::io::stderr(),
            "Scylla conformance check skipped: {VAR} is not set (set it to the host:port of a \
             ScyllaDB or Cassandra node to run the store conformance suite against it)"
        );
        return None;
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
    let session = store.clone();
    Some(Subject::new(store).cleaning_up(async move {
        let dropped = session
            .session()
            .query_unpaged(format!("DROP KEYSPACE IF EXISTS {keyspace}"), ())
            .await;
        if let Err(e) = dropped {
            eprintln!("could not drop keyspace {keyspace}: {e}");
        }
    }))
}

switchboard_store::conformance_tests!(subject);
