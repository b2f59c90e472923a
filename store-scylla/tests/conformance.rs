//! The store conformance suite against a real CQL node (Apache Cassandra
//! 5.0 in CI, started by `scripts/cassandra.sh`; ScyllaDB works the same):
//! `SWITCHBOARD_TEST_SCYLLA=host:port cargo test -p
//! switchboard-store-scylla`. Each check uses a fresh keyspace and drops
//! it once the check passed (a failed check leaves it to look at). Without
//! the variable every check says so and passes, except in CI (`CI` set),
//! where a skipped run is a failure: `scripts/test.sh` always sets it.
//!
//! Also here: the schema's migrations, from the first released version to
//! the current one, on the same server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;
use switchboard_store::Reads;

use switchboard_store::Store;
use switchboard_store::conformance::Subject;
use switchboard_store_scylla::{Replication, SCHEMA_VERSION, ScyllaConfig, ScyllaStore};

const VAR: &str = "SWITCHBOARD_TEST_SCYLLA";

/// The node to test against, if one is named.
fn node() -> Option<String> {
    let node = std::env::var(VAR).ok().filter(|v| !v.trim().is_empty());
    if node.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{VAR} is not set, and CI never skips the CQL store's suite: run scripts/test.sh, \
             which starts Cassandra (scripts/cassandra.sh) and sets it"
        );
        // Straight to stderr: the test harness captures print! output of
        // passing tests, and this line should be seen.
        let _ = writeln!(
            std::io::stderr(),
            "Scylla conformance check skipped: {VAR} is not set (set it to the host:port of a \
             ScyllaDB or Cassandra node, or run scripts/test.sh)"
        );
    }
    node.map(|n| n.trim().to_owned())
}

/// A test keyspace on one node: replication factor 1, consistency ONE.
fn config(node: &str, keyspace: &str) -> ScyllaConfig {
    ScyllaConfig {
        nodes: vec![node.to_owned()],
        keyspace: keyspace.to_owned(),
        replication: Replication::Simple { factor: 1 },
        consistency: "one".into(),
        // The suite checks that a sweep removes the entries it names.
        inbox_sweep: true,
        request_timeout_ms: 30_000,
        ..ScyllaConfig::default()
    }
}

fn fresh_keyspace(what: &str) -> String {
    format!("sb_{what}_{:016x}", rand::random::<u64>())
}

async fn subject() -> Option<Subject> {
    let node = node()?;
    let keyspace = fresh_keyspace("conformance");
    let store = Arc::new(
        ScyllaStore::connect(&config(&node, &keyspace))
            .await
            .unwrap_or_else(|e| panic!("connecting to {node}: {e}")),
    );
    let session = store.clone();
    Some(Subject::new(store).cleaning_up(async move {
        drop_keyspace(session.session(), &keyspace).await;
    }))
}

/// Drops a test's keyspace. Only tidying: a schema change can outlast the
/// request timeout on a loaded node, which says nothing about the test.
async fn drop_keyspace(session: &scylla::client::session::Session, keyspace: &str) {
    let dropped = session
        .query_unpaged(format!("DROP KEYSPACE IF EXISTS {keyspace}"), ())
        .await;
    if let Err(e) = dropped {
        eprintln!("could not drop keyspace {keyspace}: {e}");
    }
}

switchboard_store::conformance_tests!(subject);

/// The schema file as first released, with its keyspace named `keyspace`.
const SCHEMA_V1: &str = include_str!("schema-v1.cql");

