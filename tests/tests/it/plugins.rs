//! Tenant plugins on a running cluster (F22, I4, I5): deployed, replaced,
//! rolled back and removed through the admin API; followed by every
//! gateway and worker; changing behaviour as documented; contained when
//! hostile; never running for another tenant.

use std::collections::HashSet;
use std::time::{Duration, Instant};
use switchboard_protocol::SendAck;

use base64::Engine as _;
use serde_json::Value;
use switchboard_client::rest::HistoryParams;
use switchboard_client::{RestClient, WsClient};
use switchboard_protocol::{
    ClientFrame, Content, ConversationId, ConversationKind, ErrorCode, MessageId, ServerFrame,
};
use switchboard_tests::cluster::OTHER_TENANT;
use switchboard_tests::{Cluster, ClusterSpec, TENANT, plugin, plugin_variant};

use crate::support::*;

fn revision(version: &Value) -> u64 {
    version["revision"]
        .as_u64()
        .unwrap_or_else(|| panic!("no revision in {version}"))
}

fn admin(cluster: &Cluster, gateway: usize) -> RestClient {
    cluster.rest_as(gateway, TENANT, "root", true)
}

/// A cluster of `gateways` gateways (and one worker), a group of alice
/// and `others` in tenant acme, and acme's admin on gateway 0.
async fn group(gateways: usize, others: &[&str]) -> (Cluster, String, RestClient) {
    let cluster = Cluster::start(ClusterSpec {
        gateways,
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", others)
        .await;
    let admin = admin(&cluster, 0);
    (cluster, conv, admin)
}

/// Waits until every gateway runs `revision` of the hook (`None`: none).
/// Returns how long that took.
async fn converge(cluster: &Cluster, hook: &str, revision: Option<u64>) -> Duration {
    let started = Instant::now();
    for g in 0..cluster.gateways.len() {
        let admin = admin(cluster, g);
        loop {
            let listing = admin.plugin_versions(hook).await.unwrap();
            if listing["running_here"].as_u64() == revision {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "gateway {g} still runs {} of {hook}, not {revision:?}",
                listing["running_here"]
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    started.elapsed()
}

async fn texts(rest: &RestClient, conv: &str) -> Vec<String> {
    let page = rest
        .history(
            conv,
            HistoryParams {
                limit: Some(200),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut texts: Vec<(u64, String)> = page
        .messages
        .iter()
        .filter_map(|m| match &m.content {
            Some(Content::Text { text }) => Some((m.seq, text.clone())),
            _ => None,
        })
        .collect();
    texts.sort();
    texts.into_iter().map(|(_, t)| t).collect()
}

#[tokio::test]
async fn an_admin_deploys_replaces_rolls_back_and_removes_a_moderator_on_two_gateways() {
    let (cluster, conv, admin) = group(2, &["bob"]).await;

    let err = cluster
        .rest(0, "alice")
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("forbidden"), "only admins deploy");

    // Deployed through gateway 0; gateway 1 follows within a bound.
    let v1 = admin
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap();
    assert_eq!(v1["activation"], "deploy");
    assert!(v1["digest"].as_str().unwrap().starts_with("sha256:"));
    let took = converge(&cluster, "moderation", Some(revision(&v1))).await;
    assert!(took < Duration::from_secs(5), "converged in {took:?}");

    let mut alice = cluster.ws(1, "alice", "phone").await;
    let mut bob = cluster.ws(0, "bob", "phone").await;
    // The sender's ack carries what was stored, as it differs from what
    // was sent; an ack of a send stored as sent carries no content.
    alice
        .send(&send_frame(&conv, "m1", "well darn it"))
        .await
        .unwrap();
    let shown = expect(&mut alice, "the ack of m1", |f| match f {
        ServerFrame::Ack(SendAck {
            client_msg_id,
            content,
            ..
        }) if client_msg_id.as_str() == "m1" => Some(content),
        _ => None,
    })
    .await;
    assert_eq!(
        shown,
        Some(Content::Text {
            text: "well **** it".into()
        })
    );
    assert_eq!(text_of(&expect_message(&mut bob).await), "well **** it");

    // Replaced: the same component, configured to reject.
    let v2 = admin
        .deploy_plugin(
            "moderation",
            plugin("word-list"),
            &[("action", "reject")],
            None,
        )
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(revision(&v2))).await;
    alice.send(&send_frame(&conv, "m2", "heck")).await.unwrap();
    let (code, request, id, message) = expect_error(&mut alice).await;
    assert_eq!(code, ErrorCode::RejectedByPolicy);
    assert_eq!(request.as_deref(), Some("send_message"));
    assert_eq!(id.as_deref(), Some("m2"));
    assert!(message.contains("does not allow"), "{message}");
    // An edit is moderated like a send.
    let (m1_id, _) = send_acked(&mut alice, &conv, "m1b", "fine words").await;
    expect_message(&mut bob).await;
    alice
        .send(&ClientFrame::EditMessage {
            conversation_id: ConversationId::new(&conv).unwrap(),
            message_id: m1_id,
            content: Content::Text {
                text: "heck".into(),
            },
            custom: None,
        })
        .await
        .unwrap();
    let (code, request, _, _) = expect_error(&mut alice).await;
    assert_eq!(code, ErrorCode::RejectedByPolicy);
    assert_eq!(request.as_deref(), Some("edit_message"));

    // Rolled back: masking again, the first version's configuration too.
    let v3 = admin.rollback_plugin("moderation").await.unwrap();
    assert_eq!(v3["activation"], "rollback");
    assert_eq!(v3["digest"], v1["digest"]);
    assert_eq!(v3["config"], v1["config"]);
    converge(&cluster, "moderation", Some(revision(&v3))).await;
    send_acked(&mut alice, &conv, "m3", "heck no").await;
    assert_eq!(text_of(&expect_message(&mut bob).await), "**** no");

    let listing = admin.plugin_versions("moderation").await.unwrap();
    let versions = listing["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 3, "{listing}");
    assert_eq!(versions[0]["revision"], v3["revision"], "newest first");
    assert_eq!(versions[1]["config"]["action"], "reject");
    assert_eq!(listing["active"]["revision"], v3["revision"]);

    // The other tenant has no plugin: acme's never runs for it.
    let globex = cluster.rest_as(1, OTHER_TENANT, "alice", false);
    let (g_conv, _) = globex
        .create_conversation(ConversationKind::Group, &["bob"], None)
        .await
        .unwrap();
    let g_conv = g_conv.conversation_id.as_str().to_owned();
    let mut g_alice = cluster.ws_as(1, OTHER_TENANT, "alice", "phone").await;
    send_acked(&mut g_alice, &g_conv, "g1", "darn").await;
    assert_eq!(texts(&globex, &g_conv).await, ["darn"]);
    let g_listing = cluster
        .rest_as(0, OTHER_TENANT, "root", true)
        .plugin_versions("moderation")
        .await
        .unwrap();
    assert!(g_listing["active"].is_null(), "{g_listing}");
    assert_eq!(g_listing["versions"].as_array().unwrap().len(), 0);

    // Removed: the built-in default (no moderation) applies.
    admin.remove_plugin("moderation").await.unwrap();
    converge(&cluster, "moderation", None).await;
    send_acked(&mut alice, &conv, "m4", "darn").await;
    assert_eq!(text_of(&expect_message(&mut bob).await), "darn");
    let err = admin.rollback_plugin("moderation").await.unwrap_err();
    assert_eq!(
        err.code(),
        Some("not_found"),
        "nothing deployed to roll back"
    );

    // The rejected message was never stored.
    assert_eq!(
        texts(&cluster.rest(0, "bob"), &conv).await,
        ["well **** it", "fine words", "**** no", "darn"]
    );
}

#[tokio::test]
async fn uploads_that_do_not_fit_are_refused_with_a_clear_error() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[plugins]\nmax_component_bytes = 60000\n".into(),
        ..Default::default()
    })
    .await;
    let admin = admin(&cluster, 0);
    let refused = |e: switchboard_client::RestError| (e.status().unwrap(), e.to_string());

    let (status, why) = refused(
        admin
            .deploy_plugin("moderation", b"definitely not wasm".to_vec(), &[], None)
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 400);
    assert!(why.contains("not a WebAssembly component"), "{why}");

    let (status, why) = refused(
        admin
            .deploy_plugin("moderation", plugin("edit-window"), &[], None)
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 400);
    assert!(why.contains("does not fit the moderation hook"), "{why}");

    let (status, why) = refused(
        admin
            .deploy_plugin("moderation", plugin("trap"), &[("trigger", "hello")], None)
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 400);
    assert!(why.contains("trial call"), "{why}");

    // word-list is about 80 KB, over this cluster's limit.
    let (status, why) = refused(
        admin
            .deploy_plugin("moderation", plugin("word-list"), &[], None)
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 413, "{why}");

    let (status, _) = refused(
        admin
            .deploy_plugin("spam_filter", plugin("trap"), &[], None)
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 404, "no such hook");

    let r = admin
        .raw()
        .put(format!("{}/v1/admin/plugins/moderation", admin.base()))
        .bearer_auth(admin.token())
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);

    // Nothing refused was deployed.
    let listing = admin.plugin_versions("moderation").await.unwrap();
    assert!(listing["active"].is_null(), "{listing}");
    assert_eq!(listing["versions"].as_array().unwrap().len(), 0);

    // The JSON form of an upload.
    let body = serde_json::json!({
        "component": base64::engine::general_purpose::STANDARD.encode(plugin("member-count")),
        "config": { "threshold": "2" },
    });
    let r = admin
        .raw()
        .put(format!("{}/v1/admin/plugins/fan_out", admin.base()))
        .bearer_auth(admin.token())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let version: Value = r.json().await.unwrap();
    assert_eq!(version["config"]["threshold"], "2");
}

/// `n` sequential sends of one tenant's user; how long they took.
async fn timed_sends(ws: &mut WsClient, conv: &str, prefix: &str, n: usize) -> Duration {
    let started = Instant::now();
    for i in 0..n {
        send_acked(ws, conv, &format!("{prefix}{i}"), &format!("hello {i}")).await;
    }
    started.elapsed()
}

#[tokio::test]
async fn hostile_plugins_are_contained_and_other_tenants_keep_their_speed() {
    let (cluster, conv, admin) = group(1, &["bob"]).await;
    let globex = cluster.rest_as(0, OTHER_TENANT, "carol", false);
    let (g_conv, _) = globex
        .create_conversation(ConversationKind::Group, &["dave"], None)
        .await
        .unwrap();
    let g_conv = g_conv.conversation_id.as_str().to_owned();
    let mut carol = cluster.ws_as(0, OTHER_TENANT, "carol", "phone").await;
    timed_sends(&mut carol, &g_conv, "warm", 20).await;
    let baseline = timed_sends(&mut carol, &g_conv, "base", 100).await;

    // acme's moderator spins on every message with the trigger word;
    // moderation fails closed by default.
    let spin = admin
        .deploy_plugin("moderation", plugin("spin"), &[], None)
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(revision(&spin))).await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let attacks = 40;
    let attack = async {
        let mut refused = 0;
        for i in 0..attacks {
            alice
                .send(&send_frame(&conv, &format!("a{i}"), "attack"))
                .await
                .unwrap();
            let (code, _, _, message) = expect_error(&mut alice).await;
            assert_eq!(code, ErrorCode::Unavailable, "{message}");
            refused += 1;
        }
        refused
    };
    let (refused, under_attack) =
        tokio::join!(attack, timed_sends(&mut carol, &g_conv, "busy", 100));
    assert_eq!(refused, attacks);
    eprintln!(
        "globex: 100 sends in {baseline:?} alone, {under_attack:?} beside acme's spinning plugin"
    );
    assert!(
        under_attack < baseline * 2 + Duration::from_millis(500),
        "globex slowed from {baseline:?} to {under_attack:?} while acme's plugin spun"
    );
    let counts = &admin.plugin_versions("moderation").await.unwrap()["counts_here"];
    assert_eq!(counts["calls"], attacks, "every call counted: {counts}");
    assert_eq!(
        counts["failures"], attacks,
        "every failure counted: {counts}"
    );
    let acme_history = texts(&cluster.rest(0, "bob"), &conv).await;
    assert!(
        acme_history.is_empty(),
        "fail closed stores nothing: {acme_history:?}"
    );
    let logs = cluster.logs();
    assert!(logs.contains("plugin call failed"), "failures are logged");
    assert!(
        logs.contains("plugin quarantined"),
        "a version that keeps failing is quarantined"
    );
    assert!(
        logs.contains(spin["digest"].as_str().unwrap()),
        "logs name the digest"
    );

    // Every hostile plugin, failing open: each stopped, the message
    // stored as sent, the process still serving.
    for (i, name) in [
        "spin",
        "memory-bomb",
        "deep-recursion",
        "trap",
        "huge-output",
    ]
    .into_iter()
    .enumerate()
    {
        let v = admin
            .deploy_plugin("moderation", plugin(name), &[], Some("open"))
            .await
            .unwrap();
        assert_eq!(v["on_failure"], "open");
        converge(&cluster, "moderation", Some(revision(&v))).await;
        let text = format!("attack {i}");
        let (_, seq) = send_acked(&mut alice, &conv, &format!("open{i}"), &text).await;
        assert_eq!(seq, i as u64 + 1, "{name}");
    }
    assert_eq!(texts(&cluster.rest(0, "bob"), &conv).await.len(), 5);
    send_acked(&mut carol, &g_conv, "after", "still here").await;
}

#[tokio::test]
async fn a_hot_swap_under_load_loses_nothing_and_applies_nothing_twice() {
    let (cluster, conv, admin) = group(2, &["bob"]).await;
    let v = admin
        .deploy_plugin(
            "moderation",
            plugin("word-list"),
            &[("words", "alpha")],
            None,
        )
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(revision(&v))).await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let mut bob = cluster.ws(1, "bob", "phone").await;

    // Swap between masking `alpha` and masking `beta` while alice sends.
    let swapper = {
        let admin = admin.clone();
        tokio::spawn(async move {
            for i in 0..8 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let word = if i % 2 == 0 { "beta" } else { "alpha" };
                admin
                    .deploy_plugin("moderation", plugin("word-list"), &[("words", word)], None)
                    .await
                    .unwrap();
            }
        })
    };
    let (bursts, burst) = (30, 10);
    for b in 0..bursts {
        for i in 0..burst {
            let n = b * burst + i;
            alice
                .send(&send_frame(
                    &conv,
                    &format!("m{n}"),
                    &format!("alpha beta {n}"),
                ))
                .await
                .unwrap();
        }
        for _ in 0..burst {
            expect(&mut alice, "an ack", |f| match f {
                ServerFrame::Ack(SendAck { .. }) => Some(()),
                ServerFrame::Error { message, .. } => panic!("a send failed: {message}"),
                _ => None,
            })
            .await;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    swapper.await.unwrap();

    let total = bursts * burst;
    let mut ids: HashSet<MessageId> = HashSet::new();
    let (mut alpha_masked, mut beta_masked) = (0, 0);
    for expected_seq in 1..=total as u64 {
        let m = expect_message(&mut bob).await;
        assert!(ids.insert(m.message_id), "delivered twice: {m:?}");
        assert_eq!(m.seq, expected_seq, "one gap-free order");
        let n = expected_seq - 1;
        let text = text_of(&m);
        if text == format!("***** beta {n}") {
            alpha_masked += 1;
        } else if text == format!("alpha **** {n}") {
            beta_masked += 1;
        } else {
            panic!("message {n} was moderated by neither or both versions: {text:?}");
        }
    }
    assert!(
        alpha_masked > 0 && beta_masked > 0,
        "the swaps happened mid-stream ({alpha_masked} / {beta_masked})"
    );
    let stored = texts(&cluster.rest(0, "bob"), &conv).await.len();
    assert_eq!(stored, 200.min(total), "history agrees (one page)");
}

#[tokio::test]
async fn edit_policy_and_fan_out_plugins_change_what_the_writer_does() {
    let (cluster, conv, admin) = group(2, &["bob", "carol"]).await;

    // Bob stays connected throughout, on the other gateway: a fan-out
    // change must reach members connected before it.
    let mut bob = cluster.ws(1, "bob", "phone").await;
    // The built-in policy lets the sender edit for 15 minutes.
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let (id, _) = send_acked(&mut alice, &conv, "e0", "first").await;
    alice
        .send(&edit_frame(&conv, id, "first, edited"))
        .await
        .unwrap();
    expect_update(&mut alice).await;

    // Deployed: no edits at all. Replaced: an hour. Rolled back: none again.
    let mut edits = EditProbe::default();
    let v = admin
        .deploy_plugin(
            "edit_policy",
            plugin("edit-window"),
            &[("edit_window_secs", "0")],
            None,
        )
        .await
        .unwrap();
    converge(&cluster, "edit_policy", Some(revision(&v))).await;
    let refusal = edits.until(&mut alice, &conv, true).await;
    assert!(
        refusal.contains("0 seconds"),
        "the plugin's reason: {refusal}"
    );
    let v = admin
        .deploy_plugin(
            "edit_policy",
            plugin("edit-window"),
            &[("edit_window_secs", "3600")],
            None,
        )
        .await
        .unwrap();
    converge(&cluster, "edit_policy", Some(revision(&v))).await;
    edits.until(&mut alice, &conv, false).await;
    let v = admin.rollback_plugin("edit_policy").await.unwrap();
    assert_eq!(v["config"]["edit_window_secs"], "0");
    converge(&cluster, "edit_policy", Some(revision(&v))).await;
    edits.until(&mut alice, &conv, true).await;

    // A fan-out policy that makes groups of more than two members fan out
    // on read: read marks are stored but not broadcast.
    let v = admin
        .deploy_plugin(
            "fan_out",
            plugin("member-count"),
            &[("threshold", "2")],
            None,
        )
        .await
        .unwrap();
    converge(&cluster, "fan_out", Some(revision(&v))).await;
    tokio::time::sleep(Duration::from_millis(500)).await; // the worker too
    let (_, seq) = send_acked(&mut alice, &conv, "f1", "large now").await;
    let m = message_with_seq(&mut bob, seq).await;
    assert_eq!(
        text_of(&m),
        "large now",
        "members connected before the change get it live"
    );
    bob.send(&ClientFrame::AckRead {
        conversation_id: ConversationId::new(&conv).unwrap(),
        seq,
        thread_id: None,
    })
    .await
    .unwrap();
    let receipt = tokio::time::timeout(Duration::from_millis(1500), async {
        loop {
            if let Ok(ServerFrame::Receipt { .. }) = alice.next_frame().await {
                return;
            }
        }
    })
    .await;
    assert!(
        receipt.is_err(),
        "no receipts where the conversation fans out on read"
    );

    // Removed: the built-in threshold (500) again, and receipts flow.
    admin.remove_plugin("fan_out").await.unwrap();
    converge(&cluster, "fan_out", None).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, seq) = send_acked(&mut alice, &conv, "f2", "small again").await;
    message_with_seq(&mut bob, seq).await;
    bob.send(&ClientFrame::AckRead {
        conversation_id: ConversationId::new(&conv).unwrap(),
        seq,
        thread_id: None,
    })
    .await
    .unwrap();
    expect(&mut alice, "a receipt", |f| match f {
        ServerFrame::Receipt { .. } => Some(()),
        _ => None,
    })
    .await;
}

