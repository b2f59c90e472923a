//! The operator commands of our docs, run by the real NATS CLI as
//! written (`switchboard_tests::nats_cli`), against a live deployment,
//! each checked for what the docs say it shows or does. A command added
//! to a checked section without a check here fails the test.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;
use switchboard_tests::cluster::{OPERATOR_TOKEN, SECRET, TENANT};
use switchboard_tests::nats_cli::{self, Ran};
use switchboard_tests::{Cluster, ClusterSpec, eventually};

use crate::support::*;

const HOOK_SECRET: &str = "acme-webhook-secret-0123";

fn expect(ran: &Ran, shows: &[&str]) {
    assert!(ran.ok, "`{}` failed:\n{}", ran.line, ran.text);
    for s in shows {
        assert!(
            ran.text.contains(s),
            "`{}` does not show {s:?}:\n{}",
            ran.line,
            ran.text
        );
    }
}

/// nats/README.md, "Streams `SB_EVENTS` and `SB_EVENTS_DEAD`": a tenant
/// with a webhook that refuses, a message, then every command of the
/// section.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_commands_of_the_docs_work_as_written() {
    let mut spec = ClusterSpec::with_operator_api();
    spec.extra_config
        .push_str("\n[push]\nallow_private_targets = true\n");
    let cluster = Cluster::start(spec).await;
    // The docs' tenant, `acme`, with a record in sb_tenants (webhooks
    // live there) beside the configuration file's.
    create_tenant_record(&cluster, TENANT, SECRET).await;
    let (url, _) = hook_endpoint(StatusCode::BAD_REQUEST).await;
    let admin = cluster.rest_as(0, TENANT, "boss", true);
    let hooks =
        json!({"webhooks": [{"url": url, "secret": HOOK_SECRET, "events": ["message.created"]}]});
    eventually("the webhook is set", Duration::from_secs(10), || async {
        let (status, _) = call(&admin, "PUT", "/v1/admin/webhooks", Some(hooks.clone())).await;
        (status == 200).then_some(())
    })
    .await;
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let events = js.get_stream("SB_EVENTS").await.unwrap();
    eventually("the tenant's consumer", Duration::from_secs(10), || {
        let events = events.clone();
        async move { events.consumer_info("webhooks_acme").await.ok() }
    })
    .await;
    let conv = cluster
        .create(
            switchboard_protocol::ConversationKind::Group,
            "ann",
            &["bob"],
        )
        .await;
    let mut ws = cluster.ws(0, "ann", "phone").await;
    send_acked(&mut ws, &conv, "cli-1", "hello operators").await;
    let dead = js.get_stream("SB_EVENTS_DEAD").await.unwrap();
    eventually("the dead letter", Duration::from_secs(20), || {
        let dead = dead.clone();
        async move {
            dead.get_last_raw_message_by_subject("sb.eventsdead.acme")
                .await
                .ok()
        }
    })
    .await;

    let server = cluster.nats.url();
    let commands = nats_cli::documented(
        "nats/README.md",
        "## Streams `SB_EVENTS` and `SB_EVENTS_DEAD`",
    );
    for line in &commands {
        let ran = nats_cli::run(&server, line, &[]).await;
        match line.as_str() {
            "nats stream view SB_EVENTS"
            | "nats stream view SB_EVENTS --subject sb.events.acme" => {
                expect(
                    &ran,
                    &["sb.events.acme", "hello operators", "message.created"],
                );
            }
            "nats consumer add SB_EVENTS mine --pull --filter sb.events.acme --deliver new --ack explicit --defaults" =>
            {
                expect(&ran, &["mine"]);
                let info = events.consumer_info("mine").await.unwrap();
                assert_eq!(info.config.filter_subject, "sb.events.acme");
            }
            "nats consumer info SB_EVENTS webhooks_acme" => {
                expect(&ran, &["webhooks_acme", "sb.events.acme", "500"]);
            }
            "nats consumer ls SB_EVENTS" => expect(&ran, &["webhooks_acme"]),
            "nats stream view SB_EVENTS_DEAD" => {
                expect(
                    &ran,
                    &["sb.eventsdead.acme", "Sb-Webhook-Url", "hello operators"],
                );
            }
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    drop(ws);
}

/// Whether a documented line makes a bucket by hand: `nats kv add`, and
/// the `nats stream edit KV_<bucket>` that follows it.
fn recreates(line: &str) -> bool {
    line.starts_with("nats kv add ") || line.starts_with("nats stream edit KV_")
}

/// A documented `nats kv add` line run on an empty server, with the
/// `nats stream edit KV_<bucket>` lines that follow it in the docs: the
/// bucket they make has the settings of the one Switchboard made on the
/// live deployment (`live`), from `nats/kv/*.json`.
async fn check_kv_add(section: &[String], live: &async_nats::jetstream::Context) {
    let lines: Vec<&String> = section.iter().filter(|l| recreates(l)).collect();
    assert!(!lines.is_empty(), "no `nats kv add` in {section:?}");
    let dir = tempfile::tempdir().unwrap();
    let nats = switchboard_tests::proc::Nats::start(dir.path()).await;
    for line in &lines {
        let ran = if line.starts_with("nats stream edit KV_") {
            nats_cli::run_answering_yes(&nats.url(), line).await
        } else {
            nats_cli::run(&nats.url(), line, &[]).await
        };
        expect(&ran, &[]);
    }
    let line = &lines[0];
    let bucket = line
        .split_whitespace()
        .nth(3)
        .unwrap_or_else(|| panic!("no bucket in {line}"));
    let stream = format!("KV_{bucket}");
    let js = async_nats::jetstream::new(nats.client().await);
    let mut made = js
        .get_stream(&stream)
        .await
        .unwrap_or_else(|e| panic!("`{line}` made no bucket: {e}"));
    let made = made.info().await.unwrap().config.clone();
    let mut ours = live.get_stream(&stream).await.unwrap();
    let ours = ours.info().await.unwrap().config.clone();
    assert_eq!(
        made.max_messages_per_subject, ours.max_messages_per_subject,
        "{line}: history"
    );
    assert_eq!(made.max_age, ours.max_age, "{line}: ttl");
    assert_eq!(made.num_replicas, ours.num_replicas, "{line}: replicas");
    assert_eq!(
        format!("{:?}", made.storage),
        format!("{:?}", ours.storage),
        "{line}: storage"
    );
    assert_eq!(
        made.subject_delete_marker_ttl, ours.subject_delete_marker_ttl,
        "{line}: limit markers"
    );
    assert_eq!(made.allow_rollup, ours.allow_rollup, "{lines:?}: rollups");
}

/// nats/README.md, "Stream `SB_INDEX`", "KV bucket `sb_workers`" and
/// "KV bucket `sb_tenants`": what a search replica reads, who writes each
/// partition, and the tenants' records, each command as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_worker_and_tenant_commands_of_the_docs_work_as_written() {
    let mut cluster = Cluster::start(ClusterSpec::with_operator_api()).await;
    cluster.add_search().await;
    create_tenant_record(&cluster, "initech", "initech-secret-0123456789").await;
    let conv = cluster
        .create(
            switchboard_protocol::ConversationKind::Group,
            "ann",
            &["bob"],
        )
        .await;
    let mut ws = cluster.ws(0, "ann", "phone").await;
    send_acked(&mut ws, &conv, "cli-1", "lunch at noon").await;
    cluster.wait_for_writers(8, Duration::from_secs(30)).await;
    let server = cluster.nats.url();
    let live = async_nats::jetstream::new(cluster.nats.client().await);

    let mut checked = 0;
    for heading in [
        "## Stream `SB_INDEX`",
        "## KV bucket `sb_workers`",
        "## KV bucket `sb_tenants`",
    ] {
        for line in nats_cli::documented("nats/README.md", heading) {
            checked += 1;
            match line.as_str() {
                "nats stream info SB_INDEX" => {
                    expect(
                        &nats_cli::run(&server, &line, &[]).await,
                        &["SB_INDEX", "Messages"],
                    );
                }
                "nats stream view SB_INDEX --subject 'sb.index.>'" => {
                    expect(
                        &nats_cli::run(&server, &line, &[]).await,
                        &["sb.index.", "lunch at noon"],
                    );
                }
                "nats req sb.search.0 '{\"tenant\":\"acme\",\"conversations\":[\"c:1\"],\"q\":\"lunch\",\"limit\":5,\"offset\":0}'" =>
                {
                    expect(&nats_cli::run(&server, &line, &[]).await, &["\"hits\""]);
                }
                "nats kv ls sb_workers" => {
                    expect(&nats_cli::run(&server, &line, &[]).await, &["p.3", "w."]);
                }
                "nats kv get sb_workers p.3" => {
                    expect(
                        &nats_cli::run(&server, &line, &[]).await,
                        &["sb_workers", "p.3"],
                    );
                }
                "nats kv watch sb_workers" => {
                    expect(&nats_cli::run_for(&server, &line, 3).await, &["p.3"]);
                }
                "nats kv add sb_workers --history 1 --ttl 20s --storage file --replicas 1" => {
                    check_kv_add(std::slice::from_ref(&line), &live).await;
                }
                "nats kv ls sb_tenants" => {
                    expect(&nats_cli::run(&server, &line, &[]).await, &["initech"]);
                }
                "nats kv get sb_tenants initech" => {
                    expect(
                        &nats_cli::run(&server, &line, &[]).await,
                        &["\"id\":\"initech\""],
                    );
                }
                "nats kv history sb_tenants initech" => {
                    expect(
                        &nats_cli::run(&server, &line, &[]).await,
                        &["initech", "PUT"],
                    );
                }
                "nats kv del sb_tenants initech -f" => {
                    let ran = nats_cli::run(&server, &line, &[]).await;
                    expect(&ran, &[]);
                    // As `switchboard tenant delete`: the operator API no
                    // longer knows it.
                    eventually("the tenant is gone", Duration::from_secs(10), || async {
                        let (status, _) = cluster
                            .operator(
                                reqwest::Method::GET,
                                "/v1/operator/tenants/initech",
                                None,
                                Some(OPERATOR_TOKEN),
                            )
                            .await;
                        (status == 404).then_some(())
                    })
                    .await;
                }
                "nats kv add sb_tenants --history 16 --storage file --replicas 1" => {
                    check_kv_add(std::slice::from_ref(&line), &live).await;
                }
                other => panic!("{other:?} is documented but not checked here"),
            }
        }
    }
    assert_eq!(checked, 12);
    drop(ws);
}