/// Every table and column of a keyspace with its type, as the server
/// describes them.
async fn columns(store: &ScyllaStore, keyspace: &str) -> BTreeSet<(String, String, String)> {
    store
        .session()
        .query_unpaged(
            "SELECT table_name, column_name, type FROM system_schema.columns \
             WHERE keyspace_name = ?",
            (keyspace,),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .rows::<(String, String, String)>()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A keyspace made by the first released schema (version 1) and then
/// opened by this build migrates to [`SCHEMA_VERSION`]: the version is
/// recorded, its tables and columns are those of a keyspace made new, and
/// the store works on it. Opened with `create_schema` off, it is refused
/// with the way out named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_schema_migrates_to_the_current_one() {
    let Some(node) = node() else { return };
    let old = fresh_keyspace("migrated");
    let new = fresh_keyspace("new");

    // Version 1, as its store left a keyspace: every statement of its
    // file, and its version recorded.
    let current = ScyllaStore::connect(&config(&node, &new)).await.unwrap();
    let session = current.session();
    session
        .query_unpaged(
            format!(
                "CREATE KEYSPACE {old} WITH replication = \
                 {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            ),
            (),
        )
        .await
        .unwrap();
    let text: String = SCHEMA_V1
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .map(|l| format!("{l}\n"))
        .collect();
    for statement in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let upper = statement.to_ascii_uppercase();
        if upper.starts_with("CREATE KEYSPACE") || upper.starts_with("USE ") {
            continue;
        }
        let statement = statement.replacen("IF NOT EXISTS ", &format!("IF NOT EXISTS {old}."), 1);
        session.query_unpaged(statement, ()).await.unwrap();
    }
    session
        .query_unpaged(
            format!(
                "INSERT INTO {old}.schema_version (component, version, applied_at) \
                 VALUES ('store', 1, 0)"
            ),
            (),
        )
        .await
        .unwrap();
    // A message it holds live (its idempotency key and row), and a bucket
    // it archived: the per-sender index of version 7 is filled from them.
    // A system message beside it: the unread counts' index of version 9
    // holds the first only.
    let live = switchboard_store::conformance::text_message("c", 7, "ann", "p", "m7");
    let mut system = switchboard_store::conformance::text_message("c", 8, "ann", "p", "m8");
    system.content = Some(
        serde_json::from_value(serde_json::json!({
            "kind": "system", "event": "members_added", "actor": "ann", "user_ids": ["bob"]
        }))
        .unwrap(),
    );
    for (cql, body) in [
        (
            format!(
                "INSERT INTO {old}.messages (tenant, conversation_id, day, seq, body) \
                 VALUES ('mig', 'c', 20000, 8, ?)"
            ),
            Some(serde_json::to_string(&system).unwrap()),
        ),
        (
            format!(
                "INSERT INTO {old}.sent (tenant, conversation_id, sender_id, client_msg_id, \
                 seq, day) VALUES ('mig', 'c', 'ann', 'm7', 7, 20000)"
            ),
            None,
        ),
        (
            format!(
                "INSERT INTO {old}.messages (tenant, conversation_id, day, seq, body) \
                 VALUES ('mig', 'c', 20000, 7, ?)"
            ),
            Some(serde_json::to_string(&live).unwrap()),
        ),
        (
            format!(
                "INSERT INTO {old}.buckets (tenant, conversation_id, day, first_seq, last_seq, \
                 archive_object) VALUES ('mig', 'c', 19999, 1, 6, 'archive/mig/c/19999')"
            ),
            None,
        ),
    ] {
        match body {
            Some(body) => session.query_unpaged(cql, (body,)).await.unwrap(),
            None => session.query_unpaged(cql, ()).await.unwrap(),
        };
    }

    let refused = ScyllaStore::connect(&ScyllaConfig {
        create_schema: false,
        ..config(&node, &old)
    })
    .await
    .err()
    .expect("an old schema is refused without create_schema");
    assert!(
        refused.to_string().contains("schema version 1,"),
        "{refused}"
    );

    let migrated = Arc::new(ScyllaStore::connect(&config(&node, &old)).await.unwrap());
    let (version,) = migrated
        .session()
        .query_unpaged(
            format!("SELECT version FROM {old}.schema_version WHERE component = 'store'"),
            (),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .first_row::<(i32,)>()
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(
        columns(&migrated, &old).await,
        columns(&current, &new).await
    );

    // The index was filled: the live message from its key; the archived
    // bucket is marked for the archive layer to read whole.
    let key = switchboard_store::conformance::key("mig", "c");
    let ann = switchboard_store::conformance::user("ann");
    let rows = migrated.sent_by(&key, &ann, None, 10).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].seq, rows[0].message.as_ref()), (7, Some(&live)));
    let buckets = migrated.archived_buckets(&key, 0, u64::MAX).await.unwrap();
    assert_eq!(buckets.len(), 1);
    assert!(!buckets[0].senders_indexed);
    // The unread index keeps the messages that do not count: the system
    // message, not the text.
    let uncounted: Vec<(i64,)> = migrated
        .session()
        .query_unpaged(
            format!(
                "SELECT seq FROM {old}.uncounted \
                 WHERE tenant = 'mig' AND conversation_id = 'c'"
            ),
            (),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .rows::<(i64,)>()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(uncounted, vec![(8,)]);

    // The store works on the migrated keyspace.
    let store: Arc<dyn Store> = migrated.clone();
    switchboard_store::conformance::appends_continue_seq_without_gaps(&store).await;
    switchboard_store::conformance::reactions_are_idempotent_bounded_and_the_readers_own(&store)
        .await;

    for keyspace in [&old, &new] {
        drop_keyspace(session, keyspace).await;
    }
}

