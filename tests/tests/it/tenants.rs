//! F21 / I4: tenants administered live (the `switchboard tenant` CLI and
//! the operator API, key rotation with two keys valid at once), their
//! quotas held at and just past each threshold, and two tenants with the
//! same user and conversation ids that never meet.

use std::time::{Duration, Instant};
use switchboard_protocol::SendAck;

use serde_json::{Value, json};
use switchboard_client::token::ed25519_public_key;
use switchboard_client::{RestClient, TokenSpec, WsClient, WsError, mint_eddsa, mint_hs256};
use switchboard_protocol::{
    ClientFrame, ConversationId, ConversationKind, ErrorCode, ServerFrame, TypingState,
};
use switchboard_tests::cluster::{OPERATOR_TOKEN, OTHER_SECRET, OTHER_TENANT, SECRET, TENANT};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;
use switchboard_tests::eventually;

/// `switchboard tenant <args>` against the cluster's NATS: its output.
async fn cli(cluster: &Cluster, args: &[&str]) -> String {
    let out = tokio::process::Command::new(switchboard_tests::switchboard_bin())
        .arg("tenant")
        .args(["--nats-url", &cluster.nats.url()])
        .args(args)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "switchboard tenant {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn token(tenant: &str, secret: &str, user: &str) -> String {
    mint_hs256(secret, &TokenSpec::new(tenant, user, Some("d1"), 600)).unwrap()
}

