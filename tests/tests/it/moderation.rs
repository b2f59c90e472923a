//! Moderation without code (v1.3), from outside: a tenant admin's
//! tenant-wide bans refuse the user's tokens on every gateway and close
//! their open connections, within the documented bounds, and the NATS
//! commands of the bans' bucket work as written.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_client::{RestClient, WsError};
use switchboard_protocol::ConversationKind;
use switchboard_tests::cluster::TENANT;
use switchboard_tests::nats_cli::{self, expect};
use switchboard_tests::{Cluster, ClusterSpec, eventually};

use crate::support::{call, closed_within, send_acked};

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
    // Everyone else goes on.
    send_acked(&mut bob, &group, "b1", "still here").await;

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
    assert_eq!(checked, 5);
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