/// nats/README.md, the KV buckets gateways and workers keep per user and
/// device: push tokens and collapse marks, node ids, presence and the
/// key directory. An example value of the docs (`n137`) is replaced by
/// one that exists here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kv_bucket_commands_of_the_docs_work_as_written() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let bob = switchboard_client::RestClient::new(
        &cluster.gateways[0].http(),
        &cluster.token("bob", "phone"),
    );
    let (status, body) = call(
        &bob,
        "PUT",
        "/v1/devices/phone/push",
        Some(json!({"provider": "fcm", "token": "bob-phone-token"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut account = vodozemac::olm::Account::new();
    crate::e2ee::publish(&cluster, "bob", "phone", &mut account, 3).await;
    let _ann = cluster.ws(0, "ann", "phone").await;
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let nodes = js.get_key_value("sb_nodes").await.unwrap();
    let node: String = {
        let mut keys = nodes.keys().await.unwrap();
        futures::StreamExt::next(&mut keys).await.unwrap().unwrap()
    };
    let server = cluster.nats.url();
    let run = |line: String| {
        let server = server.clone();
        async move { nats_cli::run(&server, &line, &[]).await }
    };

    let tokens = nats_cli::documented(
        "nats/README.md",
        "## KV buckets `sb_push_tokens` and `sb_push_collapse`",
    );
    for line in &tokens {
        match line.as_str() {
            "nats kv get sb_push_tokens acme.bob" => {
                expect(&run(line.clone()).await, &["bob-phone-token", "fcm"]);
            }
            "nats kv del sb_push_tokens acme.bob -f" => {
                expect(&run(line.clone()).await, &[]);
                let kv = js.get_key_value("sb_push_tokens").await.unwrap();
                assert!(kv.get("acme.bob").await.unwrap().is_none(), "{line}");
            }
            "nats kv ls sb_push_collapse" => {
                let ran = run(line.clone()).await;
                assert!(ran.ok || ran.text.contains("No keys found"), "{ran:?}");
            }
            l if recreates(l) => {}
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    check_kv_add(&tokens, &js).await;

    let node_lines = nats_cli::documented("nats/README.md", "## KV bucket `sb_nodes`");
    for line in &node_lines {
        match line.as_str() {
            "nats kv ls sb_nodes" => expect(&run(line.clone()).await, &[node.as_str()]),
            "nats kv get sb_nodes n137" => {
                let line = line.replace("n137", &node);
                expect(&run(line).await, &[node.as_str()]);
            }
            l if recreates(l) => {}
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    check_kv_add(&node_lines, &js).await;

    let presence = nats_cli::documented("nats/README.md", "## KV bucket `sb_presence`");
    for line in &presence {
        match line.as_str() {
            "nats kv ls sb_presence" => expect(&run(line.clone()).await, &["acme.ann."]),
            "nats kv watch sb_presence" => {
                expect(&nats_cli::run_for(&server, line, 3).await, &["acme.ann."]);
            }
            l if recreates(l) => {}
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    check_kv_add(&presence, &js).await;

    let keys = nats_cli::documented("nats/README.md", "## KV bucket `sb_keys`");
    for line in &keys {
        match line.as_str() {
            "nats kv get sb_keys acme.bob.phone --raw" => {
                expect(
                    &run(line.clone()).await,
                    &["identity_key", "one_time_prekeys"],
                );
            }
            "nats kv get sb_keys acme.bob" => expect(&run(line.clone()).await, &["phone"]),
            "nats kv del sb_keys acme.bob.phone -f" => {
                expect(&run(line.clone()).await, &[]);
                let kv = js.get_key_value("sb_keys").await.unwrap();
                assert!(kv.get("acme.bob.phone").await.unwrap().is_none(), "{line}");
            }
            l if recreates(l) => {}
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    check_kv_add(&keys, &js).await;
}