/// The status of `GET /v1/conversations` with `token`.
async fn status_with(cluster: &Cluster, token: &str) -> u16 {
    RestClient::new(&cluster.gateways[0].http(), token)
        .raw()
        .get(format!("{}/v1/conversations", cluster.gateways[0].http()))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Waits (bounded) until `token` gets `want`: a change reaches the
/// gateways through the bucket within moments.
async fn until_status(cluster: &Cluster, token: &str, want: u16) {
    let what = format!("the token gets {want}");
    eventually(&what, Duration::from_secs(10), || async {
        (status_with(cluster, token).await == want).then_some(())
    })
    .await;
}

#[tokio::test]
async fn tenants_are_administered_live_through_the_cli_and_the_operator_api() {
    let cluster = Cluster::start(ClusterSpec::with_operator_api()).await;
    let first = "initech-first-secret-0123";
    let second = "initech-second-secret-0123";

    // Created with the CLI, usable at once on the running gateway.
    let shown = cli(&cluster, &["create", "initech", "--hs256-secret", first]).await;
    assert!(
        !shown.contains(first),
        "secrets are shown as fingerprints: {shown}"
    );
    until_status(&cluster, &token("initech", first, "alice"), 200).await;
    // A token signed with initech's key claiming another tenant: refused.
    assert_eq!(
        status_with(&cluster, &token(TENANT, first, "alice")).await,
        401
    );

    // Rotation: both keys valid, then only the new one.
    cli(&cluster, &["add-key", "initech", "--hs256-secret", second]).await;
    until_status(&cluster, &token("initech", second, "alice"), 200).await;
    assert_eq!(
        status_with(&cluster, &token("initech", first, "alice")).await,
        200
    );
    cli(
        &cluster,
        &["remove-key", "initech", "--hs256-secret", first],
    )
    .await;
    until_status(&cluster, &token("initech", first, "alice"), 401).await;
    assert_eq!(
        status_with(&cluster, &token("initech", second, "alice")).await,
        200
    );
    let listed = cli(&cluster, &["list"]).await;
    assert!(
        listed.contains("\"initech\"") && !listed.contains(second),
        "{listed}"
    );
    // The default retention (v1.2): set, bounded, removed.
    let set = cli(&cluster, &["set-retention", "initech", "30"]).await;
    assert!(set.contains("\"retention_days\": 30"), "{set}");
    let refused = tokio::process::Command::new(switchboard_tests::switchboard_bin())
        .args(["tenant", "--nats-url", &cluster.nats.url()])
        .args(["set-retention", "initech", "36501"])
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success());
    let off = cli(&cluster, &["set-retention", "initech", "--off"]).await;
    assert!(off.contains("\"retention_days\": null"), "{off}");

    // The operator API: only with the operator token.
    let path = "/v1/operator/tenants";
    assert_eq!(
        cluster
            .operator(reqwest::Method::GET, path, None, None)
            .await
            .0,
        401
    );
    assert_eq!(
        cluster
            .operator(
                reqwest::Method::GET,
                path,
                None,
                Some("operator-token-012345678X")
            )
            .await
            .0,
        401
    );
    // A tenant's admin token is no operator token.
    let admin = mint_hs256(SECRET, &TokenSpec::new(TENANT, "root", None, 600).admin()).unwrap();
    assert_eq!(
        cluster
            .operator(reqwest::Method::GET, path, None, Some(&admin))
            .await
            .0,
        401
    );
    let seed = [9u8; 32];
    let public = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        ed25519_public_key(&seed),
    );
    let (status, created) = cluster.operator(reqwest::Method::POST,
        path,
        Some(json!({"id": "umbrella", "ed25519_public_keys": [public], "quotas": {"max_message_bytes": 1000}})),
        Some(OPERATOR_TOKEN),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let eddsa = mint_eddsa(&seed, &TokenSpec::new("umbrella", "alice", None, 600)).unwrap();
    until_status(&cluster, &eddsa, 200).await;
    let (status, again) = cluster
        .operator(
            reqwest::Method::POST,
            path,
            Some(json!({"id": "umbrella"})),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(
        (status, again["code"].clone()),
        (409, json!(ErrorCode::Conflict))
    );
    let (status, bad) = cluster
        .operator(
            reqwest::Method::POST,
            path,
            Some(json!({"id": "short", "hs256_secrets": ["short"]})),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(
        (status, bad["code"].clone()),
        (400, json!(ErrorCode::InvalidRequest))
    );
    let (status, changed) = cluster
        .operator(
            reqwest::Method::PATCH,
            "/v1/operator/tenants/umbrella",
            Some(json!({"quotas": {"max_message_bytes": null, "max_connections": 10}})),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(changed["quotas"]["max_connections"], 10);
    assert!(changed["quotas"]["max_message_bytes"].is_null());
    let (status, all) = cluster
        .operator(reqwest::Method::GET, path, None, Some(OPERATOR_TOKEN))
        .await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = all["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["initech", "umbrella"]);
    assert!(!all.to_string().contains(second));

    // Deleted: its tokens stop verifying.
    let (status, _) = cluster
        .operator(
            reqwest::Method::DELETE,
            "/v1/operator/tenants/umbrella",
            None,
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 204);
    until_status(&cluster, &eddsa, 401).await;
    cli(&cluster, &["delete", "initech"]).await;
    until_status(&cluster, &token("initech", second, "alice"), 401).await;
    // The file's tenants were never touched.
    assert_eq!(
        status_with(&cluster, &token(TENANT, SECRET, "alice")).await,
        200
    );
}

async fn ws(
    cluster: &Cluster,
    tenant: &str,
    secret: &str,
    user: &str,
    device: &str,
) -> Result<WsClient, WsError> {
    let t = mint_hs256(secret, &TokenSpec::new(tenant, user, Some(device), 600)).unwrap();
    switchboard_tests::connect_ws(&cluster.gateways[0].ws(), &t).await
}

fn refused_with_quota(result: Result<WsClient, WsError>) {
    match result {
        Err(WsError::Refused { status, body }) => {
            assert_eq!(status, 429, "{body}");
            assert!(body.contains("quota_exceeded"), "{body}");
        }
        Err(e) => panic!("expected a 429, got {e}"),
        Ok(_) => panic!("expected a 429, got a connection"),
    }
}

#[tokio::test]
async fn tenant_quotas_hold_at_and_just_past_each_threshold() {
    let cluster = Cluster::start(ClusterSpec::with_operator_api()).await;
    let secret = "quota-tenant-secret-0123";
    let (status, body) = cluster
        .operator(
            reqwest::Method::POST,
            "/v1/operator/tenants",
            Some(json!({"id": "q", "hs256_secrets": [secret], "quotas": {
            "max_connections_per_user": 2, "max_connections": 3,
            "messages_per_second_per_connection": 5, "max_members_per_conversation": 3,
            "max_message_bytes": 100}})),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    until_status(&cluster, &token("q", secret, "u1"), 200).await;
    let rest = |user: &str| RestClient::new(&cluster.gateways[0].http(), &token("q", secret, user));

    // Connections: two per user, three per tenant.
    let u1a = ws(&cluster, "q", secret, "u1", "a").await.unwrap();
    let mut u1b = ws(&cluster, "q", secret, "u1", "b").await.unwrap();
    refused_with_quota(ws(&cluster, "q", secret, "u1", "c").await);
    let mut u2 = ws(&cluster, "q", secret, "u2", "a").await.unwrap();
    refused_with_quota(ws(&cluster, "q", secret, "u3", "a").await);
    u1a.close().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let _u3 = loop {
        match ws(&cluster, "q", secret, "u3", "a").await {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("a freed place is usable again: {e}"),
        }
    };

    // Members per conversation: three, not four (creating and adding).
    let e = rest("u1")
        .create_conversation(ConversationKind::Group, &["u2", "u3", "u4"], None)
        .await
        .unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(429), Some("quota_exceeded")),
        "{e}"
    );
    let (group, _) = rest("u1")
        .create_conversation(ConversationKind::Group, &["u2", "u3"], None)
        .await
        .unwrap();
    let conv = group.conversation_id.as_str().to_owned();
    let e = rest("u1").add_members(&conv, &["u4"]).await.unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(429), Some("quota_exceeded")),
        "{e}"
    );

    // Message size: 100 bytes, not 101.
    send_acked(&mut u1b, &conv, "size-100", &"x".repeat(100)).await;
    u1b.send(&send_frame(&conv, "size-101", &"x".repeat(101)))
        .await
        .unwrap();
    assert_eq!(expect_error(&mut u1b).await.0, ErrorCode::TooLarge);

    // Messages per second per connection: a burst of five, not six
    // (one is spent above, so wait for the bucket to fill again).
    tokio::time::sleep(Duration::from_millis(1200)).await;
    for i in 0..6 {
        u2.send(&send_frame(&conv, &format!("burst-{i}"), "hi"))
            .await
            .unwrap();
    }
    let mut acked = 0;
    let mut limited = 0;
    while acked + limited < 6 {
        match u2.next_frame_within(Duration::from_secs(10)).await.unwrap() {
            ServerFrame::Ack(SendAck { .. }) => acked += 1,
            ServerFrame::Error {
                code: ErrorCode::RateLimited,
                ..
            } => limited += 1,
            _ => {}
        }
    }
    assert_eq!((acked, limited), (5, 1));

    // Changes apply without a restart: one more connection per user now,
    // and a tenant-wide rate of 3 messages a second across connections.
    let (status, _) = cluster
        .operator(
            reqwest::Method::PATCH,
            "/v1/operator/tenants/q",
            Some(
                json!({"quotas": {"max_connections_per_user": 3, "max_connections": null,
            "messages_per_second_per_connection": null, "messages_per_second": 3}}),
            ),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut u2b = loop {
        match ws(&cluster, "q", secret, "u2", "b").await {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("the raised quota applies: {e}"),
        }
    };
    tokio::time::sleep(Duration::from_millis(1200)).await;
    for i in 0..4 {
        let c = if i % 2 == 0 { &mut u2 } else { &mut u2b };
        c.send(&send_frame(&conv, &format!("tenant-{i}"), "hi"))
            .await
            .unwrap();
    }
    let (mut acked, mut limited) = (0, 0);
    for c in [&mut u2, &mut u2b] {
        for _ in 0..2 {
            loop {
                match c.next_frame_within(Duration::from_secs(10)).await.unwrap() {
                    ServerFrame::Ack(SendAck { .. }) => {
                        acked += 1;
                        break;
                    }
                    ServerFrame::Error {
                        code: ErrorCode::RateLimited,
                        ..
                    } => {
                        limited += 1;
                        break;
                    }
                    _ => {}
                }
            }
        }
    }
    assert_eq!(
        (acked, limited),
        (3, 1),
        "three a second for the tenant, not four"
    );
}

#[tokio::test]
async fn two_tenants_with_the_same_ids_never_meet() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let acme = |u: &str| RestClient::new(&cluster.gateways[0].http(), &token(TENANT, SECRET, u));
    let globex = |u: &str| {
        RestClient::new(
            &cluster.gateways[0].http(),
            &token(OTHER_TENANT, OTHER_SECRET, u),
        )
    };
    // The same direct conversation id in both tenants.
    let (a, _) = acme("alice")
        .create_conversation(ConversationKind::Direct, &["bob"], None)
        .await
        .unwrap();
    let (g, _) = globex("alice")
        .create_conversation(ConversationKind::Direct, &["bob"], None)
        .await
        .unwrap();
    assert_eq!(a.conversation_id, g.conversation_id);
    let conv = a.conversation_id.as_str().to_owned();
    let mut acme_alice = ws(&cluster, TENANT, SECRET, "alice", "a").await.unwrap();
    let mut acme_bob = ws(&cluster, TENANT, SECRET, "bob", "b").await.unwrap();
    let mut globex_alice = ws(&cluster, OTHER_TENANT, OTHER_SECRET, "alice", "a")
        .await
        .unwrap();
    let mut globex_bob = ws(&cluster, OTHER_TENANT, OTHER_SECRET, "bob", "b")
        .await
        .unwrap();

    // Messages.
    send_acked(&mut acme_alice, &conv, "m1", "for acme's bob").await;
    assert_eq!(
        text_of(&expect_message(&mut acme_bob).await),
        "for acme's bob"
    );
    send_acked(&mut globex_alice, &conv, "m1", "for globex's bob").await;
    assert_eq!(
        text_of(&expect_message(&mut globex_bob).await),
        "for globex's bob"
    );
    // Receipts.
    acme_bob
        .send(&ClientFrame::AckRead {
            conversation_id: ConversationId::new(&conv).unwrap(),
            seq: 1,
            thread_id: None,
        })
        .await
        .unwrap();
    // The read mark moves the delivered one with it: two receipts.
    expect(&mut acme_alice, "acme's read receipt", |f| match f {
        ServerFrame::Receipt {
            kind: switchboard_protocol::ReceiptKind::Read,
            ..
        } => Some(()),
        _ => None,
    })
    .await;
    // Typing.
    acme_alice
        .send(&ClientFrame::Typing {
            conversation_id: ConversationId::new(&conv).unwrap(),
            state: TypingState::Start,
        })
        .await
        .unwrap();
    expect(&mut acme_bob, "acme's typing", |f| match f {
        ServerFrame::Typing { .. } => Some(()),
        _ => None,
    })
    .await;
    // Globex heard none of acme's message, receipt or typing, and acme
    // none of globex's.
    for c in [
        &mut globex_alice,
        &mut globex_bob,
        &mut acme_alice,
        &mut acme_bob,
    ] {
        silent(c).await;
    }

    // History and lists over REST: each tenant its own.
    for (rest, text) in [
        (acme("bob"), "for acme's bob"),
        (globex("bob"), "for globex's bob"),
    ] {
        let page = rest.history(&conv, Default::default()).await.unwrap();
        let texts: Vec<&str> = page.messages.iter().map(text_of).collect();
        assert_eq!(texts, vec![text]);
        let list = rest.conversations().await.unwrap();
        assert_eq!(list.conversations.len(), 1);
    }

    // Presence: globex's alice goes away; acme's alice stays online, and
    // globex's bob sees his alice offline.
    globex_alice.close().await;
    let presence = |rest: RestClient| async move {
        let r: Value = rest
            .raw()
            .get(format!("{}/v1/users/alice/presence", rest.base()))
            .bearer_auth(rest.token())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        r["status"].as_str().unwrap().to_owned()
    };
    eventually(
        "globex's alice goes offline",
        Duration::from_secs(10),
        || async { (presence(globex("bob")).await == "offline").then_some(()) },
    )
    .await;
    assert_eq!(presence(acme("bob")).await, "online");

    // Media: acme's upload is not globex's to download, even by the same id.
    let grant: Value = acme("alice")
        .raw()
        .post(format!("{}/v1/media", cluster.gateways[0].http()))
        .bearer_auth(token(TENANT, SECRET, "alice"))
        .json(&json!({"mime": "text/plain", "size": 5}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let blob = grant["blob_ref"].as_str().unwrap();
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/v1/media/{blob}", cluster.gateways[0].http()))
        .bearer_auth(token(OTHER_TENANT, OTHER_SECRET, "alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);

    // A token signed with one tenant's key is refused for the other.
    assert_eq!(
        status_with(&cluster, &token(OTHER_TENANT, SECRET, "alice")).await,
        401
    );
    assert_eq!(
        status_with(&cluster, &token(TENANT, OTHER_SECRET, "alice")).await,
        401
    );
}

/// Nothing but keepalives arrives for a while.
async fn silent(c: &mut WsClient) {
    loop {
        match c.next_frame_within(Duration::from_millis(300)).await {
            Err(WsError::Timeout(_)) => return,
            Ok(ServerFrame::Presence { .. }) => {}
            other => panic!("expected silence, got {other:?}"),
        }
    }
}

/// A tenant's plugin quota lowers its own plugin calls' limits (here fuel)
/// without touching the deployment's or another tenant's; the moderation
/// hook then fails closed, as any plugin failure does.
#[tokio::test]
async fn a_tenant_plugin_quota_lowers_its_plugin_calls_limits() {
    let cluster = Cluster::start(ClusterSpec::with_operator_api()).await;
    let secret = "plugin-quota-secret-0123";
    let (status, _) = cluster
        .operator(
            reqwest::Method::POST,
            "/v1/operator/tenants",
            Some(json!({"id": "plug", "hs256_secrets": [secret]})),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201);
    until_status(&cluster, &token("plug", secret, "alice"), 200).await;
    let admin = RestClient::new(
        &cluster.gateways[0].http(),
        &mint_hs256(secret, &TokenSpec::new("plug", "root", None, 600).admin()).unwrap(),
    );
    admin
        .deploy_plugin(
            "moderation",
            switchboard_tests::plugin("word-list"),
            &[],
            None,
        )
        .await
        .unwrap();
    let rest = RestClient::new(&cluster.gateways[0].http(), &token("plug", secret, "alice"));
    let (group, _) = rest
        .create_conversation(ConversationKind::Group, &["bob"], None)
        .await
        .unwrap();
    let conv = group.conversation_id.as_str().to_owned();
    let mut alice = ws(&cluster, "plug", secret, "alice", "a").await.unwrap();
    assert_eq!(attempt(&mut alice, &conv, "before").await, Ok(()));
    let set_fuel = |fuel: Value| {
        let cluster = &cluster;
        async move {
            let (status, _) = cluster
                .operator(
                    reqwest::Method::PATCH,
                    "/v1/operator/tenants/plug",
                    Some(json!({"quotas": {"plugin_fuel": fuel}})),
                    Some(OPERATOR_TOKEN),
                )
                .await;
            assert_eq!(status, 200);
        }
    };
    set_fuel(json!(1)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut i = 0;
    loop {
        i += 1;
        match attempt(&mut alice, &conv, &format!("starved-{i}")).await {
            Err(code) => {
                assert_eq!(code, ErrorCode::Unavailable, "moderation fails closed");
                break;
            }
            Ok(()) => assert!(Instant::now() < deadline, "the fuel quota never applied"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Lifting the quota restores the plugin.
    set_fuel(Value::Null).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        i += 1;
        if attempt(&mut alice, &conv, &format!("fed-{i}"))
            .await
            .is_ok()
        {
            break;
        }
        assert!(Instant::now() < deadline, "lifting the quota never applied");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The answer to one send: `Ok(())` for an ack, `Err(code)` for an error.
async fn attempt(alice: &mut WsClient, conv: &str, id: &str) -> Result<(), ErrorCode> {
    alice
        .send(&send_frame(conv, id, "well darn it"))
        .await
        .unwrap();
    loop {
        match alice
            .next_frame_within(Duration::from_secs(10))
            .await
            .unwrap()
        {
            ServerFrame::Ack(SendAck { .. }) => return Ok(()),
            ServerFrame::Error { code, .. } => return Err(code),
            _ => {}
        }
    }
}

/// An operator's command against a NATS that is not there ends within its
/// `--timeout` with a message saying so, rather than waiting without end.
#[tokio::test]
async fn a_tenant_command_without_nats_ends_within_its_timeout() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let out = tokio::process::Command::new(switchboard_tests::switchboard_bin())
        .args(["tenant", "--nats-url", &format!("nats://127.0.0.1:{port}")])
        .args(["--timeout", "2", "list"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("no answer from NATS") && stderr.contains("within 2s"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
}

/// Guessing the operator token is slow: past `operator_failures_per_minute`
/// wrong tokens (10) from one address, the operator API answers 429 to
/// that address, right token or not, while tenants' own requests go on.
#[tokio::test]
async fn wrong_operator_tokens_lock_the_address_out_for_a_minute() {
    let cluster = Cluster::start(ClusterSpec::with_operator_api()).await;
    let path = "/v1/operator/tenants";
    for i in 0..10 {
        let (status, body) = cluster
            .operator(
                reqwest::Method::GET,
                path,
                None,
                Some(&format!("guess-{i:02}-0123456789")),
            )
            .await;
        assert_eq!(status, 401, "wrong token {i}: {body}");
    }
    let (status, body) = cluster
        .operator(
            reqwest::Method::GET,
            path,
            None,
            Some("guess-10-0123456789"),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (429, Some("rate_limited")),
        "{body}"
    );
    let (status, _) = cluster
        .operator(reqwest::Method::GET, path, None, Some(OPERATOR_TOKEN))
        .await;
    assert_eq!(
        status, 429,
        "the right token is refused too while locked out"
    );
    let (status, _) = cluster
        .operator(reqwest::Method::GET, path, None, None)
        .await;
    assert_eq!(status, 401, "no token is no guess: 401 as ever");
    assert!(cluster.rest(0, "alice").conversations().await.is_ok());
}
