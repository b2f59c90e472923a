//! The operator commands of our docs, run by the real NATS CLI as
//! written (`switchboard_tests::nats_cli`), against a live deployment,
//! each checked for what the docs say it shows or does. A command added
//! to a checked section without a check here fails the test.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;
use switchboard_tests::cluster::{OPERATOR_TOKEN, TENANT};
use switchboard_tests::nats_cli::{self, expect};
use switchboard_tests::{Cluster, ClusterSpec, eventually};

use crate::support::*;

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
    let (url, _) = hook_endpoint(StatusCode::BAD_REQUEST).await;
    give_tenant_a_webhook(&cluster, &url).await;
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
pub(crate) async fn check_kv_add(section: &[String], live: &async_nats::jetstream::Context) {
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
                "nats kv get sb_tenants initech --raw" => {
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
            "nats kv get sb_push_tokens acme.bob --raw" => {
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

/// A `sed ... > /tmp/<file>` line of the docs, run by the shell in `dir`
/// (its `/tmp/` made `dir`'s), and the file it wrote.
fn run_sed(section: &str, file: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(switchboard_tests::workspace_root().join("nats/README.md"))
        .unwrap();
    let start = text.find(section).unwrap();
    let line = text[start..]
        .lines()
        .find(|l| l.starts_with("sed ") && l.contains(file))
        .unwrap_or_else(|| panic!("no sed line for {file} under {section}"));
    let line = line.replace("/tmp/", &format!("{}/", dir.display()));
    let status = std::process::Command::new("bash")
        .args(["-c", &line])
        .current_dir(switchboard_tests::workspace_root())
        .status()
        .unwrap();
    assert!(status.success(), "{line}");
    dir.join(file)
}

/// nats/README.md, "Streams `SB_INGEST_<N>`", "Consumers `writer-p<N>`",
/// "Stream `SB_SCHEDULED`" and "KV bucket `sb_last_seen`": commands that
/// wait for a writer (its worker stopped meanwhile), a scheduled message,
/// and a user gone offline. The stream and consumer made by hand from
/// the repository's files, on an empty server, match the live ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ingest_writer_schedule_and_last_seen_commands_of_the_docs_work_as_written() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let partitions = 8;
    cluster
        .wait_for_writers_acked(partitions, Duration::from_secs(30))
        .await;
    let conv = conversation_on(&cluster, 3, partitions).await;
    let mut ann = cluster.ws(0, "rb_ann", "phone").await;
    send_acked(&mut ann, &conv, "i0", "before").await;
    // A user who came (seen online) and went: his last-seen time is
    // recorded. This is the worker's first half second as the leader: it
    // leads as soon as it takes partition 0.
    let bob = cluster.ws(0, "rb_bob", "laptop").await;
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let presence = js.get_key_value("sb_presence").await.unwrap();
    eventually("bob online", Duration::from_secs(10), || {
        let presence = presence.clone();
        async move {
            let mut keys = presence.keys().await.ok()?;
            while let Some(k) = futures::StreamExt::next(&mut keys).await {
                if k.ok()?.starts_with("acme.rb_bob.") {
                    return Some(());
                }
            }
            None
        }
    })
    .await;
    bob.close().await;
    let last_seen = js.get_key_value("sb_last_seen").await.unwrap();
    eventually("bob's last seen", Duration::from_secs(30), || {
        let last_seen = last_seen.clone();
        async move { last_seen.get("acme.rb_bob").await.ok().flatten() }
    })
    .await;
    // A message scheduled an hour ahead.
    let send_at = switchboard_protocol::Timestamp::from_unix_ms(
        switchboard_protocol::Timestamp::now().unix_ms() + 3_600_000,
    )
    .to_rfc3339();
    let (scheduled_id, _) =
        crate::scheduled::schedule(&mut ann, &conv, "i-later", "in an hour", &send_at).await;

    // The writer stops: two sends wait in partition 3's stream.
    let mut ingest = js.get_stream("SB_INGEST_3").await.unwrap();
    let published = ingest.info().await.unwrap().state.last_sequence;
    cluster.workers[0].pause();
    for id in ["i1", "i2"] {
        ann.send(&send_frame(&conv, id, "waiting for its writer"))
            .await
            .unwrap();
    }
    let waiting = eventually("commands waiting", Duration::from_secs(10), || {
        let mut ingest = ingest.clone();
        async move {
            let last = ingest.info().await.ok()?.state.last_sequence;
            (last > published).then_some(last)
        }
    })
    .await;
    let server = cluster.nats.url();
    let root = switchboard_tests::workspace_root();
    let dir = tempfile::tempdir().unwrap();
    let empty = switchboard_tests::proc::Nats::start(&dir.path().join("empty")).await;
    let run = |line: &str| {
        let (server, line) = (server.clone(), line.to_owned());
        async move { nats_cli::run(&server, &line, &[]).await }
    };

    let section = "## Streams `SB_INGEST_<N>`";
    let mut checked = 0;
    for line in nats_cli::documented("nats/README.md", section) {
        checked += 1;
        match line.as_str() {
            "nats stream ls" => expect(&run(&line).await, &["SB_INGEST_3", "SB_EVENTS"]),
            "nats stream info SB_INGEST_3" => {
                expect(&run(&line).await, &["SB_INGEST_3", "Messages"]);
            }
            "nats stream subjects SB_INGEST_3" => {
                expect(&run(&line).await, &[&format!("sb.in.3.acme.{conv}")]);
            }
            "nats stream get SB_INGEST_3 <seq>" => {
                let line = line.replace("<seq>", &waiting.to_string());
                expect(&run(&line).await, &["waiting for its writer"]);
            }
            "nats stream add --config /tmp/SB_INGEST_3.json" => {
                let file = run_sed(section, "SB_INGEST_3.json", dir.path());
                let line = line.replace("/tmp/SB_INGEST_3.json", &file.display().to_string());
                expect(&nats_cli::run(&empty.url(), &line, &[]).await, &[]);
                let made = async_nats::jetstream::new(empty.client().await)
                    .get_stream("SB_INGEST_3")
                    .await
                    .unwrap()
                    .cached_info()
                    .config
                    .clone();
                let live = ingest.info().await.unwrap().config.clone();
                assert_eq!(made.subjects, live.subjects);
                assert_eq!(
                    format!("{:?}", made.retention),
                    format!("{:?}", live.retention)
                );
                assert_eq!(format!("{:?}", made.discard), format!("{:?}", live.discard));
                assert_eq!(made.max_bytes, live.max_bytes);
                assert_eq!(made.duplicate_window, live.duplicate_window);
            }
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    assert_eq!(checked, 5);

    let section = "## Consumers `writer-p<N>`";
    for line in nats_cli::documented("nats/README.md", section) {
        match line.as_str() {
            "nats consumer ls SB_INGEST_3" => expect(&run(&line).await, &["writer-p3"]),
            "nats consumer info SB_INGEST_3 writer-p3" => {
                expect(
                    &run(&line).await,
                    &["writer-p3", "sb.in.3.>", "Outstanding"],
                );
            }
            "nats consumer add SB_INGEST_0 --config nats/consumers/writer-p0.json" => {
                // On the empty server, beside its stream made as above.
                let file = run_sed(section, "writer-p3.json", dir.path());
                assert!(file.is_file());
                let stream = dir.path().join("SB_INGEST_0.json");
                let template =
                    std::fs::read_to_string(root.join("nats/streams/SB_INGEST.template.json"))
                        .unwrap();
                std::fs::write(&stream, template.replace("{partition}", "0")).unwrap();
                let add = format!("nats stream add --config {}", stream.display());
                expect(&nats_cli::run(&empty.url(), &add, &[]).await, &[]);
                expect(&nats_cli::run_at(&root, &empty.url(), &line).await, &[]);
                let made = async_nats::jetstream::new(empty.client().await)
                    .get_stream("SB_INGEST_0")
                    .await
                    .unwrap()
                    .consumer_info("writer-p0")
                    .await
                    .unwrap()
                    .config
                    .clone();
                assert_eq!(made.filter_subject, "sb.in.0.>");
                assert!(made.memory_storage, "its state is in memory");
            }
            other => panic!("{other:?} is documented but not checked here"),
        }
    }

    // The writer goes on: both sends are acked.
    cluster.workers[0].resume();
    for id in ["i1", "i2"] {
        expect_ack(&mut ann, id).await;
    }

    let section = "## Stream `SB_SCHEDULED`";
    let sched = js.get_stream("SB_SCHEDULED").await.unwrap();
    for line in nats_cli::documented("nats/README.md", section) {
        let line = line
            .replace("sb.sched.def.acme.ann.", "sb.sched.def.acme.rb_ann.")
            .replace("<id>", &scheduled_id);
        match line.as_str() {
            "nats stream subjects SB_SCHEDULED 'sb.sched.def.acme.>'" => {
                expect(&run(&line).await, &["sb.sched.def.acme.rb_ann."]);
            }
            "nats stream view SB_SCHEDULED --subject 'sb.sched.def.acme.rb_ann.>'" => {
                expect(&run(&line).await, &["in an hour"]);
            }
            l if l.starts_with("nats stream purge SB_SCHEDULED --subject ") => {
                expect(&run(&line).await, &[]);
                let (status, body) =
                    call(&cluster.rest(0, "rb_ann"), "GET", "/v1/scheduled", None).await;
                assert_eq!(status, 200);
                assert_eq!(body["scheduled"], json!([]), "cancelled: {body}");
                assert!(sched.clone().info().await.is_ok());
            }
            "nats consumer info SB_SCHEDULED scheduler" => {
                expect(&run(&line).await, &["scheduler", "sb.sched.due"]);
            }
            other => panic!("{other:?} is documented but not checked here"),
        }
    }

    let section = "## KV bucket `sb_last_seen`";
    let lines = nats_cli::documented("nats/README.md", section);
    for line in &lines {
        match line.as_str() {
            "nats kv get sb_last_seen demo.alice" => {
                let line = line.replace("demo.alice", "acme.rb_bob");
                expect(&run(&line).await, &["acme.rb_bob"]);
            }
            l if recreates(l) => {}
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    check_kv_add(&lines, &js).await;
}

/// A documented `nats object add` line run on an empty server: the
/// bucket it makes has the settings of the one Switchboard made on the
/// live deployment (`live`), from `nats/object/*.json`.
async fn check_object_add(line: &str, live: &async_nats::jetstream::Context) {
    let bucket = line
        .split_whitespace()
        .nth(3)
        .unwrap_or_else(|| panic!("no bucket in {line}"));
    let dir = tempfile::tempdir().unwrap();
    let nats = switchboard_tests::proc::Nats::start(dir.path()).await;
    expect(&nats_cli::run(&nats.url(), line, &[]).await, &[]);
    let stream = format!("OBJ_{bucket}");
    let made = async_nats::jetstream::new(nats.client().await)
        .get_stream(&stream)
        .await
        .unwrap_or_else(|e| panic!("`{line}` made no bucket: {e}"))
        .info()
        .await
        .unwrap()
        .config
        .clone();
    let ours = live
        .get_stream(&stream)
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .config
        .clone();
    assert_eq!(made.max_age, ours.max_age, "{line}: ttl");
    assert_eq!(made.max_bytes, ours.max_bytes, "{line}: size");
    assert_eq!(made.num_replicas, ours.num_replicas, "{line}: replicas");
    assert_eq!(
        format!("{:?} {:?}", made.storage, made.compression),
        format!("{:?} {:?}", ours.storage, ours.compression),
        "{line}: storage"
    );
}

/// nats/README.md, "KV bucket `sb_plugins`" and the three object stores,
/// and deploy/runbooks.md, "A plugin version to roll back without the
/// admin API": a tenant with two moderation versions and a shadow; the
/// bad version is rolled back with the CLI alone, then every command of
/// the sections is run as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_commands_of_the_docs_and_their_rollback_work_as_written() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(
            switchboard_protocol::ConversationKind::Group,
            "alice",
            &["bob"],
        )
        .await;
    let admin = cluster.rest_as(0, TENANT, "root", true);
    let component = switchboard_tests::plugin("word-list");
    // The good version rejects the word, the bad one lets it through.
    let good = admin
        .deploy_plugin(
            "moderation",
            component.clone(),
            &[("action", "reject")],
            None,
        )
        .await
        .unwrap();
    let bad = admin
        .deploy_plugin(
            "moderation",
            component.clone(),
            &[("action", "allow")],
            None,
        )
        .await
        .unwrap();
    admin
        .deploy_shadow_plugin("moderation", component.clone(), &[("words", "heck")])
        .await
        .unwrap();
    let running = |revision: u64| {
        let admin = admin.clone();
        async move {
            let listing = admin.plugin_versions("moderation").await.ok()?;
            (listing["running_here"].as_u64() == Some(revision)).then_some(listing)
        }
    };
    let revision = |v: &serde_json::Value| v["revision"].as_u64().unwrap();
    eventually("the bad version runs", Duration::from_secs(60), || {
        running(revision(&bad))
    })
    .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    send_acked(&mut alice, &conv, "p1", "darn").await;

    let server = cluster.nats.url();
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let plugins = js.get_key_value("sb_plugins").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let section = "## A plugin version to roll back without the admin API";
    for line in nats_cli::documented("deploy/runbooks.md", section) {
        let line = line.replace("--revision 5", &format!("--revision {}", revision(&good)));
        let ran = nats_cli::run_at(dir.path(), &server, &line).await;
        match line.as_str() {
            "nats kv history sb_plugins acme.moderation" => {
                expect(
                    &ran,
                    &[&revision(&good).to_string(), &revision(&bad).to_string()],
                );
            }
            l if l.starts_with("nats kv get sb_plugins acme.moderation --revision ") => {
                expect(&ran, &[]);
                let saved = std::fs::read_to_string(dir.path().join("good.json")).unwrap();
                assert!(saved.contains("\"activation\":\"deploy\""), "{saved}");
                assert!(saved.contains("reject"), "{saved}");
            }
            l if l.starts_with("nats kv put sb_plugins acme.moderation ") => {
                expect(&ran, &[]);
                let now = plugins.entry("acme.moderation").await.unwrap().unwrap();
                let listing = eventually("the rollback runs", Duration::from_secs(30), || {
                    running(now.revision)
                })
                .await;
                assert_eq!(listing["active"]["revision"], now.revision, "{listing}");
                assert_eq!(listing["active"]["activation"], "rollback", "{listing}");
            }
            l if l.starts_with("nats req sb.plugins.status.acme.moderation ") => {
                let now = plugins.entry("acme.moderation").await.unwrap().unwrap();
                expect(&ran, &[&format!("\"active_revision\":{}", now.revision)]);
            }
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    // The good version answers again.
    alice.send(&send_frame(&conv, "p2", "darn")).await.unwrap();
    let (code, _, _, _) = expect_error(&mut alice).await;
    assert_eq!(code, switchboard_protocol::ErrorCode::RejectedByPolicy);

    let object = format!("{TENANT}.{}", good["digest"].as_str().unwrap());
    for heading in [
        "## KV bucket `sb_plugins`",
        "## Object store `sb_plugin_code`",
        "## Object store `sb_plugin_uploads`",
        "## Object store `sb_plugin_compiled`",
    ] {
        for line in nats_cli::documented("nats/README.md", heading) {
            let line = line.replace("acme.sha256:9f2c…", &object);
            if line.starts_with("nats object add ") {
                check_object_add(&line, &js).await;
                continue;
            }
            if recreates(&line) {
                check_kv_add(std::slice::from_ref(&line), &js).await;
                continue;
            }
            if line == "nats kv watch sb_plugins" {
                let watched = nats_cli::run_for(&server, &line, 3).await;
                expect(&watched, &["acme.moderation"]);
                continue;
            }
            let ran = nats_cli::run_at(dir.path(), &server, &line).await;
            match line.as_str() {
                "nats kv ls sb_plugins" => expect(&ran, &["acme.moderation"]),
                "nats kv get sb_plugins acme.moderation --raw" => expect(&ran, &["rollback"]),
                "nats kv history sb_plugins acme.moderation" => expect(&ran, &["PUT"]),
                "nats kv del sb_plugins acme.moderation -f" => {
                    expect(&ran, &[]);
                    // The hook is off: the built-in default lets it through.
                    send_acked(&mut alice, &conv, "p3", "darn").await;
                }
                "nats kv get sb_plugins acme.moderation.shadow --raw" => {
                    expect(&ran, &["heck"]);
                }
                "nats req sb.plugins.status.acme.moderation '' --replies 0 --timeout 300ms" => {
                    expect(&ran, &["shadow_revision"]);
                }
                "nats object ls sb_plugin_code" => expect(&ran, &[&object]),
                l if l.starts_with("nats object info sb_plugin_code ") => {
                    // The digest NATS computed is the one in the name.
                    let hex = object.rsplit(':').next().unwrap();
                    expect(&ran, &[&format!("SHA-256 {hex}")]);
                }
                l if l.starts_with("nats object get sb_plugin_code ") => {
                    expect(&ran, &[]);
                    let got = std::fs::read(dir.path().join("word-list.wasm")).unwrap();
                    assert!(got == component, "the component, byte for byte");
                }
                "nats object ls sb_plugin_uploads" => {
                    // Uploads are deleted once deployed.
                    assert!(ran.ok || ran.text.contains("No entries"), "{ran:?}");
                }
                "nats object ls sb_plugin_compiled" => expect(&ran, &[&format!("{object}@")]),
                other => panic!("{other:?} is documented but not checked here"),
            }
        }
    }
}
