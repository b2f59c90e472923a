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

/// Moderation without code (v1.3): the tenant's word list, set by its
/// admins, holds on every way in (socket, REST, scheduled, edits) and
/// comes before the tenant's plugin; `reject` refuses, `mask` stores the
/// text with the words starred; its bounds are tested at and past them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenants_word_list_holds_on_every_way_in() {
    use crate::support::{call, edit_frame};
    let cluster = Cluster::start(ClusterSpec::with_operator_api()).await;
    let (status, body) = cluster
        .operator(
            reqwest::Method::POST,
            "/v1/operator/tenants",
            Some(json!({"id": TENANT, "hs256_secrets": [SECRET]})),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let conv = cluster
        .create(ConversationKind::Group, "wl_ann", &["sc_bob"])
        .await;
    let admin = cluster.rest_as(0, TENANT, "wl_root", true);
    let ann_rest = cluster.rest(0, "wl_ann");

    let (status, body) = call(
        &ann_rest,
        "PUT",
        "/v1/admin/blocklist",
        Some(json!({"words": ["darn"]})),
    )
    .await;
    assert_eq!(status, 403, "tenant admins only: {body}");
    let (_, none) = call(&admin, "GET", "/v1/admin/blocklist", None).await;
    assert_eq!(none, json!({"words": [], "mode": "reject"}));
    // At and past its bounds: 1000 words, 64 characters each.
    let words = |n: usize, w: &str| json!({"words": vec![w; n]});
    for (list, ok) in [
        (words(1000, "w"), true),
        (words(1001, "w"), false),
        (words(1, &"é".repeat(64)), true),
        (words(1, &"é".repeat(65)), false),
        (words(1, "two words"), false),
        (json!({"words": ["w"], "mode": "shout"}), false),
    ] {
        let (status, body) = call(&admin, "PUT", "/v1/admin/blocklist", Some(list)).await;
        if ok {
            assert_eq!(status, 200, "{body}");
        } else {
            assert_eq!(
                (status, body["code"].as_str()),
                (400, Some("invalid_request")),
                "{body}"
            );
        }
    }
    let (status, set) = call(
        &admin,
        "PUT",
        "/v1/admin/blocklist",
        Some(json!({"words": ["Darn", "heck", "darn"], "mode": "reject"})),
    )
    .await;
    assert_eq!(status, 200, "{set}");
    assert_eq!(set, json!({"words": ["darn", "heck"], "mode": "reject"}));
    let (_, got) = call(&admin, "GET", "/v1/admin/blocklist", None).await;
    assert_eq!(got, set);

    // Reject: refused over REST and the socket, as whole words only.
    eventually(
        "the gateway holds the list",
        Duration::from_secs(10),
        || async {
            let refused = ann_rest
                .post_message(
                    &conv,
                    &post(&switchboard_tests::unique("probe"), "oh DARN", None),
                )
                .await;
            matches!(refused, Err(e) if e.code() == Some("rejected_by_policy")).then_some(())
        },
    )
    .await;
    let mut ann = cluster.ws(0, "wl_ann", "phone").await;
    ann.send(&send_frame(&conv, "ws-1", "well, heck."))
        .await
        .unwrap();
    let (code, _, id, _) = expect_error(&mut ann).await;
    assert_eq!(
        (code.as_str(), id.as_deref()),
        ("rejected_by_policy", Some("ws-1"))
    );
    ann.send(&send_frame(&conv, "ws-2", "darned hecks"))
        .await
        .unwrap();
    let (first, _) = expect_ack(&mut ann, "ws-2").await;
    // An edit is screened like a send.
    ann.send(&edit_frame(&conv, first, "darn")).await.unwrap();
    let (code, _, _, _) = expect_error(&mut ann).await;
    assert_eq!(code.as_str(), "rejected_by_policy");

    // Mask: stored with the words starred, whichever way in.
    let (status, body) = call(
        &admin,
        "PUT",
        "/v1/admin/blocklist",
        Some(json!({"words": ["darn", "heck"], "mode": "mask"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    eventually("the gateway masks", Duration::from_secs(10), || async {
        let sent = ann_rest
            .post_message(
                &conv,
                &post(&switchboard_tests::unique("mask"), "HECK yes", None),
            )
            .await
            .ok()?;
        let text = match &sent.content {
            Some(Content::Text { text }) => text.clone(),
            _ => return None,
        };
        (text == "**** yes").then_some(())
    })
    .await;
    ann.send(&send_frame(&conv, "ws-3", "well darn it"))
        .await
        .unwrap();
    expect_ack(&mut ann, "ws-3").await;
    schedule(&mut ann, &conv, "sched-1", "darn, later", &in_ms(1_000)).await;
    ann.send(&edit_frame(&conv, first, "edited, heck"))
        .await
        .unwrap();
    let history = eventually(
        "the masked texts stored",
        Duration::from_secs(20),
        || async {
            let history = full_history(&cluster, &conv, "sc_bob").await;
            let edited = history
                .iter()
                .any(|m| m.message_id == first && text_of(m) == "edited, ****");
            let scheduled = history.iter().any(|m| text_of(m) == "****, later");
            (edited && scheduled).then_some(history)
        },
    )
    .await;
    let texts: Vec<&str> = history.iter().map(text_of).collect();
    assert!(texts.contains(&"well **** it"), "{texts:?}");
    let listed = |t: &str| {
        t.split(|c: char| !c.is_alphanumeric())
            .any(|w| ["darn", "heck"].contains(&w.to_lowercase().as_str()))
    };
    assert!(
        !texts.iter().any(|t| listed(t)),
        "nothing listed is stored: {texts:?}"
    );

    // An empty list turns it off.
    let (status, body) = call(
        &admin,
        "PUT",
        "/v1/admin/blocklist",
        Some(json!({"words": [], "mode": "mask"})),
    )
    .await;
    assert_eq!((status, &body["words"]), (200, &json!([])), "{body}");
    eventually("the list is off", Duration::from_secs(10), || async {
        let sent = ann_rest
            .post_message(
                &conv,
                &post(&switchboard_tests::unique("off"), "darn", None),
            )
            .await
            .ok()?;
        // Stored as sent: the ack carries no content.
        sent.content.is_none().then_some(())
    })
    .await;
}
