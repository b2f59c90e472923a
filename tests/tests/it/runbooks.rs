//! The repair runbooks of `deploy/runbooks.md`: each incident made on
//! purpose on a live deployment, then repaired by the runbook's commands
//! as written, run by the real NATS CLI (`switchboard_tests::nats_cli`),
//! and the state checked afterwards. The docs' example values (partition
//! 3, sequence numbers, a revision) are replaced by this deployment's. A
//! command added to a runbook without a check here fails the test.

use std::time::Duration;

use switchboard_protocol::{ConversationKind, ErrorCode};
use switchboard_tests::cluster::TENANT;
use switchboard_tests::nats_cli::{self, expect};
use switchboard_tests::{Cluster, ClusterSpec, eventually};

use crate::support::*;

const RUNBOOKS: &str = "deploy/runbooks.md";

/// "A parked command that never clears": a send parked because its
/// conversation's row was damaged; the row restored, the runbook gives
/// the send back to its writer and empties `SB_PARKED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_command_is_given_back_once_its_cause_is_fixed() {
    let mut cluster = Cluster::start(ClusterSpec {
        partitions: 1,
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    send_acked(&mut alice, &conv, "p0", "before").await;
    cluster
        .wait_for_writers_acked(1, Duration::from_secs(10))
        .await;
    let good = swap_conversation_row(&mut cluster, &conv, b"{ not a row".to_vec()).await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    alice
        .send(&send_frame(&conv, "p1", "parked then given back"))
        .await
        .unwrap();
    let (code, _, id, _) = expect_error(&mut alice).await;
    assert_eq!((code, id.as_deref()), (ErrorCode::Internal, Some("p1")));
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let mut parked = js.get_stream("SB_PARKED").await.unwrap();
    let seq = parked.info().await.unwrap().state.last_sequence;
    assert_eq!(parked.info().await.unwrap().state.messages, 1);
    // The cause fixed: the row as it was.
    swap_conversation_row(&mut cluster, &conv, good).await;

    let server = cluster.nats.url();
    let dir = tempfile::tempdir().unwrap();
    let section = "## A parked command that never clears";
    for line in nats_cli::documented(RUNBOOKS, section) {
        let line = line
            .replace("SB_PARKED 1", &format!("SB_PARKED {seq}"))
            .replace("--start-sequence 1", &format!("--start-sequence {seq}"))
            .replace("sb.in.3.acme.c:7301", &format!("sb.in.0.{TENANT}.{conv}"));
        let ran = nats_cli::run_at(dir.path(), &server, &line).await;
        if line == "nats stream view SB_PARKED" {
            expect(
                &ran,
                &["Sb-Parked-Error", &format!("sb.parked.0.{TENANT}.{conv}")],
            );
        } else if line.starts_with("nats sub 'sb.parked.>' --stream SB_PARKED ") {
            expect(&ran, &[]);
            let body = std::fs::read_to_string(dir.path().join("cmd.json")).unwrap();
            assert!(body.contains("parked then given back"), "{body}");
        } else if line.starts_with("nats pub sb.in.0.") {
            expect(&ran, &[]);
            let bob = cluster.rest(0, "bob");
            eventually("the send is stored", Duration::from_secs(15), || async {
                let page = bob.history(&conv, Default::default()).await.ok()?;
                page.messages
                    .iter()
                    .any(|m| text_of(m) == "parked then given back")
                    .then_some(())
            })
            .await;
        } else if line.starts_with("nats stream rmm SB_PARKED ") {
            expect(&ran, &[]);
            assert_eq!(parked.info().await.unwrap().state.messages, 0);
        } else {
            panic!("{line:?} is documented but not checked here");
        }
    }
    // nats/README.md's section says only where to look.
    for line in nats_cli::documented("nats/README.md", "## Stream `SB_PARKED`") {
        assert_eq!(line, "nats stream view SB_PARKED");
        expect(&nats_cli::run(&server, &line, &[]).await, &[]);
    }
    // The partition goes on as before.
    send_acked(&mut alice, &conv, "p2", "after").await;
}

/// "A writer's consumer deleted by mistake" and "A poison message in an
/// ingest stream": partition 3 loses its writer's consumer to a `nats
/// consumer rm`, then gets a message that is no command; the runbooks'
/// checks show it healed, and sends there are acked throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_writer_consumer_and_a_poison_message_heal_by_themselves() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let partitions = 8;
    cluster
        .wait_for_writers(partitions, Duration::from_secs(30))
        .await;
    let conv = conversation_on(&cluster, 3, partitions).await;
    let mut ann = cluster.ws(0, "rb_ann", "phone").await;
    send_acked(&mut ann, &conv, "w0", "before").await;
    let server = cluster.nats.url();
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let ingest = js.get_stream("SB_INGEST_3").await.unwrap();

    // The mistake.
    expect(
        &nats_cli::run(&server, "nats consumer rm SB_INGEST_3 writer-p3 -f", &[]).await,
        &[],
    );
    for line in nats_cli::documented(RUNBOOKS, "## A writer's consumer deleted by mistake") {
        match line.as_str() {
            "nats kv get sb_workers p.3" => {
                expect(&nats_cli::run(&server, &line, &[]).await, &["p.3"]);
            }
            "nats consumer info SB_INGEST_3 writer-p3" => {
                let ran = eventually("the writer's consumer", Duration::from_secs(10), || {
                    let (server, line) = (server.clone(), line.clone());
                    async move {
                        let ran = nats_cli::run(&server, &line, &[]).await;
                        ran.ok.then_some(ran)
                    }
                })
                .await;
                expect(&ran, &["writer-p3", "sb.in.3.>"]);
            }
            "nats stream info SB_INGEST_3" => {
                expect(&nats_cli::run(&server, &line, &[]).await, &["SB_INGEST_3"]);
            }
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    send_acked(&mut ann, &conv, "w1", "after the consumer came back").await;
    assert!(ingest.consumer_info("writer-p3").await.is_ok());

    // The poison.
    let poison = format!("nats pub sb.in.3.{TENANT}.{conv} 'not a command'");
    expect(&nats_cli::run(&server, &poison, &[]).await, &[]);
    eventually("the poison is dropped", Duration::from_secs(10), || async {
        cluster
            .logs()
            .contains("dropping an undecodable command")
            .then_some(())
    })
    .await;
    send_acked(&mut ann, &conv, "w2", "after the poison").await;
    for line in nats_cli::documented(RUNBOOKS, "## A poison message in an ingest stream") {
        let ran = nats_cli::run(&server, &line, &[]).await;
        match line.as_str() {
            // What is kept: commands are purged about a second after their
            // writer handled them, so the stream may hold nothing now.
            "nats stream view SB_INGEST_3" => {
                assert!(ran.ok || ran.text.contains("no message"), "{ran:?}");
            }
            "nats consumer info SB_INGEST_3 writer-p3" => {
                expect(&ran, &["writer-p3", "sb.in.3.>"]);
            }
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
}

/// "A stream that lost its leader": on three NATS nodes, partition 3's
/// stream leader is stepped down by the runbook; another replica leads
/// and the partition's sends are acked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_leader_is_stepped_down_and_the_partition_goes_on() {
    let cluster = Cluster::start(ClusterSpec {
        nats_nodes: 3,
        ..Default::default()
    })
    .await;
    let partitions = 8;
    cluster
        .wait_for_writers(partitions, Duration::from_secs(60))
        .await;
    let conv = conversation_on(&cluster, 3, partitions).await;
    let mut ann = cluster.ws(0, "rb_ann", "phone").await;
    send_acked(&mut ann, &conv, "l0", "before").await;
    let server = cluster.nats.url();
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let mut ingest = js.get_stream("SB_INGEST_3").await.unwrap();
    let leader = |info: &async_nats::jetstream::stream::Info| {
        info.cluster.as_ref().and_then(|c| c.leader.clone())
    };
    let before = leader(ingest.info().await.unwrap()).expect("a leader");

    for line in nats_cli::documented(RUNBOOKS, "## A stream that lost its leader") {
        let ran = nats_cli::run(&server, &line, &[]).await;
        match line.as_str() {
            "nats stream info SB_INGEST_3" => expect(&ran, &["Leader", &before]),
            "nats stream cluster step-down SB_INGEST_3" => {
                expect(&ran, &[]);
                eventually("another leader", Duration::from_secs(15), || {
                    let mut ingest = ingest.clone();
                    let before = before.clone();
                    async move {
                        let now = leader(ingest.info().await.ok()?)?;
                        (now != before).then_some(())
                    }
                })
                .await;
            }
            "nats stream report" => expect(&ran, &["SB_INGEST_3"]),
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    send_acked(&mut ann, &conv, "l1", "after the step-down").await;
    assert_ne!(leader(ingest.info().await.unwrap()), Some(before.clone()));

    // nats/README.md, "Clusters": the same, by hand.
    for line in nats_cli::documented("nats/README.md", "## Clusters") {
        match line.as_str() {
            "nats stream report" => {
                expect(&nats_cli::run(&server, &line, &[]).await, &["SB_INGEST_3"]);
            }
            "nats stream cluster step-down SB_INGEST_3" => {
                let was = leader(ingest.info().await.unwrap()).expect("a leader");
                expect(&nats_cli::run(&server, &line, &[]).await, &[]);
                eventually("another leader again", Duration::from_secs(15), || {
                    let (mut ingest, was) = (ingest.clone(), was.clone());
                    async move {
                        let now = leader(ingest.info().await.ok()?)?;
                        (now != was).then_some(())
                    }
                })
                .await;
            }
            // Needs the system account's user, which this unsecured
            // cluster has not: run as written on the shipped secure
            // cluster by secured_backbone.rs (the same line as its README).
            "nats --context sb-monitor server report jetstream" => {}
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    send_acked(&mut ann, &conv, "l2", "after the second step-down").await;
}

/// "A KV record corrupted by hand": a tenant's record in `sb_tenants`
/// overwritten with something that is not JSON, put back from the
/// bucket's history by the runbook; the tenant's tokens work after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_record_corrupted_by_hand_is_put_back_from_its_history() {
    const SECRET: &str = "initech-secret-0123456789";
    let cluster = Cluster::start(ClusterSpec::with_operator_api()).await;
    create_tenant_record(&cluster, "initech", SECRET).await;
    let server = cluster.nats.url();
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let tenants = js.get_key_value("sb_tenants").await.unwrap();
    let good = tenants.entry("initech").await.unwrap().unwrap().revision;

    // The damage.
    expect(
        &nats_cli::run(&server, "nats kv put sb_tenants initech '{not json'", &[]).await,
        &[],
    );
    eventually(
        "every process ignores it",
        Duration::from_secs(10),
        || async {
            cluster
                .logs()
                .contains("ignoring an sb_tenants record")
                .then_some(())
        },
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    for line in nats_cli::documented(RUNBOOKS, "## A KV record corrupted by hand") {
        let line = line.replace("--revision 2", &format!("--revision {good}"));
        let ran = nats_cli::run_at(dir.path(), &server, &line).await;
        match line.as_str() {
            "nats kv get sb_tenants initech --raw" => expect(&ran, &["{not json"]),
            "nats kv history sb_tenants initech" => {
                expect(&ran, &["initech", &good.to_string()]);
            }
            l if l.starts_with("nats kv get sb_tenants initech --revision ") => {
                expect(&ran, &[]);
                let saved = std::fs::read_to_string(dir.path().join("initech.json")).unwrap();
                assert!(saved.contains("\"id\":\"initech\""), "{saved}");
            }
            l if l.starts_with("nats kv put sb_tenants initech ") => {
                expect(&ran, &[]);
                let now = tenants.get("initech").await.unwrap().unwrap();
                let record: serde_json::Value = serde_json::from_slice(&now).unwrap();
                assert_eq!(record["id"], "initech");
            }
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    // The tenant's users come in.
    let token = switchboard_client::mint_hs256(
        SECRET,
        &switchboard_client::TokenSpec::new("initech", "milton", Some("desk"), 3600),
    )
    .unwrap();
    eventually("initech's token works", Duration::from_secs(10), || async {
        switchboard_tests::connect_ws(&cluster.gateways[0].ws(), &token)
            .await
            .ok()
    })
    .await;
}