/// Sends a message and edits it, again and again, until the edit is
/// refused (`refused`) or allowed: the worker follows the bucket on its
/// own, so its answer changes a moment after the gateways'.
#[derive(Default)]
struct EditProbe {
    n: usize,
}

impl EditProbe {
    /// The refusal's message when `refused`.
    async fn until(&mut self, alice: &mut WsClient, conv: &str, refused: bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.n += 1;
            let (id, _) = send_acked(alice, conv, &format!("probe{}", self.n), "again").await;
            tokio::time::sleep(Duration::from_millis(5)).await;
            alice
                .send(&edit_frame(conv, id, "again, edited"))
                .await
                .unwrap();
            let answer = expect(alice, "the edit's answer", |f| match f {
                ServerFrame::MessageUpdated { .. } => Some(None),
                ServerFrame::Error { code, message, .. } => Some(Some((code, message))),
                _ => None,
            })
            .await;
            match answer {
                Some((code, message)) if refused => {
                    assert_eq!(code, ErrorCode::Forbidden, "{message}");
                    return message;
                }
                None if !refused => return String::new(),
                _ => assert!(
                    Instant::now() < deadline,
                    "the worker never ran the expected edit policy"
                ),
            }
        }
    }
}

async fn message_with_seq(ws: &mut WsClient, seq: u64) -> switchboard_protocol::Message {
    expect(ws, "a message", |f| match f {
        ServerFrame::Message { message } if message.seq == seq => Some(message),
        _ => None,
    })
    .await
}

