//! Every `nats ...` the docs name outside their code blocks (code spans
//! in running text) and in the alert texts, each with its fate: run here
//! by the real CLI and checked, run by another test (its code block, or
//! a runbook), or a verb the prose names that is no command line. A
//! command added to the docs without a fate here fails the test.

use std::collections::BTreeSet;
use std::time::Duration;

use axum::http::StatusCode;
use switchboard_tests::cluster::TENANT;
use switchboard_tests::nats_cli::{self, expect};
use switchboard_tests::{Cluster, ClusterSpec, eventually, workspace_root};

use crate::support::*;

/// The files whose running text is searched.
const DOCS: [&str; 12] = [
    "README.md",
    "docs/operations.md",
    "docs/tenants.md",
    "docs/limits.md",
    "docs/development.md",
    "docs/status.md",
    "docs/browser-client.md",
    "nats/README.md",
    "deploy/README.md",
    "deploy/runbooks.md",
    "nats/server/secure/README.md",
    "deploy/scylla/README.md",
];

/// The alert rules, whose descriptions tell operators what to type.
const ALERTS: &str = "deploy/monitoring/switchboard-rules.yml";

/// What becomes of a command the docs name.
enum Fate {
    /// Run here; its output shows each of these.
    Run(&'static [&'static str]),
    /// Run as written by another test, named.
    Elsewhere(&'static str),
    /// A verb named in the prose ("made with `nats kv add`"), not a
    /// command line.
    Named,
}

fn fate(command: &str) -> Option<Fate> {
    use Fate::*;
    Some(match command {
        "nats micro ls" => Run(&["switchboard-store", "switchboard-plugins"]),
        "nats micro info switchboard-store" => Run(&["sb.store.read", "sb.store.write"]),
        "nats micro stats switchboard-store" => Run(&["switchboard-store", "Requests"]),
        "nats sub 'sb.gw.>'" | "nats sub 'sb.gw.gw-1'" => Run(&["sb.gw."]),
        "nats sub 'sb.in.>'" => Run(&["sb.in."]),
        "nats kv ls sb_presence" => Run(&["routers."]),
        "nats stream view SB_INGEST_3" => Run(&[]),
        "nats consumer info SB_INGEST_3 writer-p3" => Run(&["writer-p3"]),
        "nats stream info SB_INDEX" => Run(&["SB_INDEX"]),
        "nats stream info SB_EVENTS" => Run(&["SB_EVENTS"]),
        "nats kv get sb_workers webhooks" => Run(&["sb_workers", "webhooks"]),
        "nats kv get sb_workers p.<N>" => Run(&["p.3"]),
        "nats consumer ls SB_EVENTS" => Run(&["webhooks_acme"]),
        "nats consumer ls KV_sb_presence" => Run(&[]),
        "nats kv ls sb_erasures" => Run(&["erase."]),
        "nats kv get sb_erasures erase.<job_id> --raw" => Run(&["erase_user", "finished_at"]),
        "nats stream view SB_PUSH_DEAD" => Run(&[]),
        "nats consumer edit SB_AUDIT audit-events --max-deliver N -f" => {
            Run(&["audit-events", "Maximum Deliveries: 6"])
        }
        "nats stream view SB_EVENTS"
        | "nats stream view SB_EVENTS --subject sb.events.acme"
        | "nats consumer info SB_EVENTS webhooks_acme"
        | "nats stream view SB_EVENTS_DEAD" => {
            Elsewhere("nats_cli::the_event_stream_commands_of_the_docs_work_as_written")
        }
        "nats server ls" | "nats server report jetstream" | "nats server info" => {
            Elsewhere("secured_backbone::the_monitoring_user_sees_every_server_and_changes_nothing")
        }
        "nats consumer rm SB_INGEST_3 writer-p3" | "nats kv get sb_workers p.3" => {
            Elsewhere("runbooks::a_deleted_writer_consumer_and_a_poison_message_heal_by_themselves")
        }
        "nats object ls sb_plugin_code" => Elsewhere(
            "nats_cli::the_plugin_commands_of_the_docs_and_their_rollback_work_as_written",
        ),
        // The single stream of releases before per-partition streams,
        // which this release deletes: the upgrade text's check that it
        // drained, never true of a deployment of this release.
        "nats stream info SB_INGEST" => Named,
        "nats stream add --config"
        | "nats kv add"
        | "nats object add"
        | "nats kv update"
        | "nats stream edit"
        | "nats stream edit KV_<bucket> --no-allow-rollup -f"
        | "nats stream edit SB_EVENTS --max-bytes"
        | "nats stream purge --seq"
        | "nats stream cluster step-down"
        | "nats server ..." => Named,
        _ => return None,
    })
}

