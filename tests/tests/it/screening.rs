//! One screening for every way a send comes in (issue 42): a socket's
//! send, a REST send and a scheduled send at its time are held to the
//! same tenant content limits, and so is the tenant's moderator's
//! rewrite of them. Before, the socket and REST checked a rewrite
//! against the deployment's limits and the scheduler against the
//! defaults, so a rewrite over the tenant's own limit was stored.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_client::RestClient;
use switchboard_protocol::server_api::PostMessage;
use switchboard_protocol::{Content, ConversationKind};
use switchboard_tests::cluster::{OPERATOR_TOKEN, SECRET, TENANT};
use switchboard_tests::{Cluster, ClusterSpec, eventually, plugin};

use crate::scheduled::{in_ms, schedule};
use crate::support::{expect_ack, expect_error, full_history, send_frame, text_of};

/// The tenant's messages are at most this many bytes; the deployment's
/// limit is 16 KiB.
const TENANT_LIMIT: usize = 200;

fn post(client_msg_id: &str, text: &str, send_at: Option<String>) -> PostMessage {
    serde_json::from_value(json!({
        "client_msg_id": client_msg_id,
        "content": {"kind": "text", "text": text},
        "send_at": send_at,
    }))
    .unwrap()
}

/// Deploys `huge-output` rewriting triggered messages into `bytes` of
/// text, and waits until the gateway runs it.
async fn deploy_rewrite(admin: &RestClient, bytes: usize, on_failure: &str) {
    let bytes = bytes.to_string();
    let version = admin
        .deploy_plugin(
            "moderation",
            plugin("huge-output"),
            &[("bytes", bytes.as_str())],
            Some(on_failure),
        )
        .await
        .unwrap();
    let revision = version["revision"].as_u64();
    eventually(
        "the gateway runs the new moderator",
        Duration::from_secs(10),
        || async {
            let listing: Value = admin.plugin_versions("moderation").await.ok()?;
            (listing["running_here"].as_u64() == revision).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_over_the_tenants_limit_is_refused_alike_on_every_way_in() {
    let cluster = Cluster::start(ClusterSpec::with_operator_api()).await;
    let (status, body) = cluster
        .operator(
            reqwest::Method::POST,
            "/v1/operator/tenants",
            Some(json!({"id": TENANT, "hs256_secrets": [SECRET],
                "quotas": {"max_message_bytes": TENANT_LIMIT}})),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let conv = cluster
        .create(ConversationKind::Group, "sc_ann", &["sc_bob"])
        .await;
    let probe = cluster
        .create(ConversationKind::Group, "sc_ann", &["sc_cy"])
        .await;
    let rest = cluster.rest(0, "sc_ann");
    let over = "y".repeat(TENANT_LIMIT + 1);
    eventually(
        "the gateway holds acme to its own limit",
        Duration::from_secs(10),
        || async {
            let refused = rest
                .post_message(
                    &probe,
                    &post(&switchboard_tests::unique("probe"), &over, None),
                )
                .await;
            matches!(refused, Err(e) if e.code() == Some("too_large")).then_some(())
        },
    )
    .await;
    let admin = cluster.rest_as(0, TENANT, "sc_root", true);
    let mut ann = cluster.ws(0, "sc_ann", "phone").await;

    // A rewrite within the tenant's limit is stored, whichever way in.
    deploy_rewrite(&admin, TENANT_LIMIT - 50, "closed").await;
    let within = "x".repeat(TENANT_LIMIT - 50);
    ann.send(&send_frame(&conv, "ws-1", "attack 1"))
        .await
        .unwrap();
    expect_ack(&mut ann, "ws-1").await;
    rest.post_message(&conv, &post("rest-1", "attack 2", None))
        .await
        .unwrap();
    schedule(&mut ann, &conv, "sched-1", "attack 3", &in_ms(1_500)).await;
    let texts = stored_texts(&cluster, &conv, 3).await;
    assert_eq!(
        texts,
        vec![within.clone(), within.clone(), within],
        "every way in stores the rewrite"
    );

    // A rewrite over it fails the moderator's call: closed, the socket
    // and REST are answered `unavailable` and nothing is stored; the
    // scheduled send waits for a moderator that answers.
    deploy_rewrite(&admin, TENANT_LIMIT + 50, "closed").await;
    ann.send(&send_frame(&conv, "ws-2", "attack 4"))
        .await
        .unwrap();
    let (code, _, client_msg_id, _) = expect_error(&mut ann).await;
    assert_eq!(
        (code.as_str(), client_msg_id.as_deref()),
        ("unavailable", Some("ws-2"))
    );
    let refused = rest
        .post_message(&conv, &post("rest-2", "attack 5", None))
        .await
        .unwrap_err();
    assert_eq!(
        (refused.status(), refused.code()),
        (Some(503), Some("unavailable")),
        "{refused}"
    );
    schedule(&mut ann, &conv, "sched-2", "attack 6", &in_ms(1_000)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        full_history(&cluster, &conv, "sc_bob").await.len(),
        3,
        "nothing over the limit is stored"
    );

    // Open, the content is stored as sent, whichever way in; the held
    // scheduled send goes too.
    deploy_rewrite(&admin, TENANT_LIMIT + 50, "open").await;
    ann.send(&send_frame(&conv, "ws-3", "attack 7"))
        .await
        .unwrap();
    expect_ack(&mut ann, "ws-3").await;
    rest.post_message(&conv, &post("rest-3", "attack 8", None))
        .await
        .unwrap();
    let texts = stored_texts(&cluster, &conv, 6).await;
    let mut last: Vec<&str> = texts[3..].iter().map(String::as_str).collect();
    last.sort_unstable();
    assert_eq!(
        last,
        vec!["attack 6", "attack 7", "attack 8"],
        "the content as sent, never the rewrite"
    );
}

/// The texts of the conversation once it holds `n` messages, oldest first.
async fn stored_texts(cluster: &Cluster, conv: &str, n: usize) -> Vec<String> {
    eventually(
        &format!("{n} messages stored"),
        Duration::from_secs(20),
        || async {
            let history = full_history(cluster, conv, "sc_bob").await;
            (history.len() >= n).then(|| {
                history
                    .iter()
                    .map(|m| match &m.content {
                        Some(Content::Text { .. }) => text_of(m).to_owned(),
                        other => format!("{other:?}"),
                    })
                    .collect()
            })
        },
    )
    .await
}