async fn expect_update(ws: &mut WsClient) {
    expect(ws, "message_updated", |f| match f {
        ServerFrame::MessageUpdated { .. } => Some(()),
        ServerFrame::Error { message, .. } => panic!("refused: {message}"),
        _ => None,
    })
    .await
}

/// What nats/README.md tells operators to do with the NATS CLI, done with
/// a NATS client: read the versions and components, switch a version by
/// putting a record, and switch a hook off by deleting its key.
#[tokio::test]
async fn operators_see_and_change_plugins_with_plain_kv_and_object_operations() {
    let (cluster, conv, admin) = group(1, &["bob"]).await;
    let v1 = admin
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(revision(&v1))).await;

    let nats = async_nats::connect(cluster.nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(nats);
    let kv = js.get_key_value("sb_plugins").await.unwrap();
    let code = js.get_object_store("sb_plugin_code").await.unwrap();
    // `nats kv get sb_plugins acme.moderation`, `nats object info ...`
    let key = format!("{TENANT}.moderation");
    let record: Value = serde_json::from_slice(&kv.get(&key).await.unwrap().unwrap()).unwrap();
    assert_eq!(record["digest"], v1["digest"]);
    let object = format!("{TENANT}.{}", v1["digest"].as_str().unwrap());
    let info = code.info(&object).await.unwrap();
    assert_eq!(info.size as u64, v1["size"].as_u64().unwrap());

    // `nats kv put`: the same component, configured to reject.
    let mut rejecting = record.clone();
    rejecting["config"] = serde_json::json!({ "action": "reject" });
    let r = kv
        .put(&key, serde_json::to_vec(&rejecting).unwrap().into())
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(r)).await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    alice.send(&send_frame(&conv, "m1", "darn")).await.unwrap();
    let (code_1, _, _, _) = expect_error(&mut alice).await;
    assert_eq!(code_1, ErrorCode::RejectedByPolicy);

    // A record naming a component that is not there: the process cannot
    // load it, says so, and moderation fails closed.
    let mut missing = record.clone();
    missing["digest"] = format!("sha256:{}", "0".repeat(64)).into();
    let r = kv
        .put(&key, serde_json::to_vec(&missing).unwrap().into())
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(r)).await;
    let listing = admin.plugin_versions("moderation").await.unwrap();
    assert!(
        listing["load_error_here"]
            .as_str()
            .unwrap()
            .contains("fetching the component"),
        "{listing}"
    );
    alice.send(&send_frame(&conv, "m2", "hello")).await.unwrap();
    let (code_2, _, _, message) = expect_error(&mut alice).await;
    assert_eq!(code_2, ErrorCode::Unavailable, "{message}");

    // `nats kv del`: the hook is off.
    kv.delete(&key).await.unwrap();
    converge(&cluster, "moderation", None).await;
    send_acked(&mut alice, &conv, "m3", "darn").await;
    assert_eq!(texts(&cluster.rest(0, "bob"), &conv).await, ["darn"]);
}

/// The backbone going away must not leave processes on old versions: after
/// nats-server is killed and restarted, a new deploy still reaches every
/// gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_changes_are_followed_after_nats_server_restarts() {
    let (mut cluster, conv, admin) = group(2, &["bob"]).await;
    let v1 = admin
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(revision(&v1))).await;

    cluster.nats.kill9().await;
    cluster.nats.restart().await;
    // Deploy again (retrying while the gateways reconnect).
    let deadline = Instant::now() + Duration::from_secs(30);
    let v2 = loop {
        match admin
            .deploy_plugin(
                "moderation",
                plugin("word-list"),
                &[("words", "heck")],
                None,
            )
            .await
        {
            Ok(v) => break v,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "no deploy after the restart: {e}"
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    };
    converge(&cluster, "moderation", Some(revision(&v2))).await;
    let mut alice = cluster.ws(1, "alice", "phone").await;
    send_acked(&mut alice, &conv, "after", "darn heck").await;
    let stored = texts(&cluster.rest(0, "bob"), &conv).await;
    assert_eq!(stored, ["darn ****"], "the new version moderates");
}