/// The code spans of `text` outside its code blocks that start with
/// `nats `, their whitespace (line breaks) made single spaces.
fn spans(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut prose = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    for (i, part) in prose.split('`').enumerate() {
        if i % 2 == 1 && part.starts_with("nats ") {
            out.push(part.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    out
}

/// The commands the alert texts tell operators to type: `nats ` up to
/// the end of its clause.
fn alert_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.contains("description:")) {
        let mut rest = line;
        while let Some(at) = rest.find("nats ") {
            let tail = &rest[at..];
            let end = tail.find([';', '(', ')', '"', ',']).unwrap_or(tail.len());
            let mut command = tail[..end].trim().to_owned();
            // "nats consumer ls SB_EVENTS lists each ...": the command
            // ends where the sentence's verb begins.
            if let Some(cut) = command.find(" lists ") {
                command.truncate(cut);
            }
            out.push(command);
            rest = &tail[end..];
        }
    }
    out
}

/// The sections whose code blocks hold `nats` lines, and the test that
/// runs every one of them as written (each such test fails on a line of
/// its section it does not know).
const SECTIONS: &[(&str, &str, &str)] = &[
    (
        "nats/README.md",
        "## Consumer `previews` and KV bucket `sb_previews`",
        "previews::links_get_cards_after_the_ack_and_hostile_servers_get_nothing",
    ),
    (
        "nats/README.md",
        "## Streams `SB_INGEST_<N>`",
        "nats_cli::the_ingest_writer_schedule_and_last_seen_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## Streams `SB_PUSH` and `SB_PUSH_DEAD`, consumers `push-msg` and `push-send`",
        "push::pushes_reach_a_webhook_signed_collapsed_retried_and_dead_lettered",
    ),
    (
        "nats/README.md",
        "## Stream `SB_PARKED`",
        "runbooks::a_parked_command_is_given_back_once_its_cause_is_fixed",
    ),
    (
        "nats/README.md",
        "## Stream `SB_SCHEDULED`",
        "nats_cli::the_ingest_writer_schedule_and_last_seen_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## Streams `SB_EVENTS` and `SB_EVENTS_DEAD`",
        "nats_cli::the_event_stream_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## Stream `SB_INDEX`",
        "nats_cli::the_index_worker_and_tenant_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## KV buckets `sb_push_tokens` and `sb_push_collapse`",
        "nats_cli::the_kv_bucket_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## Consumers `writer-p<N>`",
        "nats_cli::the_ingest_writer_schedule_and_last_seen_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## KV bucket `sb_nodes`",
        "nats_cli::the_kv_bucket_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## KV bucket `sb_workers`",
        "nats_cli::the_index_worker_and_tenant_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## KV bucket `sb_presence`",
        "nats_cli::the_kv_bucket_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## KV bucket `sb_last_seen`",
        "nats_cli::the_ingest_writer_schedule_and_last_seen_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## KV bucket `sb_plugins`",
        "nats_cli::the_plugin_commands_of_the_docs_and_their_rollback_work_as_written",
    ),
    (
        "nats/README.md",
        "## KV bucket `sb_tenants`",
        "nats_cli::the_index_worker_and_tenant_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## Stream `SB_AUDIT` and consumer `audit-events`",
        "moderation::every_moderation_change_is_audited_and_sent_as_an_event",
    ),
    (
        "nats/README.md",
        "## KV bucket `sb_tenant_bans`",
        "moderation::a_tenant_ban_refuses_the_users_tokens_and_ends_their_sessions_everywhere",
    ),
    (
        "nats/README.md",
        "## KV bucket `sb_keys`",
        "nats_cli::the_kv_bucket_commands_of_the_docs_work_as_written",
    ),
    (
        "nats/README.md",
        "## Object store `sb_plugin_code`",
        "nats_cli::the_plugin_commands_of_the_docs_and_their_rollback_work_as_written",
    ),
    (
        "nats/README.md",
        "## Object store `sb_plugin_uploads`",
        "nats_cli::the_plugin_commands_of_the_docs_and_their_rollback_work_as_written",
    ),
    (
        "nats/README.md",
        "## Object store `sb_plugin_compiled`",
        "nats_cli::the_plugin_commands_of_the_docs_and_their_rollback_work_as_written",
    ),
    (
        "nats/README.md",
        "## Clusters",
        "runbooks::a_stream_leader_is_stepped_down_and_the_partition_goes_on",
    ),
    (
        "deploy/runbooks.md",
        "## A parked command that never clears",
        "runbooks::a_parked_command_is_given_back_once_its_cause_is_fixed",
    ),
    (
        "deploy/runbooks.md",
        "## A writer's consumer deleted by mistake",
        "runbooks::a_deleted_writer_consumer_and_a_poison_message_heal_by_themselves",
    ),
    (
        "deploy/runbooks.md",
        "## A poison message in an ingest stream",
        "runbooks::a_deleted_writer_consumer_and_a_poison_message_heal_by_themselves",
    ),
    (
        "deploy/runbooks.md",
        "## A stream that lost its leader",
        "runbooks::a_stream_leader_is_stepped_down_and_the_partition_goes_on",
    ),
    (
        "deploy/runbooks.md",
        "## A KV record corrupted by hand",
        "runbooks::a_tenant_record_corrupted_by_hand_is_put_back_from_its_history",
    ),
    (
        "deploy/runbooks.md",
        "## A plugin version to roll back without the admin API",
        "nats_cli::the_plugin_commands_of_the_docs_and_their_rollback_work_as_written",
    ),
    (
        "nats/server/secure/README.md",
        "## The system account and its `monitor` user",
        "secured_backbone::the_monitoring_user_sees_every_server_and_changes_nothing",
    ),
];

/// Whether `path` (`module::function`) names a test of this crate.
fn is_a_test(path: &str) -> bool {
    let Some((module, function)) = path.split_once("::") else {
        return false;
    };
    let file = workspace_root().join(format!("tests/tests/it/{module}.rs"));
    std::fs::read_to_string(file).is_ok_and(|text| text.contains(&format!("async fn {function}()")))
}

/// The headings of `text` over each of its code blocks' `nats` lines.
fn block_sections(text: &str) -> BTreeSet<String> {
    let (mut heading, mut in_block) = (String::new(), false);
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if !in_block && line.starts_with('#') {
            heading = line.trim_end().to_owned();
        }
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        } else if in_block && line.starts_with("nats ") {
            out.insert(heading.clone());
        }
    }
    out
}