/// The writer fence (`fence.rs`): two store handles stand for two workers
/// on one cluster. After a second claim of a partition, the first
/// writer's commits are refused with `Fenced` and write nothing, however
/// right its `expected_last_seq`; the second's go on. A claim of another
/// partition fences nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_claimed_over_commits_nothing() {
    use switchboard_store::conformance::{check_seeded_conversation, key, text_message};
    use switchboard_store::{Mutation, StoreError};

    let Some(node) = node() else { return };
    let keyspace = fresh_keyspace("fence");
    let first = ScyllaStore::connect(&config(&node, &keyspace))
        .await
        .unwrap();
    let second = ScyllaStore::connect(&config(&node, &keyspace))
        .await
        .unwrap();
    let (t, c) = ("fence", "c");
    switchboard_store::conformance::seed_conversation(&first, t, c, &["a", "b"], 1).await;
    let append = |expected: u64, id: &str| Mutation::Append {
        key: key(t, c),
        expected_last_seq: expected,
        messages: vec![text_message(c, expected + 1, "a", "phone", id)],
        inbox: true,
    };

    let old = first.claim_writer(5).await.unwrap();
    first.commit_as(old, vec![append(1, "m2")]).await.unwrap();
    let other = second.claim_writer(6).await.unwrap();
    first.commit_as(old, vec![append(2, "m3")]).await.unwrap();
    check_seeded_conversation(&first, t, c, 3).await;

    let new = second.claim_writer(5).await.unwrap();
    assert!(
        new.epoch > old.epoch && new.partition == 5,
        "{new:?} {old:?}"
    );
    let refused = first.commit_as(old, vec![append(3, "m4")]).await;
    assert!(matches!(refused, Err(StoreError::Fenced(_))), "{refused:?}");
    check_seeded_conversation(&second, t, c, 3).await;
    second.commit_as(new, vec![append(3, "m4")]).await.unwrap();
    check_seeded_conversation(&first, t, c, 4).await;
    // The first writer claims again (its lease came back): now the second
    // is fenced.
    let again = first.claim_writer(5).await.unwrap();
    let refused = second.commit_as(new, vec![append(4, "m5")]).await;
    assert!(matches!(refused, Err(StoreError::Fenced(_))), "{refused:?}");
    first.commit_as(again, vec![append(4, "m5")]).await.unwrap();
    assert_eq!(other.partition, 6);
    check_seeded_conversation(&second, t, c, 5).await;

    drop_keyspace(first.session(), &keyspace).await;
}