#[tokio::test]
async fn a_plugin_that_is_always_slow_is_quarantined_like_a_failing_one() {
    // Every call counts as slow here (0% of the deadline): a plugin that
    // succeeds but always takes most of its deadline is treated the same.
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[plugins]\nslow_call_percent = 0\nquarantine_after = 3\n".into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let admin = admin(&cluster, 0);
    let v = admin
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(revision(&v))).await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    // Under the threshold of strikes, the answers are used as given.
    for i in 0..3 {
        send_acked(&mut alice, &conv, &format!("s{i}"), "fine words").await;
    }
    // The third slow call quarantined it: moderation fails closed.
    alice
        .send(&send_frame(&conv, "s3", "fine words"))
        .await
        .unwrap();
    let (code, _, _, message) = expect_error(&mut alice).await;
    assert_eq!(code, ErrorCode::Unavailable, "{message}");
    let logs = cluster.logs();
    assert!(logs.contains("of its"), "slow calls are logged as such");
    assert!(logs.contains("plugin quarantined"));
    let counts = &admin.plugin_versions("moderation").await.unwrap()["counts_here"];
    assert_eq!(counts["slow"], 3, "{counts}");
    // And the gateway's metrics say the same (issue 15).
    let m = scrape(cluster.gateways[0].metrics_addr.unwrap()).await;
    let calls = |outcome: &str| {
        sum(
            &m,
            "switchboard_plugin_calls_total",
            &format!(r#"hook="moderation",outcome="{outcome}",process="gateway",tenant="acme""#),
        )
    };
    assert_eq!(calls("slow"), 3.0, "{m:?}");
    assert!(calls("quarantined") >= 1.0);
    assert_eq!(
        sum(
            &m,
            "switchboard_plugin_quarantines_total",
            r#"hook="moderation""#
        ),
        1.0
    );
    assert!(
        sum(
            &m,
            "switchboard_plugin_call_seconds_count",
            r#"hook="moderation""#
        ) >= 3.0
    );
}

#[tokio::test]
async fn the_fan_out_plugin_is_asked_once_per_conversation_size() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let admin = admin(&cluster, 0);
    let v = admin
        .deploy_plugin(
            "fan_out",
            plugin("member-count"),
            &[("threshold", "2")],
            None,
        )
        .await
        .unwrap();
    converge(&cluster, "fan_out", Some(revision(&v))).await;
    // Alice is in six groups of two sizes.
    for others in [
        &["b"][..],
        &["c"],
        &["d"],
        &["b", "c"],
        &["c", "d"],
        &["b", "d"],
    ] {
        cluster
            .create(ConversationKind::Group, "alice", others)
            .await;
    }
    let calls = || async {
        admin.plugin_versions("fan_out").await.unwrap()["counts_here"]["calls"]
            .as_u64()
            .unwrap()
    };
    let before = calls().await;
    // Every connect looks at every membership; the plugin is asked once
    // per (kind, size) this version has not answered yet.
    for device in ["d1", "d2", "d3"] {
        let mut ws = cluster.ws(0, "alice", device).await;
        assert_alive(&mut ws).await;
    }
    let asked = calls().await - before;
    assert!(
        asked <= 2,
        "asked {asked} times for 18 memberships of 2 sizes"
    );
}

/// The tenant's components in the code store, by digest: what
/// `nats object ls sb_plugin_code` shows.
async fn stored_components(cluster: &Cluster) -> HashSet<String> {
    let nats = async_nats::connect(cluster.nats.url()).await.unwrap();
    let code = async_nats::jetstream::new(nats)
        .get_object_store("sb_plugin_code")
        .await
        .unwrap();
    let mut list = code.list().await.unwrap();
    let mut digests = HashSet::new();
    while let Some(info) = futures::StreamExt::next(&mut list).await {
        let info = info.unwrap();
        if info.deleted {
            continue;
        }
        if let Some(digest) = info.name.strip_prefix(&format!("{TENANT}.")) {
            digests.insert(digest.to_owned());
        }
    }
    digests
}

/// Issue 17's finding: every uploaded version was kept forever. A tenant
/// who uploads 50 versions now keeps `max_versions_per_hook` of them
/// stored and at most `compiled_cache_entries` compiled; rollbacks reach
/// exactly the kept ones; and a deploy that would keep more than
/// `max_bytes_per_tenant` is refused before anything is stored.
#[tokio::test]
async fn fifty_uploads_stay_within_the_storage_and_compile_caps() {
    // Three kept versions of word-list fit, with room to spare for
    // nothing else.
    let each = plugin_variant("word-list", 0).len() as u64;
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "[plugins]\nmax_versions_per_hook = 3\ncompiled_cache_entries = 4\nprune_grace_ms = 0\nmax_bytes_per_tenant = {}\n",
            3 * each + 64
        ),
        ..Default::default()
    })
    .await;
    let admin = admin(&cluster, 0);
    let mut deployed = Vec::new();
    for n in 0..50 {
        let v = admin
            .deploy_plugin("moderation", plugin_variant("word-list", n), &[], None)
            .await
            .unwrap();
        deployed.push(v);
        let stored = stored_components(&cluster).await;
        assert!(stored.len() <= 3, "after {} uploads: {stored:?}", n + 1);
    }
    let last_three: HashSet<String> = deployed[47..]
        .iter()
        .map(|v| v["digest"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(stored_components(&cluster).await, last_three);
    converge(&cluster, "moderation", Some(revision(&deployed[49]))).await;

    // Compiled code on the gateway stays within its cache (the active
    // version's compilation is among them).
    let samples = scrape(cluster.gateways[0].metrics_addr.unwrap()).await;
    let cached = sum(&samples, "switchboard_plugin_compiled_cached", "");
    assert!(
        (1.0..=4.0).contains(&cached),
        "{cached} compiled components"
    );

    // Rollbacks reach the kept versions, and no further.
    let back = admin.rollback_plugin("moderation").await.unwrap();
    assert_eq!(back["digest"], deployed[48]["digest"]);
    let back = admin.rollback_plugin("moderation").await.unwrap();
    assert_eq!(back["digest"], deployed[47]["digest"]);
    let e = admin.rollback_plugin("moderation").await.unwrap_err();
    assert_eq!(e.status(), Some(409), "{e}");
    // The version rolled back from is no longer kept: pruned.
    converge(&cluster, "moderation", Some(revision(&back))).await;
    assert_eq!(
        stored_components(&cluster).await,
        HashSet::from([deployed[47]["digest"].as_str().unwrap().to_owned()])
    );
    // The listing keeps the records (64 per hook, the bucket's history).
    let listing = admin.plugin_versions("moderation").await.unwrap();
    assert_eq!(listing["versions"].as_array().unwrap().len(), 52);

    // At the byte cap: two more word-list versions fit (three kept)...
    for n in 50..52 {
        admin
            .deploy_plugin("moderation", plugin_variant("word-list", n), &[], None)
            .await
            .unwrap();
    }
    // ...and another hook's version past it is refused, nothing stored.
    let before = stored_components(&cluster).await;
    let e = admin
        .deploy_plugin("edit_policy", plugin("edit-window"), &[], None)
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(429), "{e}");
    assert!(e.to_string().contains("max_bytes_per_tenant"), "{e}");
    assert_eq!(stored_components(&cluster).await, before);
    let listing = admin.plugin_versions("edit_policy").await.unwrap();
    assert!(listing["active"].is_null(), "{listing}");
    // Removing the moderator frees its versions: the other hook fits.
    admin.remove_plugin("moderation").await.unwrap();
    assert!(stored_components(&cluster).await.is_empty());
    admin
        .deploy_plugin("edit_policy", plugin("edit-window"), &[], None)
        .await
        .unwrap();
}

/// Compiling is bounded in time: a deploy whose compilation overruns
/// `compile_timeout_ms` gets a clear error and nothing is stored.
#[tokio::test]
async fn a_compilation_past_its_time_bound_is_refused() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[plugins]\ncompile_timeout_ms = 1\n".into(),
        ..Default::default()
    })
    .await;
    let e = admin(&cluster, 0)
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(400), "{e}");
    assert!(e.to_string().contains("compile_timeout_ms"), "{e}");
    assert!(stored_components(&cluster).await.is_empty());
    // The workers' deploy service compiles it.
    let samples = scrape(cluster.workers[0].metrics_addr.unwrap()).await;
    assert!(sum(&samples, "switchboard_plugin_compile_timeouts_total", "") >= 1.0);
}

