//! Profiles (v1.3) through the contract's names, on two gateways: set by
//! the user, read by anyone of the tenant, `custom` by tenant admins
//! only, every bound at its threshold and just past it, and
//! `profile_updated` reaching everyone who shares a conversation with
//! the user (small conversations member by member, a large channel on
//! its subject) and nobody else.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_client::WsClient;
use switchboard_protocol::profile::Profile;
use switchboard_protocol::{ConversationKind, ServerFrame};
use switchboard_tests::{Cluster, ClusterSpec, TENANT};

use crate::support::*;

const UPDATES_PER_MINUTE: usize = 8;

async fn expect_profile(ws: &mut WsClient, user: &str) -> Profile {
    expect(ws, &format!("profile_updated of {user}"), |f| match f {
        ServerFrame::ProfileUpdated { profile } if profile.user_id.as_str() == user => {
            Some(profile)
        }
        _ => None,
    })
    .await
}

/// No `profile_updated` arrives within `within`.
async fn hears_no_profile(ws: &mut WsClient, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match ws.next_frame_within(left).await {
            Ok(ServerFrame::ProfileUpdated { profile }) => {
                panic!("an unrelated user heard of {}", profile.user_id)
            }
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_are_set_read_bounded_and_reach_everyone_who_shares_a_conversation() {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        extra_config: format!(
            "fanout_threshold = 3\n[limits]\nprofile_updates_per_minute = {UPDATES_PER_MINUTE}.0\n"
        ),
        ..Default::default()
    })
    .await;
    let _group = cluster
        .create(ConversationKind::Group, "pf_ann", &["pf_bob"])
        .await;
    // Four members: past the threshold, it fans out on read.
    let _channel = cluster
        .create(
            ConversationKind::Channel,
            "pf_ann",
            &["pf_cat", "pf_dan", "pf_eve"],
        )
        .await;
    let ann = cluster.rest(0, "pf_ann");
    let mut ann_laptop = cluster.ws(1, "pf_ann", "laptop").await;
    let mut bob = cluster.ws(1, "pf_bob", "b").await;
    let mut cat = cluster.ws(0, "pf_cat", "c").await;
    let mut zed = cluster.ws(0, "pf_zed", "z").await;
    // The channel's listeners are in place once its members' gateways
    // have read their memberships.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (status, before) = call(&ann, "GET", "/v1/users/pf_ann", None).await;
    assert_eq!(status, 200, "{before}");
    assert_eq!(
        before,
        json!({"user_id": "pf_ann", "display_name": null, "avatar": null, "status": null,
               "custom": {}, "updated_at": null})
    );

    let change = json!({"display_name": "Ann", "status": {"text": "at lunch", "emoji": "🍜"}});
    let (status, after) = call(&ann, "PATCH", "/v1/me/profile", Some(change)).await;
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["display_name"], "Ann");
    assert_eq!(after["status"]["emoji"], "🍜");
    assert!(after["updated_at"].is_string());
    for ws in [&mut ann_laptop, &mut bob, &mut cat] {
        let heard = expect_profile(ws, "pf_ann").await;
        assert_eq!(heard.display_name.as_deref(), Some("Ann"));
    }
    hears_no_profile(&mut zed, Duration::from_millis(800)).await;

    // Anyone of the tenant reads it, alone or in a list (in the order
    // named, a repeated id once).
    let zed_rest = cluster.rest(1, "pf_zed");
    let (status, seen) = call(&zed_rest, "GET", "/v1/users/pf_ann", None).await;
    assert_eq!((status, &seen), (200, &after));
    let (status, list) = call(&zed_rest, "GET", "/v1/users?ids=pf_bob,pf_ann,pf_bob", None).await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&Value> = list["users"].as_array().unwrap().iter().collect();
    assert_eq!(names.len(), 2);
    assert_eq!(names[0]["user_id"], "pf_bob");
    assert_eq!(names[1]["display_name"], "Ann");
    let ids = |n: usize| {
        (0..n)
            .map(|i| format!("u{i}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let (status, list) = call(
        &zed_rest,
        "GET",
        &format!("/v1/users?ids={}", ids(100)),
        None,
    )
    .await;
    assert_eq!(
        (status, list["users"].as_array().map(Vec::len)),
        (200, Some(100))
    );
    let (status, body) = call(
        &zed_rest,
        "GET",
        &format!("/v1/users?ids={}", ids(101)),
        None,
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_request"))
    );
    let (status, _) = call(&zed_rest, "GET", "/v1/users?ids=a,b%20c", None).await;
    assert_eq!(status, 400, "a malformed id");

    // Bounds: 64 characters is a name, 65 is not; custom is the admins'.
    let name = |n: usize| json!({ "display_name": "é".repeat(n) });
    let (status, body) = call(&ann, "PATCH", "/v1/me/profile", Some(name(65))).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_request"))
    );
    let (status, body) = call(&ann, "PATCH", "/v1/me/profile", Some(name(64))).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(&ann, "PATCH", "/v1/me/profile", Some(json!({}))).await;
    assert_eq!(status, 400, "an empty patch: {body}");
    let (status, body) = call(
        &ann,
        "PATCH",
        "/v1/me/profile",
        Some(json!({"custom": {"team": "red"}})),
    )
    .await;
    assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));
    let (status, _) = call(
        &ann,
        "PATCH",
        "/v1/admin/users/pf_ann/profile",
        Some(json!({"custom": {"team": "red"}})),
    )
    .await;
    assert_eq!(status, 403, "not an admin");

    // A tenant admin sets custom fields; everyone hears of it.
    let admin = cluster.rest_as(0, TENANT, "pf_admin", true);
    let (status, body) = call(
        &admin,
        "PATCH",
        "/v1/admin/users/pf_ann/profile",
        Some(json!({"custom": {"team": "blue", "badge": 3}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["custom"], json!({"team": "blue", "badge": 3}));
    assert_eq!(body["display_name"], "é".repeat(64), "the rest stays");
    // (The name change before is heard first.)
    let heard = expect(&mut bob, "the admin's change", |f| match f {
        ServerFrame::ProfileUpdated { profile } if !profile.custom.is_empty() => Some(profile),
        _ => None,
    })
    .await;
    assert_eq!(heard.custom.get("team"), Some(&json!("blue")));
    // 4096 bytes of JSON fit, 4097 do not.
    let sized = |n: usize| json!({"custom": {"team": null, "badge": null, "k": "a".repeat(n)}});
    let (status, body) = call(
        &admin,
        "PATCH",
        "/v1/admin/users/pf_ann/profile",
        Some(sized(4096 - 8)),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        &admin,
        "PATCH",
        "/v1/admin/users/pf_ann/profile",
        Some(sized(4096 - 7)),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_request"))
    );

    // A status with an end is null once past it.
    let soon = switchboard_protocol::Timestamp::from_unix_ms(
        switchboard_protocol::Timestamp::now().unix_ms() + 1500,
    );
    let change = json!({"status": {"text": "back soon", "expires_at": soon}});
    let (status, body) = call(&ann, "PATCH", "/v1/me/profile", Some(change)).await;
    assert_eq!(
        (status, &body["status"]["text"]),
        (200, &json!("back soon"))
    );
    let past = json!({"status": {"text": "x", "expires_at": "2020-01-01T00:00:00Z"}});
    let (status, _) = call(&ann, "PATCH", "/v1/me/profile", Some(past)).await;
    assert_eq!(status, 400, "a status that ended already");
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let (_, body) = call(&zed_rest, "GET", "/v1/users/pf_ann", None).await;
    assert_eq!(body["status"], Value::Null);

    // The rate: as many changes as allowed, then 429.
    let rate = cluster.rest(1, "pf_rate");
    for i in 0..UPDATES_PER_MINUTE {
        let change = json!({ "display_name": format!("R{i}") });
        let (status, body) = call(&rate, "PATCH", "/v1/me/profile", Some(change)).await;
        assert_eq!(status, 200, "change {i}: {body}");
    }
    let (status, body) = call(
        &rate,
        "PATCH",
        "/v1/me/profile",
        Some(json!({"display_name": "over"})),
    )
    .await;
    assert_eq!((status, body["code"].as_str()), (429, Some("rate_limited")));
}
