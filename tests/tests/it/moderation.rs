//! Moderation without code (v1.3), from outside: a tenant admin's
//! tenant-wide bans refuse the user's tokens on every gateway and close
//! their open connections, within the documented bounds, and the NATS
//! commands of the bans' bucket work as written; every change is in the
//! tenant's audit log and sent to its webhooks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use serde_json::{Value, json};
use switchboard_client::{RestClient, TokenSpec, WsClient, WsError, mint_hs256};
use switchboard_protocol::{ConversationKind, ErrorCode};
use switchboard_tests::cluster::TENANT;
use switchboard_tests::nats_cli::{self, expect};
use switchboard_tests::{Cluster, ClusterSpec, eventually};

use crate::support::{
    call, closed_within, create_tenant_record, expect_error, full_history, send_acked,
};

const ADMIN: &str = "root";
const MALLORY: &str = "mallory";

/// Waits until `rest`'s user is answered `status` (403 `banned` or 200)
/// on a plain read.
async fn until_status(rest: &RestClient, status: u16) -> Value {
    eventually("the ban's change", Duration::from_secs(10), || async {
        let (got, body) = call(rest, "GET", "/v1/conversations", None).await;
        (got == status).then_some(body)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_ban_refuses_the_users_tokens_and_ends_their_sessions_everywhere() {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        extra_config: "[limits]\nmax_tenant_bans = 2\n".into(),
        ..Default::default()
    })
    .await;
    let group = cluster
        .create(ConversationKind::Group, "bob", &[MALLORY])
        .await;
    let mut phone = cluster.ws(0, MALLORY, "phone").await;
    let mut laptop = cluster.ws(1, MALLORY, "laptop").await;
    let mut bob = cluster.ws(1, "bob", "b").await;
    send_acked(&mut phone, &group, "m1", "before the ban").await;
    // Due after the ban below: it does not go.
    crate::scheduled::schedule(
        &mut phone,
        &group,
        "queued",
        "scheduled before the ban",
        &crate::scheduled::in_ms(3000),
    )
    .await;
    let admin = cluster.rest_as(0, TENANT, ADMIN, true);
    let far_admin = cluster.rest_as(1, TENANT, ADMIN, true);

    // Only tenant admins ban, and nobody bans themselves.
    let (status, body) = call(
        &cluster.rest(0, "bob"),
        "PUT",
        "/v1/admin/bans/mallory",
        Some(json!({})),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    let (status, body) = call(&admin, "PUT", "/v1/admin/bans/root", Some(json!({}))).await;
    assert_eq!(status, 403, "{body}");

    let (status, ban) = call(
        &admin,
        "PUT",
        "/v1/admin/bans/mallory",
        Some(json!({"reason": "spam"})),
    )
    .await;
    assert_eq!(status, 200, "{ban}");
    assert_eq!(ban["user_id"], MALLORY);
    assert_eq!(ban["by"], ADMIN);
    assert_eq!(ban["reason"], "spam");
    assert!(ban["until"].is_null(), "{ban}");
    // Every open connection closes, on this gateway and the other.
    for ws in [&mut phone, &mut laptop] {
        assert_eq!(closed_within(ws, Duration::from_secs(10)).await, 4005);
    }
    // Her tokens are refused on REST (at once where the ban was made) and
    // at the WebSocket upgrade.
    let (status, body) = call(&cluster.rest(0, MALLORY), "GET", "/v1/conversations", None).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("banned")),
        "{body}"
    );
    let body = until_status(&cluster.rest(1, MALLORY), 403).await;
    assert_eq!(body["code"], "banned");
    for gateway in &cluster.ws_urls() {
        match switchboard_tests::connect_ws(gateway, &cluster.token(MALLORY, "tablet")).await {
            Err(WsError::Refused { status, body }) => {
                assert_eq!(status, 403);
                assert!(body.contains("banned"), "{body}");
            }
            Err(e) => panic!("expected 403 banned, got {e}"),
            Ok(_) => panic!("a banned user connected"),
        }
    }
    // Everyone else goes on; her scheduled message, due now, is refused
    // by the conversation's writer.
    send_acked(&mut bob, &group, "b1", "still here").await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    send_acked(&mut bob, &group, "b2", "after her scheduled time").await;
    let texts: Vec<String> = full_history(&cluster, &group, "bob")
        .await
        .iter()
        .filter_map(|m| match &m.content {
            Some(switchboard_protocol::Content::Text { text }) => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(
        !texts.iter().any(|t| t == "scheduled before the ban"),
        "{texts:?}"
    );

    // The list, for admins only; the far gateway has it too.
    let (status, _) = call(&cluster.rest(0, "bob"), "GET", "/v1/admin/bans", None).await;
    assert_eq!(status, 403);
    let listed = eventually(
        "the ban on the far gateway",
        Duration::from_secs(10),
        || async {
            let (_, list) = call(&far_admin, "GET", "/v1/admin/bans", None).await;
            (list["bans"].as_array().map(Vec::len) == Some(1)).then_some(list)
        },
    )
    .await;
    assert_eq!(listed["bans"][0], ban);

    // The bounds: a reason of 500 characters and not 501, an `until` in
    // the future, and `max_tenant_bans` (2 here) in force.
    let at_most = "r".repeat(500);
    let (status, body) = call(
        &admin,
        "PUT",
        "/v1/admin/bans/eve",
        Some(json!({"reason": format!("{at_most}!")})),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_request")),
        "{body}"
    );
    let (status, body) = call(
        &admin,
        "PUT",
        "/v1/admin/bans/eve",
        Some(json!({"until": "2020-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = call(
        &admin,
        "PUT",
        "/v1/admin/bans/eve",
        Some(json!({"reason": at_most})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(&admin, "PUT", "/v1/admin/bans/trent", Some(json!({}))).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("conflict")),
        "{body}"
    );
    // Banning again replaces the ban, at the bound too.
    let (status, again) = call(
        &admin,
        "PUT",
        "/v1/admin/bans/mallory",
        Some(json!({"reason": "spam, again"})),
    )
    .await;
    assert_eq!(
        (status, again["reason"].as_str()),
        (200, Some("spam, again")),
        "{again}"
    );

    // Pages, newest first.
    let (_, first) = call(&admin, "GET", "/v1/admin/bans?limit=1", None).await;
    assert_eq!(first["bans"][0]["user_id"], MALLORY, "{first}");
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let (_, second) = call(
        &admin,
        "GET",
        &format!("/v1/admin/bans?limit=1&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(second["bans"][0]["user_id"], "eve", "{second}");
    assert!(second.get("next_cursor").is_none(), "{second}");
    let (status, _) = call(&admin, "GET", "/v1/admin/bans?cursor=nonsense", None).await;
    assert_eq!(status, 400);

    // The bucket as the operator sees it, with the commands of
    // nats/README.md.
    let server = cluster.nats.url();
    let (status, body) = call(
        &admin,
        "PUT",
        "/v1/admin/shadow_bans/mallory",
        Some(json!({"reason": "shadowed"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut checked = 0;
    for line in nats_cli::documented("nats/README.md", "## KV bucket `sb_tenant_bans`") {
        checked += 1;
        match line.as_str() {
            "nats kv ls sb_tenant_bans" => {
                expect(
                    &nats_cli::run(&server, &line, &[]).await,
                    &["acme.mallory", "acme.eve"],
                );
            }
            "nats kv get sb_tenant_bans acme.mallory --raw" => {
                expect(
                    &nats_cli::run(&server, &line, &[]).await,
                    &["spam, again", "\"by\":\"root\""],
                );
            }
            "nats kv get sb_tenant_bans acme.mallory.shadow --raw" => {
                expect(
                    &nats_cli::run(&server, &line, &[]).await,
                    &["shadowed", "\"user_id\":\"mallory\""],
                );
            }
            // Lifted by the operator: her tokens work again everywhere.
            "nats kv del sb_tenant_bans acme.mallory -f" => {
                expect(&nats_cli::run(&server, &line, &[]).await, &[]);
                until_status(&cluster.rest(0, MALLORY), 200).await;
                until_status(&cluster.rest(1, MALLORY), 200).await;
            }
            "nats kv add sb_tenant_bans --history 1 --storage file --replicas 1"
            | "nats stream edit KV_sb_tenant_bans --no-allow-rollup -f" => {}
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    assert_eq!(checked, 6);
    let (status, _) = call(&admin, "DELETE", "/v1/admin/shadow_bans/mallory", None).await;
    assert_eq!(status, 204);
    let section = nats_cli::documented("nats/README.md", "## KV bucket `sb_tenant_bans`");
    crate::nats_cli::check_kv_add(
        &section,
        &async_nats::jetstream::new(cluster.nats.client().await),
    )
    .await;

    // A ban that ends by itself: refused until then, admitted after.
    let until = switchboard_protocol::Timestamp::from_unix_ms(
        switchboard_protocol::Timestamp::now().unix_ms() + 3000,
    );
    let (status, body) = call(
        &admin,
        "PUT",
        "/v1/admin/bans/mallory",
        Some(json!({"until": until})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = call(&cluster.rest(0, MALLORY), "GET", "/v1/conversations", None).await;
    assert_eq!(status, 403);
    until_status(&cluster.rest(0, MALLORY), 200).await;

    // Lifted by an admin: 204, and idempotent.
    for _ in 0..2 {
        let (status, _) = call(&admin, "DELETE", "/v1/admin/bans/eve", None).await;
        assert_eq!(status, 204);
    }
    until_status(&cluster.rest(1, "eve"), 200).await;
    let mut back = cluster.ws(0, MALLORY, "phone").await;
    send_acked(&mut back, &group, "m2", "back again").await;
}

const HOOKED: &str = "auditco";
const HOOKED_SECRET: &str = "auditco-secret-0123456789";

/// A webhook endpoint that keeps every body it is POSTed.
async fn event_sink() -> (String, Arc<Mutex<Vec<Value>>>) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let app = axum::Router::new()
        .route(
            "/events",
            axum::routing::post(
                |State(got): State<Arc<Mutex<Vec<Value>>>>, body: axum::body::Bytes| async move {
                    if let Ok(event) = serde_json::from_slice(&body) {
                        got.lock().unwrap().push(event);
                    }
                    axum::http::StatusCode::OK
                },
            ),
        )
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/events", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

/// Every change of the word list and the bans is in the tenant's audit
/// log, newest first and in pages, for its admins only, and reaches the
/// webhooks that take `moderation.audit`; another tenant's log holds
/// none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_moderation_change_is_audited_and_sent_as_an_event() {
    let mut spec = ClusterSpec::with_operator_api();
    spec.extra_config
        .push_str("\n[push]\nallow_private_targets = true\n");
    let cluster = Cluster::start(spec).await;
    create_tenant_record(&cluster, HOOKED, HOOKED_SECRET).await;
    let as_user = |user: &str, admin: bool| {
        let mut spec = TokenSpec::new(HOOKED, user, Some("d"), 600);
        if admin {
            spec = spec.admin();
        }
        RestClient::new(
            &cluster.gateways[0].http(),
            &mint_hs256(HOOKED_SECRET, &spec).unwrap(),
        )
    };
    let admin = as_user(ADMIN, true);
    let (url, events) = event_sink().await;
    let hooks = json!({"webhooks": [{"url": url, "secret": "auditco-hook-secret-0123", "events": ["moderation.audit"]}]});
    eventually(
        "the tenant takes webhooks",
        Duration::from_secs(10),
        || async {
            let (status, _) = call(&admin, "PUT", "/v1/admin/webhooks", Some(hooks.clone())).await;
            (status == 200).then_some(())
        },
    )
    .await;

    let (status, body) = call(
        &admin,
        "PUT",
        "/v1/admin/blocklist",
        Some(json!({"words": ["darn", "heck"], "mode": "mask"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        &admin,
        "PUT",
        "/v1/admin/bans/mallory",
        Some(json!({"reason": "spam"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = call(&admin, "DELETE", "/v1/admin/bans/mallory", None).await;
    assert_eq!(status, 204);

    let (status, log) = call(&admin, "GET", "/v1/admin/audit", None).await;
    assert_eq!(status, 200, "{log}");
    let entries = log["entries"].as_array().unwrap();
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["user_unbanned", "user_banned", "blocklist_set"],
        "{log}"
    );
    for e in entries {
        assert_eq!(e["actor"], ADMIN, "{e}");
        assert!(e["at"].is_string() && e["id"].is_string(), "{e}");
    }
    assert_eq!(entries[1]["user_id"], "mallory");
    assert_eq!(entries[1]["details"]["reason"], "spam");
    assert_eq!(entries[2]["details"], json!({"words": 2, "mode": "mask"}));
    assert!(entries[2].get("user_id").is_none(), "{log}");
    assert!(log.get("next_cursor").is_none(), "{log}");

    // Pages.
    let (_, first) = call(&admin, "GET", "/v1/admin/audit?limit=2", None).await;
    assert_eq!(first["entries"].as_array().unwrap().len(), 2, "{first}");
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let (_, rest) = call(
        &admin,
        "GET",
        &format!("/v1/admin/audit?limit=2&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(rest["entries"].as_array().unwrap().len(), 1, "{rest}");
    assert_eq!(rest["entries"][0], entries[2]);
    assert!(rest.get("next_cursor").is_none(), "{rest}");
    let (status, _) = call(&admin, "GET", "/v1/admin/audit?cursor=12", None).await;
    assert_eq!(status, 400);

    // Admins only; another tenant's log is its own.
    let (status, _) = call(&as_user("ann", false), "GET", "/v1/admin/audit", None).await;
    assert_eq!(status, 403);
    let (status, other) = call(
        &cluster.rest_as(0, TENANT, ADMIN, true),
        "GET",
        "/v1/admin/audit",
        None,
    )
    .await;
    assert_eq!(status, 200, "{other}");
    assert_eq!(other["entries"], json!([]), "{other}");

    // Each entry as a webhook event, as the log has it.
    let got = eventually("three audit events", Duration::from_secs(20), || async {
        let got = events.lock().unwrap().clone();
        (got.len() >= 3).then_some(got)
    })
    .await;
    let mut sent: Vec<Value> = got
        .iter()
        .inspect(|e| {
            assert_eq!(e["type"], "moderation.audit", "{e}");
            assert_eq!(e["tenant"], HOOKED, "{e}");
            assert!(e.get("conversation_id").is_none(), "{e}");
        })
        .map(|e| e["data"]["entry"].clone())
        .collect();
    sent.sort_by_key(|e| std::cmp::Reverse(e["id"].as_str().unwrap().parse::<u64>().unwrap()));
    sent.dedup();
    assert_eq!(&sent[..], &entries[..]);

    // The stream as the operator sees it, with the commands of
    // nats/README.md (the docs' tenant is acme: its subject here is
    // auditco's).
    let server = cluster.nats.url();
    let mut checked = 0;
    for line in nats_cli::documented(
        "nats/README.md",
        "## Stream `SB_AUDIT` and consumer `audit-events`",
    ) {
        checked += 1;
        match line.as_str() {
            "nats stream view SB_AUDIT --subject sb.audit.acme" => {
                let ours = line.replace("sb.audit.acme", "sb.audit.auditco");
                expect(
                    &nats_cli::run(&server, &ours, &[]).await,
                    &["blocklist_set", "user_banned", "user_unbanned"],
                );
            }
            "nats consumer info SB_AUDIT audit-events" => {
                expect(
                    &nats_cli::run(&server, &line, &[]).await,
                    &["audit-events", "sb.audit.>"],
                );
            }
            other => panic!("{other:?} is documented but not checked here"),
        }
    }
    assert_eq!(checked, 2);
}

/// Sends `frame` on `ws` and returns the code of the `error` it gets.
async fn refused(ws: &mut WsClient, frame: Value) -> ErrorCode {
    ws.send_text(frame.to_string()).await.unwrap();
    expect_error(ws).await.0
}

fn text(conv: &str, id: &str, text: &str) -> Value {
    json!({"type": "send_message", "client_msg_id": id, "conversation_id": conv,
           "content": {"kind": "text", "text": text}})
}

/// A muted member and, in a frozen conversation, everyone but its owners
/// and admins, are refused by the conversation's writer on every way in:
/// a send over the socket and REST, a thread reply, a reaction, an edit,
/// a scheduled send at its time, and (frozen) a member change and a
/// join. Each change is audited with its conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutes_and_freezing_hold_on_every_way_in() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster
        .create(ConversationKind::Group, "olga", &["ann", "bob"])
        .await;
    let olga = cluster.rest(0, "olga");
    let mut owner = cluster.ws(0, "olga", "o").await;
    let mut ann = cluster.ws(0, "ann", "a").await;
    let mut bob = cluster.ws(0, "bob", "b").await;
    let (root, _) = send_acked(&mut owner, &group, "root", "a thread starts here").await;
    let (mine, _) = send_acked(&mut bob, &group, "mine", "bob's own").await;
    // Due after the mute below.
    crate::scheduled::schedule(
        &mut bob,
        &group,
        "later",
        "from the past",
        &crate::scheduled::in_ms(3000),
    )
    .await;
    let mutes = format!("/v1/conversations/{group}/mutes");

    // Who may mute whom.
    let (status, _) = call(
        &cluster.rest(0, "ann"),
        "POST",
        &mutes,
        Some(json!({"user_id": "bob"})),
    )
    .await;
    assert_eq!(status, 403, "a plain member mutes nobody");
    let (status, _) = call(&olga, "POST", &mutes, Some(json!({"user_id": "olga"}))).await;
    assert_eq!(status, 403, "nor is an owner muted");
    let (status, _) = call(&olga, "POST", &mutes, Some(json!({"user_id": "zed"}))).await;
    assert_eq!(status, 404, "only members are muted");
    let (status, _) = call(
        &olga,
        "POST",
        &mutes,
        Some(json!({"user_id": "bob", "until": "2020-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(status, 400);
    let (status, mute) = call(&olga, "POST", &mutes, Some(json!({"user_id": "bob"}))).await;
    assert_eq!(status, 200, "{mute}");
    assert_eq!(
        (mute["user_id"].as_str(), mute["by"].as_str()),
        (Some("bob"), Some("olga"))
    );

    // Every way bob posts is refused; deleting his own message is not.
    let g = group.as_str();
    assert_eq!(
        refused(&mut bob, text(g, "m1", "hello?")).await,
        ErrorCode::Forbidden
    );
    let mut reply = text(g, "m2", "in the thread");
    reply["thread_id"] = json!(root.to_string());
    assert_eq!(refused(&mut bob, reply).await, ErrorCode::Forbidden);
    let react = json!({"type": "react", "conversation_id": g, "message_id": root.to_string(), "emoji": "👍", "action": "add"});
    assert_eq!(refused(&mut bob, react.clone()).await, ErrorCode::Forbidden);
    let edit = json!({"type": "edit_message", "conversation_id": g, "message_id": mine.to_string(),
                      "content": {"kind": "text", "text": "edited"}});
    assert_eq!(refused(&mut bob, edit).await, ErrorCode::Forbidden);
    let (status, body) = call(
        &cluster.rest(0, "bob"),
        "POST",
        &format!("/v1/conversations/{g}/messages"),
        Some(json!({"client_msg_id": "m3", "content": {"kind": "text", "text": "over REST"}})),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    let (code, _, id, _) = expect_error(&mut bob).await;
    assert_eq!(
        (code, id.as_deref()),
        (ErrorCode::Forbidden, Some("later")),
        "the scheduled send at its time"
    );
    // Ann is not muted.
    send_acked(&mut ann, g, "a1", "I still talk").await;
    // The list, for owners and admins.
    let (status, _) = call(&cluster.rest(0, "ann"), "GET", &mutes, None).await;
    assert_eq!(status, 403);
    let (_, list) = call(&olga, "GET", &mutes, None).await;
    assert_eq!(list["mutes"][0]["user_id"], "bob", "{list}");
    // Lifted: bob posts again; lifting twice is fine.
    for _ in 0..2 {
        let (status, _) = call(&olga, "DELETE", &format!("{mutes}/bob"), None).await;
        assert_eq!(status, 204);
    }
    send_acked(&mut bob, g, "b2", "back").await;
    // A mute that ends by itself.
    let until = crate::scheduled::in_ms(1500);
    let (status, _) = call(
        &olga,
        "POST",
        &mutes,
        Some(json!({"user_id": "bob", "until": until})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        refused(&mut bob, text(g, "b3", "too soon")).await,
        ErrorCode::Forbidden
    );
    tokio::time::sleep(Duration::from_millis(1600)).await;
    send_acked(&mut bob, g, "b4", "the mute ended").await;

    // Frozen: only owners and admins post, react or change members.
    let settings = format!("/v1/conversations/{g}");
    let (status, _) = call(
        &cluster.rest(0, "ann"),
        "PATCH",
        &settings,
        Some(json!({"frozen": true})),
    )
    .await;
    assert_eq!(status, 403, "a plain member freezes nothing");
    let (status, _) = call(
        &olga,
        "PATCH",
        &settings,
        Some(json!({"visibility": "public"})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, view) = call(&olga, "PATCH", &settings, Some(json!({"frozen": true}))).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["frozen"], true, "{view}");
    assert_eq!(
        refused(&mut ann, text(g, "a2", "anyone?")).await,
        ErrorCode::Forbidden
    );
    assert_eq!(refused(&mut ann, react).await, ErrorCode::Forbidden);
    let (status, _) = call(
        &cluster.rest(0, "ann"),
        "DELETE",
        &format!("{settings}/members/ann"),
        None,
    )
    .await;
    assert_eq!(status, 403, "no member change");
    let (status, _) = call(
        &cluster.rest(0, "dan"),
        "POST",
        &format!("{settings}/join"),
        None,
    )
    .await;
    assert_eq!(status, 403, "no join");
    send_acked(&mut owner, g, "o1", "the owner still posts").await;
    let (status, _) = call(
        &olga,
        "POST",
        &format!("{settings}/members"),
        Some(json!({"members": ["cat"]})),
    )
    .await;
    assert!(status < 300, "the owner still adds: {status}");
    let (status, view) = call(&olga, "PATCH", &settings, Some(json!({"frozen": false}))).await;
    assert_eq!(status, 200);
    assert!(view.get("frozen").is_none(), "{view}");
    send_acked(&mut ann, g, "a3", "thawed").await;
    let history = full_history(&cluster, g, "olga").await;
    assert!(
        !history.iter().any(|m| matches!(&m.content, Some(switchboard_protocol::Content::Text { text }) if text == "from the past")),
        "the scheduled send was not stored"
    );

    // A direct conversation is neither frozen nor has mutes.
    let direct = cluster
        .create(ConversationKind::Direct, "ann", &["bob"])
        .await;
    let ann_rest = cluster.rest(0, "ann");
    let (status, _) = call(
        &ann_rest,
        "PATCH",
        &format!("/v1/conversations/{direct}"),
        Some(json!({"frozen": true})),
    )
    .await;
    assert_eq!(status, 409);
    let (status, _) = call(
        &ann_rest,
        "POST",
        &format!("/v1/conversations/{direct}/mutes"),
        Some(json!({"user_id": "bob"})),
    )
    .await;
    assert_eq!(status, 409);

    // The audit log names each change and its conversation.
    let (_, log) = call(
        &cluster.rest_as(0, TENANT, ADMIN, true),
        "GET",
        "/v1/admin/audit",
        None,
    )
    .await;
    let seen: Vec<(String, Option<String>)> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["user_id"].as_str().map(str::to_owned),
            )
        })
        .collect();
    let expected = [
        ("conversation_thawed", None),
        ("conversation_frozen", None),
        ("member_muted", Some("bob")),
        ("member_unmuted", Some("bob")),
        ("member_muted", Some("bob")),
    ];
    let expected: Vec<(String, Option<String>)> = expected
        .iter()
        .map(|(a, u)| ((*a).to_owned(), u.map(str::to_owned)))
        .collect();
    assert_eq!(seen, expected, "{log}");
    for e in log["entries"].as_array().unwrap() {
        assert_eq!(e["conversation_id"], g, "{e}");
        assert_eq!(e["actor"], "olga", "{e}");
    }
}

/// Sends `text` from `ws` until `visible` says whether `bob` sees it in
/// his history as the writers' view of the shadow bans settles; returns
/// how many probes it took.
async fn until_probe(
    cluster: &Cluster,
    ws: &mut WsClient,
    group: &str,
    tag: &str,
    visible: bool,
) -> usize {
    for i in 0..50 {
        let id = format!("{tag}-{i}");
        let (message_id, _) = send_acked(ws, group, &id, &id).await;
        let seen = full_history(cluster, group, "bob")
            .await
            .iter()
            .any(|m| m.message_id == message_id);
        if seen == visible {
            return i;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{tag}: the shadow ban's change never reached the writer");
}

/// A shadow-banned user's messages (v1.3) are acked and reach their own
/// devices, and nobody else's: not as events, not in history, backlog or
/// the conversation list, not to webhooks; others cannot react to them.
/// The user sees no sign of it. Lifting it shows their later messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_banned_users_messages_are_theirs_alone() {
    let mut spec = ClusterSpec::with_operator_api();
    spec.extra_config
        .push_str("\n[push]\nallow_private_targets = true\n");
    let cluster = Cluster::start(spec).await;
    let (url, events) = event_sink().await;
    crate::support::give_tenant_a_webhook(&cluster, &url).await;
    let group = cluster
        .create(ConversationKind::Group, "bob", &[MALLORY, "cal"])
        .await;
    let mut phone = cluster.ws(0, MALLORY, "phone").await;
    let mut tablet = cluster.ws(0, MALLORY, "tablet").await;
    let mut bob = cluster.ws(0, "bob", "b").await;
    let admin = cluster.rest_as(0, TENANT, ADMIN, true);

    // Tenant admins only; the body may be left out.
    let (status, _) = call(
        &cluster.rest(0, "bob"),
        "PUT",
        "/v1/admin/shadow_bans/mallory",
        None,
    )
    .await;
    assert_eq!(status, 403);
    let (status, ban) = call(&admin, "PUT", "/v1/admin/shadow_bans/mallory", None).await;
    assert_eq!(status, 200, "{ban}");
    assert_eq!(
        (&ban["user_id"], &ban["by"]),
        (&json!(MALLORY), &json!(ADMIN))
    );
    let (_, listed) = call(&admin, "GET", "/v1/admin/shadow_bans", None).await;
    assert_eq!(listed["bans"], json!([ban]), "{listed}");
    let (_, bans) = call(&admin, "GET", "/v1/admin/bans", None).await;
    assert_eq!(bans["bans"], json!([]), "a shadow ban is no ban: {bans}");
    until_probe(&cluster, &mut phone, &group, "probe", false).await;
    // Her tokens still work.
    let (status, _) = call(&cluster.rest(0, MALLORY), "GET", "/v1/conversations", None).await;
    assert_eq!(status, 200);

    // Over the socket, REST and in a thread: acked, on her other device
    // with no sign of the ban, nowhere else.
    let (hidden, _) = send_acked(&mut phone, &group, "s1", "buy now").await;
    let on_tablet = crate::support::expect(&mut tablet, "her own message", |f| match f {
        switchboard_protocol::ServerFrame::Message { message } if message.message_id == hidden => {
            Some(message)
        }
        _ => None,
    })
    .await;
    assert!(!on_tablet.shadow);
    let (status, body) = call(
        &cluster.rest(0, MALLORY),
        "POST",
        &format!("/v1/conversations/{group}/messages"),
        Some(json!({"client_msg_id": "s2", "content": {"kind": "text", "text": "cheap pills"}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.get("shadow").is_none(), "{body}");
    let (root, _) = send_acked(&mut bob, &group, "b1", "a thread").await;
    let (status, body) = call(
        &cluster.rest(0, MALLORY),
        "POST",
        &format!("/v1/conversations/{group}/messages"),
        Some(json!({"client_msg_id": "s3", "thread_id": root.to_string(),
            "content": {"kind": "text", "text": "in the thread"}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Bob's next message event is cal's, sent after all of hers.
    let (visible, _) =
        send_acked(&mut cluster.ws(0, "cal", "c").await, &group, "c1", "hello").await;
    let next = crate::support::expect(&mut bob, "cal's message", |f| match f {
        switchboard_protocol::ServerFrame::Message { message }
            if message.sender_id.as_str() != "bob" =>
        {
            Some(message)
        }
        _ => None,
    })
    .await;
    assert_eq!(next.message_id, visible, "bob got {next:?}");

    // Her typing reaches nobody: Bob's next typing indicator is Cal's.
    let typing = |conversation: &str| switchboard_protocol::ClientFrame::Typing {
        conversation_id: conversation.parse().unwrap(),
        state: switchboard_protocol::TypingState::Start,
    };
    phone.send(&typing(&group)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut cal = cluster.ws(0, "cal", "typing").await;
    cal.send(&typing(&group)).await.unwrap();
    let typist = crate::support::expect(&mut bob, "a typing indicator", |f| match f {
        switchboard_protocol::ServerFrame::Typing { user_id, .. } => Some(user_id),
        _ => None,
    })
    .await;
    assert_eq!(typist.as_str(), "cal");

    // Others cannot react to, reply to or see a version of hers.
    bob.send(&switchboard_protocol::ClientFrame::React {
        conversation_id: group.parse().unwrap(),
        message_id: hidden,
        emoji: "👍".into(),
        action: switchboard_protocol::ReactAction::Add,
    })
    .await
    .unwrap();
    let (code, ..) = expect_error(&mut bob).await;
    assert_eq!(code, ErrorCode::NotFound);
    let (status, _) = call(
        &cluster.rest(0, "bob"),
        "GET",
        &format!("/v1/conversations/{group}/messages/{hidden}/versions"),
        None,
    )
    .await;
    assert_eq!(status, 404);

    // History, the thread and the backlog: hers for her, not for others.
    let texts = |history: Vec<switchboard_protocol::Message>| -> Vec<String> {
        history
            .iter()
            .filter_map(|m| match &m.content {
                Some(switchboard_protocol::Content::Text { text })
                    if m.thread_id.is_none()
                        && !text.starts_with("probe")
                        && !text.starts_with("again") =>
                {
                    assert!(!m.shadow);
                    Some(text.clone())
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        texts(full_history(&cluster, &group, MALLORY).await),
        ["buy now", "cheap pills", "a thread", "hello"]
    );
    assert_eq!(
        texts(full_history(&cluster, &group, "bob").await),
        ["a thread", "hello"]
    );
    let (_, thread) = call(
        &cluster.rest(0, "bob"),
        "GET",
        &format!("/v1/conversations/{group}/messages?thread_id={root}"),
        None,
    )
    .await;
    let thread_of = |page: &Value| -> Vec<String> {
        page["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"]["text"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(thread_of(&thread), ["a thread"], "{thread}");
    assert!(
        thread["messages"][0].get("thread").is_none(),
        "no reply counted: {thread}"
    );
    // Her own thread shows her reply (the thread's index leaves it out).
    let (_, hers) = call(
        &cluster.rest(0, MALLORY),
        "GET",
        &format!("/v1/conversations/{group}/messages?thread_id={root}"),
        None,
    )
    .await;
    assert_eq!(thread_of(&hers), ["in the thread", "a thread"], "{hers}");
    assert!(hers["messages"][0].get("shadow").is_none(), "{hers}");
    let (pulled, _, _) = crate::support::pull(
        &mut cluster.ws(0, "cal", "fresh").await,
        Some(&group),
        None,
        None,
    )
    .await;
    assert!(
        pulled.iter().all(|m| m.sender_id.as_str() != MALLORY),
        "{pulled:?}"
    );

    // Her message last: bob's list shows cal's, not hers, and counts it not.
    send_acked(&mut phone, &group, "s4", "last word").await;
    let (_, list) = call(&cluster.rest(0, "cal"), "GET", "/v1/conversations", None).await;
    let entry = &list["conversations"][0];
    assert_eq!(
        entry["last_message"]["message_id"],
        visible.to_string(),
        "{entry}"
    );
    assert_eq!(entry["preview"], "hello", "{entry}");
    let (_, mine) = call(
        &cluster.rest(0, MALLORY),
        "GET",
        &format!("/v1/conversations/{group}"),
        None,
    )
    .await;
    assert_eq!(
        mine["last_message"]["content"]["text"], "last word",
        "{mine}"
    );
    assert!(mine["last_message"].get("shadow").is_none(), "{mine}");

    // Lifted: her later messages reach everyone; the hidden stay hidden.
    let (status, _) = call(&admin, "DELETE", "/v1/admin/shadow_bans/mallory", None).await;
    assert_eq!(status, 204);
    until_probe(&cluster, &mut phone, &group, "again", true).await;
    assert_eq!(
        texts(full_history(&cluster, &group, "bob").await),
        ["a thread", "hello"]
    );

    // Webhooks heard of cal's and bob's messages, none of her hidden ones.
    let heard = eventually("cal's message.created", Duration::from_secs(20), || async {
        let got = events.lock().unwrap().clone();
        got.iter()
            .any(|e| e["data"]["message"]["message_id"] == visible.to_string())
            .then_some(got)
    })
    .await;
    for e in &heard {
        let text = e["data"]["message"]["content"]["text"]
            .as_str()
            .unwrap_or("");
        assert!(
            !["buy now", "cheap pills", "in the thread", "last word"].contains(&text),
            "{e}"
        );
    }

    // Audited.
    let (_, log) = call(&admin, "GET", "/v1/admin/audit", None).await;
    let actions: Vec<&str> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["user_shadow_unbanned", "user_shadow_banned"],
        "{log}"
    );
}