/// Waits until every process (`processes` of them: gateways and workers)
/// runs the hook's shadow `revision` (`None`: no shadow) and returns the
/// listing and how long that took.
async fn shadow_everywhere(
    admin: &RestClient,
    hook: &str,
    processes: usize,
    revision: Option<u64>,
) -> (Value, Duration) {
    let started = Instant::now();
    loop {
        let listing = admin.plugin_shadow(hook).await.unwrap();
        let all = listing["processes"].as_array().unwrap();
        if all.len() == processes
            && all
                .iter()
                .all(|p| p["shadow_revision"].as_u64() == revision)
        {
            return (listing, started.elapsed());
        }
        // A debug build takes tens of seconds to compile a JavaScript
        // engine.
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "not every process runs shadow {revision:?}: {listing}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The hook's shadow listing once `done` holds for it (within 60 s).
async fn shadow_listing_once(
    admin: &RestClient,
    hook: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let listing = admin.plugin_shadow(hook).await.unwrap();
        if done(&listing) {
            return listing;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the shadow's comparisons never arrived: {listing}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue 17, item 4: a shadow version runs on live traffic beside the
/// active one without effect; the admin API reports from every gateway
/// and the worker how often it agrees, with disagreements by id and never
/// content; promotion and rollback switch at once.
#[tokio::test]
async fn a_shadow_moderator_is_compared_on_live_traffic_then_promoted_and_rolled_back() {
    let (cluster, conv, admin) = group(2, &["bob"]).await;
    let processes = 3; // two gateways and the worker
    let active = admin
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(revision(&active))).await;

    // The shadow rejects what the active version masks.
    let started = Instant::now();
    let shadow = admin
        .deploy_shadow_plugin("moderation", plugin("word-list"), &[("action", "reject")])
        .await
        .unwrap();
    let (listing, _) =
        shadow_everywhere(&admin, "moderation", processes, Some(revision(&shadow))).await;
    let deploy_to_everywhere = started.elapsed();
    println!("shadow deploy to running on every process: {deploy_to_everywhere:?}");
    assert!(
        deploy_to_everywhere < Duration::from_secs(3),
        "{deploy_to_everywhere:?}"
    );
    assert_eq!(listing["active"]["revision"], active["revision"]);
    assert!(listing["agreement"].is_null(), "nothing compared yet");

    // Live traffic through both gateways: the active version decides.
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let mut bob = cluster.ws(1, "bob", "phone").await;
    for i in 0..6 {
        send_acked(&mut alice, &conv, &format!("a{i}"), "hello there").await;
    }
    for i in 0..4 {
        send_acked(&mut bob, &conv, &format!("b{i}"), "oh darn").await;
    }
    let stored = texts(&cluster.rest(0, "bob"), &conv).await;
    assert_eq!(
        stored.iter().filter(|t| *t == "oh ****").count(),
        4,
        "{stored:?}"
    );

    // Ten comparisons: six agree, four disagree.
    let listing = shadow_listing_once(&admin, "moderation", |l| l["totals"]["calls"] == 10).await;
    let totals = &listing["totals"];
    assert_eq!(
        (totals["agree"].as_u64(), totals["disagree"].as_u64()),
        (Some(6), Some(4)),
        "{listing}"
    );
    assert_eq!(listing["agreement"], 0.6);
    let disagreements = totals["disagreements"].as_array().unwrap();
    assert_eq!(disagreements.len(), 4);
    for d in disagreements {
        assert_eq!(d["live"], "rewrite");
        assert_eq!(d["shadow"], "reject");
        assert_eq!(d["conversation_id"], conv.as_str());
        assert_eq!(d["sender"], "bob");
    }
    assert!(
        !listing.to_string().contains("darn"),
        "no content in the report: {listing}"
    );
    // Counted where the calls ran: bob's gateway.
    let per_process: Vec<u64> = listing["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["shadow"]["calls"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(per_process.iter().sum::<u64>(), 10, "{per_process:?}");

    // Promoted: at once, everywhere; the shadow is gone.
    let started = Instant::now();
    let promoted = admin.promote_shadow_plugin("moderation").await.unwrap();
    converge(&cluster, "moderation", Some(revision(&promoted))).await;
    println!(
        "promotion to running on every gateway: {:?}",
        started.elapsed()
    );
    shadow_everywhere(&admin, "moderation", processes, None).await;
    send_frame_expect_refusal(&mut alice, &conv, "p1").await;

    // Rolled back: masking again.
    let back = admin.rollback_plugin("moderation").await.unwrap();
    assert_eq!(back["digest"], active["digest"]);
    converge(&cluster, "moderation", Some(revision(&back))).await;
    send_acked(&mut alice, &conv, "r1", "darn again").await;
    assert!(
        texts(&cluster.rest(0, "bob"), &conv)
            .await
            .contains(&"**** again".to_owned())
    );

    // A shadow can be stopped; stopping none is 404.
    admin
        .deploy_shadow_plugin("moderation", plugin("word-list"), &[("action", "reject")])
        .await
        .unwrap();
    admin.remove_shadow_plugin("moderation").await.unwrap();
    let e = admin.remove_shadow_plugin("moderation").await.unwrap_err();
    assert_eq!(e.status(), Some(404), "{e}");
}

/// Sends "darn" and expects the promoted rejecting version's refusal.
async fn send_frame_expect_refusal(ws: &mut WsClient, conv: &str, id: &str) {
    ws.send(&send_frame(conv, id, "darn")).await.unwrap();
    let (code, _, _, _) = expect_error(ws).await;
    assert_eq!(code, ErrorCode::RejectedByPolicy);
}

/// A shadow edit policy is compared where the hook runs, on the writer,
/// against the built-in policy when no plugin is active; and a shadow
/// fan-out policy once per conversation size, against the built-in
/// threshold.
#[tokio::test]
async fn shadow_edit_and_fan_out_policies_are_compared_against_the_built_in_ones() {
    let (cluster, conv, admin) = group(1, &["bob"]).await;
    let processes = 2; // the gateway and the worker
    let edit = admin
        .deploy_shadow_plugin(
            "edit_policy",
            plugin("edit-window"),
            &[("edit_window_secs", "0")],
        )
        .await
        .unwrap();
    shadow_everywhere(&admin, "edit_policy", processes, Some(revision(&edit))).await;
    let fan_out = admin
        .deploy_shadow_plugin("fan_out", plugin("member-count"), &[("threshold", "1")])
        .await
        .unwrap();
    shadow_everywhere(&admin, "fan_out", processes, Some(revision(&fan_out))).await;

    let mut alice = cluster.ws(0, "alice", "phone").await;
    let (message_id, _) = send_acked(&mut alice, &conv, "m1", "first").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // The built-in policy lets the sender edit; the shadow, with a window
    // of 0 s, would not. The edit is made.
    alice
        .send(&edit_frame(&conv, message_id, "first, edited"))
        .await
        .unwrap();
    expect_update(&mut alice).await;
    let listing = shadow_listing_once(&admin, "edit_policy", |l| l["totals"]["calls"] == 1).await;
    assert_eq!(listing["totals"]["disagree"], 1, "{listing}");
    assert!(
        listing["active"].is_null(),
        "compared with the built-in policy"
    );
    let d = &listing["totals"]["disagreements"][0];
    assert_eq!(
        (d["live"].as_str(), d["shadow"].as_str()),
        (Some("allow"), Some("deny"))
    );
    assert_eq!(d["message_id"], message_id.to_string(), "{d}");
    assert!(
        !listing.to_string().contains("first"),
        "no content: {listing}"
    );

    // Fan-out: a group of two fans out on write by default; the shadow
    // (threshold 1) would read. Compared once per size, however many
    // messages and connections ask.
    let listing = shadow_listing_once(&admin, "fan_out", |l| {
        l["totals"]["disagree"].as_u64() >= Some(1)
    })
    .await;
    let d = &listing["totals"]["disagreements"][0];
    assert_eq!(
        (d["live"].as_str(), d["shadow"].as_str()),
        (Some("on_write"), Some("on_read"))
    );
    assert_eq!(d["member_count"], 2);
    assert!(
        listing["totals"]["calls"].as_u64().unwrap() <= 2 * processes as u64,
        "{listing}"
    );
}

/// `POST /v1/admin/plugins/{hook}/replay` as `admin`: the status and the
/// JSON answer (only `moderation` has one).
async fn replay(admin: &RestClient, hook: &str, body: Value) -> (u16, Value) {
    let r = admin
        .raw()
        .post(format!("{}/v1/admin/plugins/{hook}/replay", admin.base()))
        .bearer_auth(admin.token())
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Issue 17, item 5: a moderation version run over a conversation's
/// stored history reports what it would have rejected or rewritten, by
/// message id only; bounded in messages, time and rate.
#[tokio::test]
async fn a_moderation_version_is_replayed_over_history_with_metadata_only() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nplugin_replays_per_minute = 4\nplugin_replay_max_messages = 50\n"
            .into(),
        ..Default::default()
    })
    .await;
    // The admin replays what it may read: a conversation it is in.
    let conv = cluster
        .create(ConversationKind::Group, "root", &["alice"])
        .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let mut flagged = Vec::new();
    for i in 0..10 {
        let text = if i % 3 == 0 { "oh darn" } else { "hello" };
        let (id, _) = send_acked(&mut alice, &conv, &format!("m{i}"), text).await;
        if i % 3 == 0 {
            flagged.push(id.to_string());
        }
    }
    let admin = admin(&cluster, 0);
    let (status, report) = replay(
        &admin,
        "moderation",
        serde_json::json!({ "conversation_id": conv }),
    )
    .await;
    assert_eq!(status, 404, "nothing deployed yet: {report}");
    let active = admin
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap();

    // The active version (masking): four rewrites, by id, no content.
    let (status, report) = replay(
        &admin,
        "moderation",
        serde_json::json!({ "conversation_id": conv, "limit": 50 }),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["version"]["revision"], active["revision"]);
    assert_eq!(
        (report["rewritten"].as_u64(), report["allowed"].as_u64()),
        (Some(4), Some(6)),
        "{report}"
    );
    assert_eq!(report["truncated"], false);
    let mut ids: Vec<String> = report["flagged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    flagged.sort();
    assert_eq!(ids, flagged);
    assert!(!report.to_string().contains("darn"), "{report}");
    assert!(!report.to_string().contains("****"), "{report}");

    // A shadow is the default: it would have rejected them.
    admin
        .deploy_shadow_plugin("moderation", plugin("word-list"), &[("action", "reject")])
        .await
        .unwrap();
    let (status, report) = replay(
        &admin,
        "moderation",
        serde_json::json!({ "conversation_id": conv }),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["rejected"], 4, "{report}");
    // Past the message bound: refused, and not counted against the rate.
    let (status, report) = replay(
        &admin,
        "moderation",
        serde_json::json!({ "conversation_id": conv, "limit": 51 }),
    )
    .await;
    assert_eq!(status, 400, "{report}");
    assert!(
        report["message"]
            .as_str()
            .unwrap()
            .contains("plugin_replay_max_messages")
    );
    // A named revision; then the rate is spent (4 a minute: every replay
    // asked for counts, the one that found nothing to run too).
    let (status, report) = replay(
        &admin,
        "moderation",
        serde_json::json!({ "conversation_id": conv, "revision": revision(&active) }),
    )
    .await;
    assert_eq!(
        (status, report["rewritten"].as_u64()),
        (200, Some(4)),
        "{report}"
    );
    let (status, report) = replay(
        &admin,
        "moderation",
        serde_json::json!({ "conversation_id": conv }),
    )
    .await;
    assert_eq!(status, 429, "{report}");
    assert_eq!(report["code"], "rate_limited");
    // Only moderation replays: the other hooks have no such route.
    let (status, _) = replay(
        &admin,
        "fan_out",
        serde_json::json!({ "conversation_id": conv }),
    )
    .await;
    assert_eq!(status, 404);
}

/// A replay that runs out of its time budget says so and stops.
#[tokio::test]
async fn a_replay_past_its_budget_stops_and_says_so() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nplugin_replay_budget_ms = 0\n".into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "root", &["alice"])
        .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    send_acked(&mut alice, &conv, "m1", "hello").await;
    let admin = admin(&cluster, 0);
    admin
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap();
    let (status, report) = replay(
        &admin,
        "moderation",
        serde_json::json!({ "conversation_id": conv }),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["truncated"], true, "{report}");
    assert_eq!(report["allowed"], 0);
    // Not a member: the store refuses, as for any read.
    let other = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let (status, _) = replay(
        &admin,
        "moderation",
        serde_json::json!({ "conversation_id": other }),
    )
    .await;
    assert_eq!(status, 403);
}

/// Issue 17: the whole flow in the second language. A JavaScript
/// moderator deployed as the shadow of the Rust one agrees with it on live
/// traffic, is promoted, moderates, and is rolled back.
#[tokio::test]
async fn a_javascript_moderator_goes_through_shadow_promotion_and_rollback() {
    let cluster = Cluster::start(ClusterSpec {
        // A debug build compiles a JavaScript engine for tens of seconds,
        // and its calls on a loaded CI machine can pass the 20 ms
        // default deadline (a failed shadow call is not an agreement):
        // what is tested here is the flow, not the speed.
        extra_config: "[plugins]\ncompile_timeout_ms = 300000\ndeadline_ms = 1000\n".into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let admin = admin(&cluster, 0);
    let rust = admin
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(revision(&rust))).await;
    let js = admin
        .deploy_shadow_plugin("moderation", plugin("js-word-list"), &[])
        .await
        .unwrap();
    shadow_everywhere(&admin, "moderation", 2, Some(revision(&js))).await;

    let mut alice = cluster.ws(0, "alice", "phone").await;
    for (i, text) in ["hello", "oh darn", "fine", "heck no"].iter().enumerate() {
        send_acked(&mut alice, &conv, &format!("m{i}"), text).await;
    }
    let listing = shadow_listing_once(&admin, "moderation", |l| l["totals"]["calls"] == 4).await;
    assert_eq!(listing["totals"]["agree"], 4, "{listing}");
    assert_eq!(listing["agreement"], 1.0);

    let promoted = admin.promote_shadow_plugin("moderation").await.unwrap();
    assert_eq!(promoted["digest"], js["digest"]);
    converge(&cluster, "moderation", Some(revision(&promoted))).await;
    send_acked(&mut alice, &conv, "p1", "darn it").await;
    let back = admin.rollback_plugin("moderation").await.unwrap();
    assert_eq!(back["digest"], rust["digest"]);
    converge(&cluster, "moderation", Some(revision(&back))).await;
    send_acked(&mut alice, &conv, "r1", "heck").await;
    let stored = texts(&cluster.rest(0, "bob"), &conv).await;
    assert!(stored.contains(&"**** it".to_owned()), "{stored:?}");
    assert!(stored.contains(&"****".to_owned()), "{stored:?}");
}

/// Issue 26, case 8: a moderator that fails on every other call (the
/// `flaky` plugin spins to its deadline on numbered texts ending in an odd
/// digit) used to reset "five failures in a row" with each success and
/// was never quarantined, burning a core. Now its fifth failure among its
/// last 20 calls quarantines it; every later call is answered by its
/// failure policy without running it, and another tenant's sends go on.
#[tokio::test]
async fn a_plugin_failing_every_other_call_is_quarantined_and_another_tenant_goes_on() {
    let cluster = Cluster::start(ClusterSpec {
        // Long enough that the whole run falls in one quarantine.
        extra_config: "[plugins]\nquarantine_ms = 120000\n".into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let admin = admin(&cluster, 0);
    let globex = cluster.rest_as(0, OTHER_TENANT, "carol", false);
    let (g_conv, _) = globex
        .create_conversation(ConversationKind::Group, &["dave"], None)
        .await
        .unwrap();
    let g_conv = g_conv.conversation_id.as_str().to_owned();
    let mut carol = cluster.ws_as(0, OTHER_TENANT, "carol", "phone").await;

    // Failing open, so every send is stored whatever the plugin does.
    let v = admin
        .deploy_plugin("moderation", plugin("flaky"), &[], Some("open"))
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(revision(&v))).await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let sends = 40;
    let acme = async {
        for i in 0..sends {
            send_acked(&mut alice, &conv, &format!("f{i}"), &format!("m{i}")).await;
        }
    };
    let (_, globex_took) = tokio::join!(acme, timed_sends(&mut carol, &g_conv, "g", sends));
    eprintln!("globex: {sends} sends in {globex_took:?} beside acme's flaky plugin");

    let counts = &admin.plugin_versions("moderation").await.unwrap()["counts_here"];
    assert_eq!(counts["quarantines"], 1, "quarantined once: {counts}");
    assert_eq!(counts["calls"], sends, "{counts}");
    let m = scrape(cluster.gateways[0].metrics_addr.unwrap()).await;
    let acme_calls = |outcome: &str| {
        sum(
            &m,
            "switchboard_plugin_calls_total",
            &format!(r#"hook="moderation",outcome="{outcome}",tenant="acme""#),
        )
    };
    // Exactly five strikes ran (failures, or successes slow on a busy
    // machine), then it ran no more: at most 10 of 40 calls ran at all.
    assert_eq!(
        acme_calls("failed") + acme_calls("slow"),
        5.0,
        "five strikes, then quarantined: {m:?}"
    );
    assert!(acme_calls("failed") >= 1.0);
    assert!(
        acme_calls("quarantined") >= (sends - 10) as f64,
        "answered by its failure policy: {m:?}"
    );
    assert_eq!(
        sum(
            &m,
            "switchboard_plugin_quarantines_total",
            r#"hook="moderation",tenant="acme""#
        ),
        1.0
    );
    // globex: every send acked (timed_sends waits for each ack), and no
    // plugin ever ran for it.
    assert_eq!(
        sum(&m, "switchboard_plugin_calls_total", r#"tenant="globex""#),
        0.0
    );
    assert_eq!(texts(&cluster.rest(0, "bob"), &conv).await.len(), sends);
    assert!(cluster.logs().contains("plugin quarantined"));
}

/// Issue 26, case 9: the same plugin as a shadow, and replayed over
/// history, was never quarantined. A shadow now is, like an active
/// version: its comparisons are counted `quarantined` without running it.
/// A replay's calls count toward the replayed version's quarantine, and
/// the replay stops once it is quarantined.
#[tokio::test]
async fn a_flaky_shadow_and_its_replay_are_quarantined_like_an_active_version() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[plugins]\nquarantine_ms = 120000\n".into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "root", &["alice"])
        .await;
    let admin = admin(&cluster, 0);
    let processes = 2; // the gateway and the worker
    let shadow = admin
        .deploy_shadow_plugin("moderation", plugin("flaky"), &[])
        .await
        .unwrap();
    shadow_everywhere(&admin, "moderation", processes, Some(revision(&shadow))).await;

    // No active version: every send is allowed, and compared.
    let sends = 40;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    for i in 0..sends {
        send_acked(&mut alice, &conv, &format!("s{i}"), &format!("m{i}")).await;
    }
    let listing = shadow_listing_once(&admin, "moderation", |l| {
        let t = &l["totals"];
        t["calls"].as_u64().unwrap_or(0) + t["quarantined"].as_u64().unwrap_or(0) == sends
    })
    .await;
    let totals = &listing["totals"];
    assert_eq!(totals["skipped"], 0, "{listing}");
    let (failed, calls) = (
        totals["failed"].as_u64().unwrap(),
        totals["calls"].as_u64().unwrap(),
    );
    assert!((1..=5).contains(&failed), "{listing}");
    assert!(calls <= 10, "quarantined by its fifth strike: {listing}");
    assert!(
        totals["quarantined"].as_u64().unwrap() >= sends - 10,
        "{listing}"
    );
    let m = scrape(cluster.gateways[0].metrics_addr.unwrap()).await;
    assert!(
        sum(
            &m,
            "switchboard_plugin_shadow_calls_total",
            r#"outcome="quarantined",tenant="acme""#
        ) >= (sends - 10) as f64
    );
    assert_eq!(
        sum(
            &m,
            "switchboard_plugin_quarantines_total",
            r#"tenant="acme""#
        ),
        1.0
    );

    // The same plugin as a fresh shadow (a new revision, a new version),
    // replayed over the 40 messages, newest first: m39 fails, m38 passes,
    // ... The replay is that version's calls: quarantined by its fifth
    // strike, it stops there.
    let shadow = admin
        .deploy_shadow_plugin("moderation", plugin("flaky"), &[])
        .await
        .unwrap();
    shadow_everywhere(&admin, "moderation", processes, Some(revision(&shadow))).await;
    let (status, report) = replay(
        &admin,
        "moderation",
        serde_json::json!({ "conversation_id": conv, "limit": sends }),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["version"]["revision"], shadow["revision"]);
    assert_eq!(report["quarantined"], true, "{report}");
    let (failed, allowed) = (
        report["failed"].as_u64().unwrap(),
        report["allowed"].as_u64().unwrap(),
    );
    assert!((1..=5).contains(&failed), "{report}");
    assert!(failed + allowed <= 9, "stopped at quarantine: {report}");
    // The live shadow is that version: quarantined for live traffic too.
    let before = admin.plugin_shadow("moderation").await.unwrap()["totals"]["quarantined"]
        .as_u64()
        .unwrap();
    send_acked(&mut alice, &conv, "after", "m2").await;
    shadow_listing_once(&admin, "moderation", |l| {
        l["totals"]["quarantined"].as_u64() == Some(before + 1)
    })
    .await;
    // Replayed again: nothing runs.
    let (status, report) = replay(
        &admin,
        "moderation",
        serde_json::json!({ "conversation_id": conv }),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        (report["quarantined"].as_bool(), report["failed"].as_u64()),
        (Some(true), Some(0)),
        "{report}"
    );
}

/// Issue 26, case 10: 24 shadow deploys in a row stored 170 MiB against a
/// 128 MiB cap, and the replaced ones stayed. Now what awaits pruning
/// counts toward `max_bytes_per_tenant` (at the cap: fits; one past it:
/// refused, nothing stored), and replaced components are deleted once
/// their grace is over without another change.
#[tokio::test]
async fn replaced_shadows_count_against_the_byte_cap_until_they_are_deleted() {
    let each = plugin_variant("word-list", 0).len() as u64;
    let grace = Duration::from_secs(15);
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "[plugins]\nprune_grace_ms = {}\nmax_bytes_per_tenant = {}\n",
            grace.as_millis(),
            4 * each
        ),
        ..Default::default()
    })
    .await;
    let admin = admin(&cluster, 0);
    let mut digests = Vec::new();
    // Four shadows, each replacing the one before: four components stored
    // (one kept, three awaiting pruning), exactly the cap.
    for n in 0..4 {
        let v = admin
            .deploy_shadow_plugin("moderation", plugin_variant("word-list", n), &[])
            .await
            .unwrap();
        digests.push(v["digest"].as_str().unwrap().to_owned());
    }
    let stored = stored_components(&cluster).await;
    assert_eq!(stored.len(), 4, "{stored:?}");
    // One more byte would be past it: refused before anything is stored.
    let e = admin
        .deploy_shadow_plugin("moderation", plugin_variant("word-list", 4), &[])
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(429), "{e}");
    assert!(e.to_string().contains("max_bytes_per_tenant"), "{e}");
    assert_eq!(stored_components(&cluster).await, stored);
    // A component stored already adds nothing: it fits.
    admin
        .deploy_shadow_plugin("moderation", plugin_variant("word-list", 2), &[])
        .await
        .unwrap();
    // With no further change, the replaced ones go once their grace is
    // over.
    let started = Instant::now();
    loop {
        let stored = stored_components(&cluster).await;
        if stored == HashSet::from([digests[2].clone()]) {
            break;
        }
        assert!(
            started.elapsed() < grace * 2 + Duration::from_secs(5),
            "still stored after their grace: {stored:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // And the deploy refused before fits now.
    admin
        .deploy_shadow_plugin("moderation", plugin_variant("word-list", 4), &[])
        .await
        .unwrap();
}

/// Issue 26, lower item: activations were applied one at a time across
/// tenants, so one tenant's slow compilation (a JavaScript engine takes
/// tens of seconds in a debug build) held up every other tenant's. Now
/// the gateway activates globex's small version while acme's is still
/// compiling. (The worker's deploy service compiled each to validate it,
/// so the worker has both compiled already; the gateway compiles each
/// when it activates it.)
#[tokio::test]
async fn one_tenants_slow_activation_does_not_hold_up_anothers() {
    let cluster = Cluster::start(ClusterSpec {
        // No sharing of compiled code (`max_precompiled_bytes = 0`): the
        // gateway must compile acme's engine itself, the slow activation
        // this test is about (with sharing it loads it in milliseconds).
        extra_config: "[plugins]\ncompile_timeout_ms = 300000\nmax_precompiled_bytes = 0\n".into(),
        ..Default::default()
    })
    .await;
    let acme = admin(&cluster, 0);
    let globex = cluster.rest_as(0, OTHER_TENANT, "root", true);
    // The gateway's revision of a tenant's moderator, as it answers.
    let on_gateway = |listing: &Value| {
        listing["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["process"].as_str().unwrap().starts_with("gateway"))
            .and_then(|p| p["active_revision"].as_u64())
    };
    // acme's JavaScript moderator: the worker compiles it to validate
    // it, then every process activates it, the gateway compiling it anew.
    let js = acme
        .deploy_plugin("moderation", plugin("js-word-list"), &[], None)
        .await
        .unwrap();
    // globex deploys a small one while the gateway compiles acme's.
    let small = globex
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap();
    let started = Instant::now();
    loop {
        let g = globex.plugin_shadow("moderation").await.unwrap();
        if on_gateway(&g) == Some(revision(&small)) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the gateway never ran globex's version: {g}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let a = acme.plugin_shadow("moderation").await.unwrap();
    assert_ne!(
        on_gateway(&a),
        Some(revision(&js)),
        "acme's JavaScript engine compiled first ({:?}): this run shows nothing",
        started.elapsed()
    );
    eprintln!(
        "globex's version ran on the gateway {:?} after its deploy, acme's still compiling",
        started.elapsed()
    );
}

/// Issue 32, item 6: deploys compile outside the admin's request. Without
/// `wait` a deploy answers as it always did (201 once over); with
/// `wait=false` a JavaScript one (tens of seconds of compiling) answers 202
/// at once with its progress, which the admin polls until every process
/// runs it. The worker shares the code it compiled in
/// `sb_plugin_compiled`, so deploying the same component again is over
/// within the moment `wait=false` allows.
#[tokio::test]
async fn a_deploy_that_does_not_wait_reports_its_progress_and_shares_its_code() {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        // A debug build compiles a JavaScript engine for tens of seconds,
        // and its calls on a loaded CI machine can pass the 20 ms
        // default deadline (a failed shadow call is not an agreement):
        // what is tested here is the flow, not the speed.
        extra_config: "[plugins]\ncompile_timeout_ms = 300000\ndeadline_ms = 1000\n".into(),
        ..Default::default()
    })
    .await;
    let admin = admin(&cluster, 0);

    // The contract of before: no `wait`, 201 with the version.
    let http = reqwest::Client::new();
    let put = http
        .put(format!("{}/v1/admin/plugins/moderation", admin.base()))
        .bearer_auth(admin.token())
        .header("content-type", "application/wasm")
        .body(plugin("word-list"))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status().as_u16(), 201);
    let rust: Value = put.json().await.unwrap();
    converge(&cluster, "moderation", Some(revision(&rust))).await;
    // `wait` is true or false, nothing else.
    let bad = http
        .put(format!(
            "{}/v1/admin/plugins/moderation?wait=soon",
            admin.base()
        ))
        .bearer_auth(admin.token())
        .header("content-type", "application/wasm")
        .body(plugin("word-list"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 400);

    let js = plugin("js-word-list");
    let (status, accepted) = admin
        .start_plugin_deploy("moderation", js.clone(), &[])
        .await
        .unwrap();
    assert_eq!(status, 202, "{accepted}");
    assert!(
        ["queued", "compiling"].contains(&accepted["state"].as_str().unwrap()),
        "{accepted}"
    );
    let id = accepted["id"].as_str().unwrap().to_owned();
    // The hook's deploys list it.
    let listed = admin.plugin_deploys("moderation").await.unwrap();
    assert!(
        listed.as_array().unwrap().iter().any(|d| d["id"] == id),
        "{listed}"
    );
    let started = Instant::now();
    let done = loop {
        let progress = admin.plugin_deploy("moderation", &id).await.unwrap();
        match progress["state"].as_str().unwrap() {
            "active" => break progress,
            "failed" => panic!("the deploy failed: {progress}"),
            _ => {}
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "not active: {progress}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(done["code"], "compiled", "{done}");
    let version = &done["version"];
    let processes = done["processes"].as_array().unwrap();
    assert!(processes.len() >= 3, "two gateways and the worker: {done}");
    assert!(processes.iter().all(|p| p["running"] == true), "{done}");
    converge(&cluster, "moderation", Some(revision(version))).await;

    // The worker shared what it compiled, under this engine's fingerprint.
    let nats = async_nats::connect(cluster.nats.url()).await.unwrap();
    let js_ctx = async_nats::jetstream::new(nats);
    let compiled = js_ctx.get_object_store("sb_plugin_compiled").await.unwrap();
    let prefix = format!("{TENANT}.{}@wt", version["digest"].as_str().unwrap());
    let mut names = Vec::new();
    let mut list = compiled.list().await.unwrap();
    while let Some(info) = futures::StreamExt::next(&mut list).await {
        names.push(info.unwrap().name);
    }
    assert!(names.iter().any(|n| n.starts_with(&prefix)), "{names:?}");

    // The same component again, as the shadow: its code is made already,
    // so even without waiting the answer is the version.
    let (status, shadow) = admin
        .start_shadow_plugin_deploy("moderation", js, &[])
        .await
        .unwrap();
    assert_eq!(status, 201, "{shadow}");
    assert_eq!(shadow["digest"], version["digest"]);
}

/// v1.1 through a deployed moderator (plugin package 0.2.0): a reaction
/// with an emoji the tenant refuses is answered `rejected_by_policy`
/// naming the message and reaches nobody, other emoji and taking one back
/// pass; a message that mentions too many members is refused.
#[tokio::test]
async fn a_moderator_refuses_an_emoji_and_a_mass_mention() {
    let (cluster, conv, admin) = group(1, &["bob", "carol", "dave"]).await;
    let deployed = admin
        .deploy_plugin(
            "moderation",
            plugin("etiquette"),
            &[("max_mentions", "2")],
            None,
        )
        .await
        .unwrap();
    converge(&cluster, "moderation", Some(revision(&deployed))).await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let mut bob = cluster.ws(0, "bob", "phone").await;
    let (mid, _) = send_acked(&mut alice, &conv, "m1", "react to this").await;
    expect_message(&mut bob).await;
    let react = |emoji: &str, action: &str| {
        serde_json::json!({
            "type": "react", "conversation_id": conv, "message_id": mid.to_string(),
            "emoji": emoji, "action": action,
        })
        .to_string()
    };
    bob.send_text(react("🖕", "add")).await.unwrap();
    let refused = expect_refusal(&mut bob).await;
    assert_eq!(
        refused,
        (
            ErrorCode::RejectedByPolicy,
            Some("react".to_owned()),
            Some(mid.to_string())
        )
    );
    bob.send_text(react("👍", "add")).await.unwrap();
    bob.send_text(react("👍", "remove")).await.unwrap();
    for want in ["add", "remove"] {
        let (emoji, action) = expect(&mut alice, "a reaction", |f| match f {
            ServerFrame::Reaction { emoji, action, .. } => Some((emoji, action)),
            _ => None,
        })
        .await;
        assert_eq!(
            (emoji.as_str(), serde_json::to_value(action).unwrap()),
            ("👍", Value::from(want)),
            "alice never hears of the refused one"
        );
    }
    // Mentions: two pass, three are refused.
    let send = |id: &str, mentions: &[&str]| {
        serde_json::json!({
            "type": "send_message", "client_msg_id": id, "conversation_id": conv,
            "content": {"kind": "text", "text": id}, "mentions": mentions,
        })
        .to_string()
    };
    alice
        .send_text(send("two", &["bob", "carol"]))
        .await
        .unwrap();
    expect_ack(&mut alice, "two").await;
    alice
        .send_text(send("three", &["bob", "carol", "dave"]))
        .await
        .unwrap();
    let (code, _, id, _) = expect_error(&mut alice).await;
    assert_eq!(
        (code, id.as_deref()),
        (ErrorCode::RejectedByPolicy, Some("three"))
    );
}