#[test]
fn every_section_with_nats_lines_is_run_by_a_test() {
    let root = workspace_root();
    let mut missing = Vec::new();
    for file in DOCS {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for heading in block_sections(&text) {
            match SECTIONS
                .iter()
                .find(|(f, h, _)| *f == file && *h == heading)
            {
                Some((_, _, test)) if is_a_test(test) => {}
                Some((_, _, test)) => missing.push(format!("{file} {heading}: no test {test}")),
                None => missing.push(format!("{file} {heading}: run by no test")),
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn every_command_the_docs_name_has_a_fate() {
    let mut missing = Vec::new();
    for (file, command) in documented_commands() {
        match fate(&command) {
            None => missing.push(format!("{file}: `{command}`")),
            Some(Fate::Elsewhere(test)) if !is_a_test(test) => {
                missing.push(format!("{file}: `{command}`: no test {test}"));
            }
            Some(_) => {}
        }
    }
    assert!(
        missing.is_empty(),
        "named in the docs but neither run nor explained here:\n{}",
        missing.join("\n")
    );
}

fn documented_commands() -> BTreeSet<(String, String)> {
    let root = workspace_root();
    let mut all = BTreeSet::new();
    for file in DOCS {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for c in spans(&text) {
            all.insert((file.to_owned(), c));
        }
    }
    let alerts = std::fs::read_to_string(root.join(ALERTS)).unwrap();
    for c in alert_commands(&alerts) {
        all.insert((ALERTS.to_owned(), c));
    }
    all
}

/// The commands to run here, against a deployment with a message sent, a
/// webhook and an erasure done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_named_in_running_text_and_alerts_work_as_written() {
    let mut spec = ClusterSpec::with_operator_api();
    spec.extra_config
        .push_str("\n[push]\nallow_private_targets = true\n");
    let cluster = Cluster::start(spec).await;
    cluster
        .wait_for_writers_acked(8, Duration::from_secs(30))
        .await;
    let (url, _) = hook_endpoint(StatusCode::OK).await;
    give_tenant_a_webhook(&cluster, &url).await;
    let admin = cluster.rest_as(0, TENANT, "root", true);
    let conv = conversation_on(&cluster, 3, 8).await;
    let mut ann = cluster.ws(0, "rb_ann", "phone").await;
    send_acked(&mut ann, &conv, "d0", "hello").await;
    // An erasure, done.
    let (status, job) = call(&admin, "DELETE", "/v1/admin/users/rb_bob", None).await;
    assert_eq!(status, 202, "{job}");
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    eventually("the erasure is done", Duration::from_secs(30), || {
        let (admin, path) = (admin.clone(), format!("/v1/admin/jobs/{job_id}"));
        async move {
            let (_, job) = call(&admin, "GET", &path, None).await;
            job["finished_at"].is_string().then_some(())
        }
    })
    .await;
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let gateway = {
        let presence = js.get_key_value("sb_presence").await.unwrap();
        let mut keys = presence.keys().await.unwrap();
        let mut found = None;
        while let Some(k) = futures::StreamExt::next(&mut keys).await {
            let k = k.unwrap();
            if let Some(rest) = k.strip_prefix(&format!("{TENANT}.rb_ann.")) {
                found = Some(rest.to_owned());
            }
        }
        found.expect("ann's gateway")
    };
    let server = cluster.nats.url();

    let mut ran = 0;
    for (file, command) in documented_commands() {
        let Some(Fate::Run(shows)) = fate(&command) else {
            continue;
        };
        let line = command
            .replace("p.<N>", "p.3")
            // A change (the shipped 5 again is "No difference").
            .replace("--max-deliver N", "--max-deliver 6")
            .replace("erase.<job_id>", &format!("erase.{job_id}"))
            .replace("sb.gw.gw-1", &format!("sb.gw.{gateway}"));
        let result = if line.starts_with("nats sub ") {
            // A send while it listens.
            let listen = nats_cli::run_for(&server, &line, 4);
            let send = async {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                send_acked(&mut ann, &conv, &format!("sub-{ran}"), "watched").await;
            };
            let (result, ()) = tokio::join!(listen, send);
            result
        } else {
            nats_cli::run(&server, &line, &[]).await
        };
        if line == "nats stream view SB_INGEST_3" || line == "nats stream view SB_PUSH_DEAD" {
            // What is kept: possibly nothing, said so.
            assert!(
                result.ok || result.text.contains("no message"),
                "{file}: {result:?}"
            );
        } else {
            expect(&result, shows);
        }
        ran += 1;
    }
    assert!(ran >= 15, "{ran} commands run");
}
