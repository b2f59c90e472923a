//! Safety (v1.2) through the contract's names: blocks, bans and slow
//! mode, each checked by the conversation's writer, so two gateways and
//! every path agree, and each reaching the other devices of whoever set
//! it.

use std::time::Duration;
use switchboard_protocol::SendAck;

use serde_json::{Value, json};
use switchboard_protocol::safety::BlockAction;
use switchboard_protocol::{ConversationKind, ErrorCode, ServerFrame, Timestamp};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

fn two_gateways() -> ClusterSpec {
    ClusterSpec {
        gateways: 2,
        ..Default::default()
    }
}

/// The next `blocks_changed`: (user, action).
async fn expect_blocks_changed(ws: &mut switchboard_client::WsClient) -> (String, BlockAction) {
    expect(ws, "blocks_changed", |f| match f {
        ServerFrame::BlocksChanged { user_id, action } => {
            Some((user_id.as_str().to_owned(), action))
        }
        _ => None,
    })
    .await
}

/// A send's refusal: (code, retry_after_ms).
async fn send_refused(
    ws: &mut switchboard_client::WsClient,
    conv: &str,
    id: &str,
) -> (ErrorCode, Option<u64>) {
    ws.send(&send_frame(conv, id, "hello")).await.unwrap();
    expect(ws, &format!("the refusal of {id}"), |f| match f {
        ServerFrame::Error {
            code,
            client_msg_id: Some(c),
            retry_after_ms,
            ..
        } if c == id => Some((code, retry_after_ms)),
        ServerFrame::Ack(SendAck { client_msg_id, .. }) if client_msg_id.as_str() == id => {
            panic!("{id} was accepted")
        }
        _ => None,
    })
    .await
}

fn blocked_flags(history: &Value) -> Vec<(String, bool)> {
    history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["content"]["kind"] == "text")
        .map(|m| {
            (
                m["content"]["text"].as_str().unwrap().to_owned(),
                m["blocked_sender"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_keep_a_pair_apart_in_private_and_flag_the_blocked_in_groups() {
    let cluster = Cluster::start(two_gateways()).await;
    let dm = cluster
        .create(ConversationKind::Direct, "bk_ann", &["bk_eve"])
        .await;
    let group = cluster
        .create(ConversationKind::Group, "bk_bob", &["bk_ann", "bk_eve"])
        .await;
    let ann = cluster.rest(0, "bk_ann");
    let mut ann_phone = cluster.ws(0, "bk_ann", "phone").await;
    // The other device is on the other gateway: the change reaches it too.
    let mut ann_laptop = cluster.ws(1, "bk_ann", "laptop").await;
    let mut eve = cluster.ws(1, "bk_eve", "e").await;
    let mut bob = cluster.ws(0, "bk_bob", "b").await;

    let (status, body) = call(&ann, "PUT", "/v1/blocks/bk_eve", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["user_id"], "bk_eve");
    assert_eq!(
        expect_blocks_changed(&mut ann_laptop).await,
        ("bk_eve".into(), BlockAction::Block)
    );
    expect_blocks_changed(&mut ann_phone).await;
    let (status, list) = call(&ann, "GET", "/v1/blocks", None).await;
    assert_eq!(status, 200);
    assert_eq!(list["blocks"][0]["user_id"], "bk_eve");
    assert_eq!(list["blocks"].as_array().unwrap().len(), 1);
    // Again: the same block, nothing new.
    let (status, again) = call(&ann, "PUT", "/v1/blocks/bk_eve", None).await;
    assert_eq!((status, &again["blocked_at"]), (200, &body["blocked_at"]));
    let (status, _) = call(&ann, "PUT", "/v1/blocks/bk_ann", None).await;
    assert_eq!(status, 403, "nobody blocks themselves");

    // In private neither writes, from either gateway; nor reacts.
    let (code, _) = send_refused(&mut eve, &dm, "eve-dm-1").await;
    assert_eq!(code, ErrorCode::Forbidden);
    let (code, _) = send_refused(&mut ann_phone, &dm, "ann-dm-1").await;
    assert_eq!(code, ErrorCode::Forbidden);
    // Nor does the blocked user open a direct conversation with the
    // blocker: the existing one, or a new pair's.
    let eve_rest = cluster.rest(1, "bk_eve");
    let open = json!({"kind": "direct", "members": ["bk_ann"]});
    let (status, body) = call(&eve_rest, "POST", "/v1/conversations", Some(open)).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));
    let (status, _) = call(&ann, "PUT", "/v1/blocks/bk_zed", None).await;
    assert_eq!(status, 200);
    let zed = cluster.rest(1, "bk_zed");
    let open = json!({"kind": "direct", "members": ["bk_ann"]});
    let (status, _) = call(&zed, "POST", "/v1/conversations", Some(open)).await;
    assert_eq!(status, 403, "a new direct conversation with the blocker");

    // In a group the blocked user's messages still flow, flagged for the
    // blocker only: live and in history.
    send_acked(&mut eve, &group, "eve-g-1", "from eve").await;
    let seen = expect_message(&mut ann_phone).await;
    assert!(seen.blocked_sender, "live, on the blocker's gateway");
    let seen = expect_message(&mut ann_laptop).await;
    assert!(seen.blocked_sender, "live, on the other gateway");
    let seen = expect_message(&mut bob).await;
    assert!(!seen.blocked_sender, "others see it plain");
    let page = format!("/v1/conversations/{group}/messages");
    let (_, history) = call(&ann, "GET", &page, None).await;
    assert_eq!(blocked_flags(&history), [("from eve".to_owned(), true)]);
    let (_, history) = call(&cluster.rest(0, "bk_bob"), "GET", &page, None).await;
    assert_eq!(blocked_flags(&history), [("from eve".to_owned(), false)]);

    // Unblocked: both devices hear it, the pair writes again, and
    // nothing is flagged any more.
    let (status, _) = call(&ann, "DELETE", "/v1/blocks/bk_eve", None).await;
    assert_eq!(status, 204);
    assert_eq!(
        expect_blocks_changed(&mut ann_laptop).await,
        ("bk_eve".into(), BlockAction::Unblock)
    );
    expect_blocks_changed(&mut ann_phone).await;
    send_acked(&mut eve, &dm, "eve-dm-2", "hi again").await;
    send_acked(&mut eve, &group, "eve-g-2", "back").await;
    let seen = expect(&mut ann_phone, "eve's next group message", |f| match f {
        ServerFrame::Message { message } if message.client_msg_id.as_str() == "eve-g-2" => {
            Some(message)
        }
        _ => None,
    })
    .await;
    assert!(!seen.blocked_sender);
    let (_, history) = call(&ann, "GET", &page, None).await;
    assert!(blocked_flags(&history).iter().all(|(_, b)| !b));
    let (_, list) = call(&ann, "GET", "/v1/blocks", None).await;
    let names: Vec<&str> = list["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["user_id"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bk_zed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bans_keep_a_user_out_until_lifted_and_never_lock_out_the_owner() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster
        .create(
            ConversationKind::Group,
            "bn_own",
            &["bn_adm", "bn_mem", "bn_bad"],
        )
        .await;
    let (owner, admin, member) = (
        cluster.rest(0, "bn_own"),
        cluster.rest(0, "bn_adm"),
        cluster.rest(0, "bn_mem"),
    );
    let tenant_admin = cluster.rest_as(0, switchboard_tests::TENANT, "bn_ops", true);
    let path = |rest: &str| format!("/v1/conversations/{group}{rest}");
    let (status, _) = call(
        &owner,
        "PATCH",
        &path("/members/bn_adm"),
        Some(json!({"role": "admin"})),
    )
    .await;
    assert_eq!(status, 200);
    let mut bad = cluster.ws(0, "bn_bad", "b").await;
    let mut watcher = cluster.ws(0, "bn_mem", "w").await;

    // A plain member bans nobody and sees no bans.
    let ban = |user: &str| Some(json!({ "user_id": user }));
    let (status, _) = call(&member, "POST", &path("/bans"), ban("bn_bad")).await;
    assert_eq!(status, 403);
    let (status, _) = call(&member, "GET", &path("/bans"), None).await;
    assert_eq!(status, 403);
    // Nobody bans the owner: not an admin, not a tenant admin; nor
    // themselves.
    for who in [&admin, &tenant_admin] {
        let (status, body) = call(who, "POST", &path("/bans"), ban("bn_own")).await;
        assert_eq!(status, 403, "{body}");
    }
    let (status, _) = call(&admin, "POST", &path("/bans"), ban("bn_adm")).await;
    assert_eq!(status, 403, "nobody bans themselves");

    // An admin bans a member: out, told, and not let back in.
    let (status, body) = call(&admin, "POST", &path("/bans"), ban("bn_bad")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["user_id"], "bn_bad");
    for ws in [&mut bad, &mut watcher] {
        let m = expect_message(ws).await;
        let text = serde_json::to_value(&m.content).unwrap();
        assert_eq!(text["event"], "member_banned");
        assert_eq!(text["user_ids"], json!(["bn_bad"]));
    }
    let (status, _) = call(&cluster.rest(0, "bn_bad"), "GET", &path(""), None).await;
    assert_eq!(status, 403, "no longer a member");
    let add = |user: &str| Some(json!({ "members": [user] }));
    let (status, body) = call(&owner, "POST", &path("/members"), add("bn_bad")).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));
    let (status, list) = call(&owner, "GET", &path("/bans"), None).await;
    assert_eq!(status, 200);
    assert_eq!(list["bans"][0]["user_id"], "bn_bad");
    assert_eq!(list["bans"][0]["by"], "bn_adm");
    let (status, _) = call(&tenant_admin, "GET", &path("/bans"), None).await;
    assert_eq!(status, 200, "tenant admins see bans");

    // Lifted: they may be added again (they are not added back by it).
    let (status, _) = call(&owner, "DELETE", &path("/bans/bn_bad"), None).await;
    assert_eq!(status, 204);
    let (_, list) = call(&owner, "GET", &path("/bans"), None).await;
    assert!(list["bans"].as_array().unwrap().is_empty());
    let (status, _) = call(&owner, "POST", &path("/members"), add("bn_bad")).await;
    assert_eq!(status, 200);

    // A ban with an end: it holds until then, and no longer.
    let until = switchboard_protocol::Timestamp::from_unix_ms(
        switchboard_protocol::Timestamp::now().unix_ms() + 2_000,
    );
    let (status, _) = call(
        &admin,
        "POST",
        &path("/bans"),
        Some(json!({"user_id": "bn_mem", "until": until})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = call(&owner, "POST", &path("/members"), add("bn_mem")).await;
    assert_eq!(status, 403);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let (status, body) = call(&owner, "POST", &path("/members"), add("bn_mem")).await;
    assert_eq!(status, 200, "{body}");

    // A direct conversation has no bans.
    let dm = cluster
        .create(ConversationKind::Direct, "bn_own", &["bn_mem"])
        .await;
    let (status, _) = call(
        &owner,
        "POST",
        &format!("/v1/conversations/{dm}/bans"),
        ban("bn_mem"),
    )
    .await;
    assert_eq!(status, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_mode_holds_plain_members_to_one_message_per_period() {
    let cluster = Cluster::start(two_gateways()).await;
    let group = cluster
        .create(ConversationKind::Group, "sl_own", &["sl_mem"])
        .await;
    let (owner, member) = (cluster.rest(0, "sl_own"), cluster.rest(0, "sl_mem"));
    let path = format!("/v1/conversations/{group}");
    let slow = |secs: u32| Some(json!({ "slow_mode_secs": secs }));
    let mut mem_a = cluster.ws(0, "sl_mem", "a").await;
    let mut mem_b = cluster.ws(1, "sl_mem", "b").await;

    // Bounds, at and just past each, and what a member may not do.
    let (status, _) = call(&member, "PATCH", &path, slow(2)).await;
    assert_eq!(status, 403);
    for bad in [
        json!({"slow_mode_secs": 21601}),
        json!({"retention_days": 0}),
        json!({"retention_days": 36501}),
        json!({"disappearing_secs": 4}),
        json!({"disappearing_secs": 31536001}),
        json!({}),
        json!({"title": "x"}),
        json!([null, null]),
    ] {
        let (status, body) = call(&owner, "PATCH", &path, Some(bad.clone())).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["code"], "invalid_request");
    }
    let (status, view) = call(
        &owner,
        "PATCH",
        &path,
        Some(json!({"slow_mode_secs": 21600, "retention_days": 36500, "disappearing_secs": 5})),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    let (status, view) = call(
        &owner,
        "PATCH",
        &path,
        Some(json!({"slow_mode_secs": 2, "retention_days": null, "disappearing_secs": null})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(view["slow_mode_secs"], 2);
    assert_eq!(view["retention_days"], Value::Null);

    // Every member hears of each change; the last one says what holds.
    let mut updates = Vec::new();
    while updates.len() < 2 {
        let m = expect_message(&mut mem_a).await;
        updates.push(serde_json::to_value(&m.content).unwrap());
    }
    assert_eq!(updates[1]["event"], "conversation_updated");
    assert_eq!(updates[1]["policy"]["slow_mode_secs"], 2);
    // Sends from both gateways meet the same clock: the writer's.
    send_acked(&mut mem_a, &group, "m1", "first").await;
    let (code, wait) = send_refused(&mut mem_b, &group, "m2").await;
    assert_eq!(code, ErrorCode::RateLimited);
    let wait = wait.expect("retry_after_ms");
    assert!(wait > 0 && wait <= 2_000, "{wait}");
    // Owners and admins are not held.
    let mut own = cluster.ws(1, "sl_own", "o").await;
    send_acked(&mut own, &group, "o1", "one").await;
    send_acked(&mut own, &group, "o2", "two").await;
    // After the wait, the member sends again (a new client_msg_id: the
    // refused one stays refused).
    tokio::time::sleep(Duration::from_millis(wait + 100)).await;
    send_acked(&mut mem_b, &group, "m3", "later").await;
    // Off again: no wait.
    let (status, _) = call(&owner, "PATCH", &path, slow(0)).await;
    assert_eq!(status, 200);
    send_acked(&mut mem_a, &group, "m4", "quick").await;
    send_acked(&mut mem_a, &group, "m5", "quicker").await;
    // A direct conversation has no slow mode; either member sets how
    // long its messages live.
    let dm = cluster
        .create(ConversationKind::Direct, "sl_own", &["sl_mem"])
        .await;
    let (status, _) = call(
        &member,
        "PATCH",
        &format!("/v1/conversations/{dm}"),
        slow(5),
    )
    .await;
    assert_eq!(status, 409);
    let (status, view) = call(
        &member,
        "PATCH",
        &format!("/v1/conversations/{dm}"),
        Some(json!({"disappearing_secs": 3600})),
    )
    .await;
    assert_eq!(status, 200, "either member of a direct conversation");
    assert_eq!(view["disappearing_secs"], 3600);
}

/// A v1.2 promise: slow mode's clock is the senders' own rows, so a
/// writer that takes the partition over (here: the only worker stopped
/// and started again) holds a member to the wait their last message
/// began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_mode_holds_across_a_writer_hand_over() {
    let mut cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster
        .create(ConversationKind::Group, "sh_own", &["sh_mem"])
        .await;
    let owner = cluster.rest(0, "sh_own");
    let path = format!("/v1/conversations/{group}");
    let (status, _) = call(&owner, "PATCH", &path, Some(json!({"slow_mode_secs": 120}))).await;
    assert_eq!(status, 200);
    let mut member = cluster.ws(0, "sh_mem", "m").await;
    send_acked(&mut member, &group, "before", "before the hand-over").await;

    cluster.workers[0].terminate().await;
    cluster.workers[0].restart().await;
    cluster
        .wait_for_writers(ClusterSpec::default().partitions, Duration::from_secs(30))
        .await;

    let (code, wait) = send_refused(&mut member, &group, "after").await;
    assert_eq!(code, ErrorCode::RateLimited);
    let wait = wait.expect("retry_after_ms");
    assert!(wait > 60_000 && wait <= 120_000, "{wait}");
    // The owner is not held, and the member's refusal did not count as a send.
    let mut own = cluster.ws(0, "sh_own", "o").await;
    send_acked(&mut own, &group, "o1", "owners go").await;
}

/// The copies of an expiring message's text on the backbone: stream
/// messages of `stream` holding `text`, each with its `Nats-TTL` if any.
async fn copies(client: &async_nats::Client, stream: &str, text: &str) -> Vec<Option<String>> {
    let js = async_nats::jetstream::new(client.clone());
    let mut stream = js.get_stream(stream).await.unwrap();
    let state = stream.info().await.unwrap().state.clone();
    let mut found = Vec::new();
    if state.messages == 0 {
        return found;
    }
    for seq in state.first_sequence..=state.last_sequence {
        let Ok(m) = stream.get_raw_message(seq).await else {
            continue;
        };
        if String::from_utf8_lossy(&m.payload).contains(text) {
            let ttl = m.headers.get("Nats-TTL").map(|v| v.as_str().to_owned());
            found.push(ttl);
        }
    }
    found
}

/// A v1.2 promise: a message past its disappearing time is gone for
/// good, its copies on the search feed (`SB_INDEX`) and the outbound
/// events (`SB_EVENTS`) too: they carry the message's time left as
/// `Nats-TTL`, so JetStream drops them with it. A message that does not
/// expire keeps its copies as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiring_messages_copies_leave_the_feeds_with_it() {
    let mut spec = ClusterSpec::with_operator_api();
    spec.extra_config
        .push_str("\n[push]\nallow_private_targets = true\n");
    let cluster = Cluster::start(spec).await;
    let (url, _arrivals) = hook_endpoint(axum::http::StatusCode::OK).await;
    give_tenant_a_webhook(&cluster, &url).await;
    let fleeting = cluster
        .create(ConversationKind::Group, "tt_own", &["tt_mem"])
        .await;
    let lasting = cluster
        .create(ConversationKind::Group, "tt_own", &["tt_other"])
        .await;
    let owner = cluster.rest(0, "tt_own");
    let path = format!("/v1/conversations/{fleeting}");
    let (status, _) = call(
        &owner,
        "PATCH",
        &path,
        Some(json!({"disappearing_secs": 5})),
    )
    .await;
    assert_eq!(status, 200);
    let mut ws = cluster.ws(0, "tt_own", "d").await;
    send_acked(&mut ws, &fleeting, "f1", "fleeting xyzzy words").await;
    send_acked(&mut ws, &lasting, "l1", "lasting plugh words").await;

    let client = cluster.nats.client().await;
    for stream in ["SB_INDEX", "SB_EVENTS"] {
        let held = switchboard_tests::eventually(
            &format!("the copies on {stream}"),
            Duration::from_secs(5),
            || async {
                let held = copies(&client, stream, "xyzzy").await;
                let lasting = copies(&client, stream, "plugh").await;
                (!held.is_empty() && !lasting.is_empty()).then_some((held, lasting))
            },
        )
        .await;
        let (fleeting_copies, lasting_copies) = held;
        for ttl in fleeting_copies {
            let secs: u64 = ttl.expect("a TTL").trim_end_matches('s').parse().unwrap();
            assert!((1..=5).contains(&secs), "{stream}: {secs}");
        }
        assert!(lasting_copies.iter().all(Option::is_none), "{stream}");
    }
    // Past its time, no copy is left; the lasting message's stay.
    switchboard_tests::eventually(
        "the fleeting copies gone",
        Duration::from_secs(15),
        || async {
            let mut left = 0;
            for stream in ["SB_INDEX", "SB_EVENTS"] {
                left += copies(&client, stream, "xyzzy").await.len();
            }
            (left == 0).then_some(())
        },
    )
    .await;
    for stream in ["SB_INDEX", "SB_EVENTS"] {
        assert!(
            !copies(&client, stream, "plugh").await.is_empty(),
            "{stream}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_reach_tenant_admins_only_and_resolutions_act_through_the_writer() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster
        .create(
            ConversationKind::Group,
            "rp_own",
            &["rp_mem", "rp_bad", "rp_flood"],
        )
        .await;
    let member = cluster.rest(0, "rp_mem");
    let admin = cluster.rest_as(0, switchboard_tests::TENANT, "rp_ops", true);
    let mut bad = cluster.ws(0, "rp_bad", "b").await;
    let mut own = cluster.ws(0, "rp_own", "o").await;
    let (spam, _) = send_acked(&mut bad, &group, "spam-1", "buy now").await;
    let (spam2, _) = send_acked(&mut bad, &group, "spam-2", "buy more").await;
    let (owners, _) = send_acked(&mut own, &group, "own-1", "welcome").await;
    let report_path = |m: switchboard_protocol::MessageId| {
        format!("/v1/conversations/{group}/messages/{m}/reports")
    };

    // Members report; bad bodies and strangers are refused.
    let spam_reason = Some(json!({"reason": "spam", "note": "again"}));
    let (status, body) = call(&member, "POST", &report_path(spam), spam_reason.clone()).await;
    assert_eq!(status, 201, "{body}");
    let first = body["report_id"].as_str().unwrap().to_owned();
    for bad_body in [
        json!({"reason": "nope"}),
        json!({"reason": "spam", "note": "x".repeat(1001)}),
        json!({"reason": "spam", "extra": 1}),
    ] {
        let (status, _) = call(&member, "POST", &report_path(spam), Some(bad_body)).await;
        assert_eq!(status, 400);
    }
    let (status, _) = call(
        &member,
        "POST",
        &report_path(spam),
        Some(json!({"reason": "spam", "note": "x".repeat(1000)})),
    )
    .await;
    assert_eq!(status, 201, "a note at the limit");
    let stranger = cluster.rest(0, "rp_out");
    let (status, _) = call(&stranger, "POST", &report_path(spam), spam_reason.clone()).await;
    assert_eq!(status, 403, "not a member");

    // Only tenant admins read them, only their own tenant's.
    let (status, _) = call(&member, "GET", "/v1/admin/reports", None).await;
    assert_eq!(status, 403);
    let (status, list) = call(&admin, "GET", "/v1/admin/reports?status=open", None).await;
    assert_eq!(status, 200);
    let open = list["reports"].as_array().unwrap();
    assert_eq!(open.len(), 2);
    assert_eq!(open[1]["report_id"], first.as_str());
    assert_eq!(open[1]["reporter"], "rp_mem");
    assert_eq!(open[1]["sender_id"], "rp_bad");
    assert_eq!(open[1]["message"]["content"]["text"], "buy now");
    let (status, page) = call(&admin, "GET", "/v1/admin/reports?limit=1", None).await;
    assert_eq!(status, 200);
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let (_, next) = call(
        &admin,
        "GET",
        &format!("/v1/admin/reports?limit=1&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(next["reports"][0]["report_id"], first.as_str());
    let other = cluster.rest_as(0, switchboard_tests::cluster::OTHER_TENANT, "rp_ops", true);
    let (_, theirs) = call(&other, "GET", "/v1/admin/reports", None).await;
    assert!(theirs["reports"].as_array().unwrap().is_empty());
    let (status, _) = call(
        &other,
        "POST",
        &format!("/v1/admin/reports/{first}/resolve"),
        Some(json!({"action": "dismiss"})),
    )
    .await;
    assert_eq!(status, 404, "another tenant's report is nowhere");

    // A deletion is a deletion: the members see the message go.
    let resolve = |id: &str| format!("/v1/admin/reports/{id}/resolve");
    let (status, resolved) = call(
        &admin,
        "POST",
        &resolve(&first),
        Some(json!({"action": "delete_message"})),
    )
    .await;
    assert_eq!(status, 200, "{resolved}");
    assert_eq!(resolved["status"], "resolved");
    assert_eq!(resolved["action"], "delete_message");
    let gone = expect_update(&mut own).await;
    assert_eq!(gone.message_id, spam);
    assert!(gone.deleted_at.is_some());
    // Again: nothing changes.
    let (status, again) = call(
        &admin,
        "POST",
        &resolve(&first),
        Some(json!({"action": "dismiss"})),
    )
    .await;
    assert_eq!((status, &again["action"]), (200, &json!("delete_message")));

    // A ban is a ban; an owner is not banned, and the report stays open.
    let (_, body) = call(&member, "POST", &report_path(spam2), spam_reason.clone()).await;
    let second = body["report_id"].as_str().unwrap().to_owned();
    let (status, _) = call(
        &admin,
        "POST",
        &resolve(&second),
        Some(json!({"action": "ban_sender"})),
    )
    .await;
    assert_eq!(status, 200);
    let banned = expect(&mut bad, "member_banned", |f| match f {
        ServerFrame::Message { message } => {
            let c = serde_json::to_value(&message.content).unwrap();
            (c["event"] == "member_banned").then_some(c)
        }
        _ => None,
    })
    .await;
    assert_eq!(banned["user_ids"], json!(["rp_bad"]));
    let (status, _) = call(
        &cluster.rest(0, "rp_own"),
        "POST",
        &format!("/v1/conversations/{group}/members"),
        Some(json!({"members": ["rp_bad"]})),
    )
    .await;
    assert_eq!(status, 403, "banned");
    let (_, body) = call(&member, "POST", &report_path(owners), spam_reason.clone()).await;
    let third = body["report_id"].as_str().unwrap().to_owned();
    let (status, _) = call(
        &admin,
        "POST",
        &resolve(&third),
        Some(json!({"action": "ban_sender"})),
    )
    .await;
    assert_eq!(status, 403, "owners are never banned");
    let (_, list) = call(&admin, "GET", "/v1/admin/reports", None).await;
    assert!(
        list["reports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["report_id"] == third.as_str())
    );

    // The open reports are counted per tenant by the leader.
    let worker = cluster.workers[0]
        .metrics_addr
        .expect("the worker's metrics listener");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let w = scrape(worker).await;
        let open = sum(&w, "switchboard_reports_open", r#"tenant="acme""#);
        if open == 2.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "open reports: {open}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A flood from one user is cut at its rate: 10 a minute.
    let flood = cluster.rest(0, "rp_flood");
    let mut statuses = Vec::new();
    for _ in 0..11 {
        let (status, _) = call(&flood, "POST", &report_path(owners), spam_reason.clone()).await;
        statuses.push(status);
    }
    assert_eq!(statuses[..10], [201; 10]);
    assert_eq!(statuses[10], 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_holds_what_the_user_sent_read_page_by_page() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster
        .create(ConversationKind::Group, "ex_bob", &["ex_ann"])
        .await;
    let dm = cluster
        .create(ConversationKind::Direct, "ex_ann", &["ex_bob"])
        .await;
    let ann = cluster.rest(0, "ex_ann");
    let mut ann_ws = cluster.ws(0, "ex_ann", "a").await;
    let mut bob_ws = cluster.ws(0, "ex_bob", "b").await;
    // More than two pages of history (200 each) of the user's own, within
    // the connection's send rate.
    for i in 0..450 {
        if i % 150 == 149 {
            tokio::time::sleep(Duration::from_millis(800)).await;
        }
        send_acked(&mut ann_ws, &group, &format!("e{i}"), "mine").await;
    }
    send_acked(&mut bob_ws, &group, "bob-1", "not mine").await;
    send_acked(&mut ann_ws, &dm, "ann-dm", "hi bob").await;
    let (status, _) = call(&ann, "PUT", "/v1/blocks/ex_eve", None).await;
    assert_eq!(status, 200);

    let url = format!("{}/v1/me/export", ann.base());
    let answer = ann
        .raw()
        .get(&url)
        .bearer_auth(ann.token())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    assert!(
        answer.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment")
    );
    let doc: Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
    assert_eq!(doc["profile"]["user_id"], "ex_ann");
    assert_eq!(doc["profile"]["tenant"], "acme");
    assert_eq!(doc["blocks"][0]["user_id"], "ex_eve");
    let conversations = doc["conversations"].as_array().unwrap();
    assert_eq!(conversations.len(), 2);
    let of = |id: &str| {
        conversations
            .iter()
            .find(|c| c["conversation_id"] == id)
            .unwrap()
    };
    let in_group = of(&group)["messages"].as_array().unwrap();
    assert_eq!(
        in_group.len(),
        450,
        "every message the user sent, none else"
    );
    assert!(in_group.iter().all(|m| m["sender_id"] == "ex_ann"));
    let seqs: Vec<u64> = in_group
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] > w[1]), "newest first");
    assert_eq!(of(&group)["role"], "member");
    assert_eq!(of(&dm)["messages"][0]["content"]["text"], "hi bob");
    // Someone else's export holds nothing of this user's but what they share.
    let bob = cluster.rest(0, "ex_bob");
    let (status, theirs) = call(&bob, "GET", "/v1/me/export", None).await;
    assert_eq!(status, 200);
    assert_eq!(theirs["profile"]["user_id"], "ex_bob");
    let bob_group: Vec<&Value> = theirs["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["messages"].as_array().unwrap())
        .collect();
    assert!(bob_group.iter().all(|m| m["sender_id"] == "ex_bob"));
    // Exports are few: four an hour per user.
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(call(&ann, "GET", "/v1/me/export", None).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disappearing_messages_are_gone_within_a_pass_of_their_time() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "expiry_pass_secs = 1\n".into(),
        ..Default::default()
    })
    .await;
    let group = cluster
        .create(ConversationKind::Group, "rt_own", &["rt_mem"])
        .await;
    let owner = cluster.rest(0, "rt_own");
    let member = cluster.rest(0, "rt_mem");
    let path = format!("/v1/conversations/{group}");
    let mut own = cluster.ws(0, "rt_own", "o").await;
    let mut mem = cluster.ws(0, "rt_mem", "m").await;
    let (status, _) = call(
        &owner,
        "PATCH",
        &path,
        Some(json!({"disappearing_secs": 5})),
    )
    .await;
    assert_eq!(status, 200);
    let (doomed, _) = send_acked(&mut own, &group, "d1", "soon gone").await;
    let seen = expect(&mut mem, "the message", |f| match f {
        ServerFrame::Message { message } if message.message_id == doomed => Some(message),
        _ => None,
    })
    .await;
    let expires_at = seen.expires_at.expect("expires_at");
    assert_eq!(expires_at.unix_ms() - seen.created_at.unix_ms(), 5_000);
    mem.send_text(
        json!({"type": "react", "conversation_id": group, "message_id": doomed.to_string(),
               "emoji": "👍", "action": "add"})
        .to_string(),
    )
    .await
    .unwrap();
    // Off again: what is sent now stays.
    let (status, view) = call(
        &owner,
        "PATCH",
        &path,
        Some(json!({"disappearing_secs": null, "retention_days": 30})),
    )
    .await;
    assert_eq!((status, &view["disappearing_secs"]), (200, &Value::Null));
    let (kept, _) = send_acked(&mut own, &group, "k1", "stays a month").await;

    // Gone within a pass (1 s here) of its time: no content, no
    // reactions, the row keeping its seq; the other untouched.
    let history = format!("/v1/conversations/{group}/messages");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, page) = call(&member, "GET", &history, None).await;
        let find = |id: switchboard_protocol::MessageId| {
            page["messages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["message_id"] == id.to_string())
                .cloned()
                .unwrap()
        };
        let (gone, stays) = (find(doomed), find(kept));
        if !gone["deleted_at"].is_null() {
            assert!(gone["content"].is_null());
            assert!(gone["reactions"].as_array().unwrap().is_empty());
            assert_eq!(stays["content"]["text"], "stays a month");
            assert!(stays["expires_at"].is_string(), "a month from now: {stays}");
            assert!(
                Timestamp::now().unix_ms() <= expires_at.unix_ms() + 5_000,
                "gone later than a pass after its time"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not expired: {gone}\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (status, versions) = call(
        &member,
        "GET",
        &format!("{history}/{doomed}/versions"),
        None,
    )
    .await;
    assert!(
        status == 404 || !versions.to_string().contains("soon gone"),
        "{status} {versions}"
    );
}

/// The moderation plugin consulted on reports (v1.2), when its
/// configuration asks (`review_reports = "true"`): a message it rejects
/// is deleted through the writer and the report resolved by
/// `moderation-plugin`; one it allows stays open for the admins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moderation_plugin_that_asks_reviews_reports() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster
        .create(ConversationKind::Group, "rv_own", &["rv_mem", "rv_bad"])
        .await;
    let mut bad = cluster.ws(0, "rv_bad", "b").await;
    let mut mem = cluster.ws(0, "rv_mem", "m").await;
    // Sent before the plugin came: both are stored.
    let (scam, _) = send_acked(&mut bad, &group, "scam-1", "cheap scam coins").await;
    let (fine, _) = send_acked(&mut bad, &group, "fine-1", "good morning").await;
    let admin = cluster.rest_as(0, switchboard_tests::TENANT, "rv_ops", true);
    admin
        .deploy_plugin(
            "moderation",
            switchboard_tests::plugin("word-list"),
            &[
                ("words", "scam"),
                ("action", "reject"),
                ("review_reports", "true"),
            ],
            None,
        )
        .await
        .unwrap();
    // Running on the gateway: a new send with the word is refused.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    for i in 0.. {
        let refused = send_with(&mut mem, &group, &format!("probe-{i}"), "a scam", json!({})).await;
        if refused.is_err() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the plugin never ran"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let member = cluster.rest(0, "rv_mem");
    for m in [scam, fine] {
        let path = format!("/v1/conversations/{group}/messages/{m}/reports");
        let (status, body) = call(&member, "POST", &path, Some(json!({"reason": "spam"}))).await;
        assert_eq!(status, 201, "{body}");
    }
    let resolved = switchboard_tests::eventually(
        "the plugin resolves the report of the scam",
        Duration::from_secs(15),
        || async {
            let (_, list) = call(&admin, "GET", "/v1/admin/reports?status=resolved", None).await;
            list["reports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["message_id"] == scam.to_string())
                .cloned()
        },
    )
    .await;
    assert_eq!(resolved["action"], "delete_message");
    assert_eq!(resolved["resolved_by"], "moderation-plugin");
    let (_, open) = call(&admin, "GET", "/v1/admin/reports?status=open", None).await;
    let open: Vec<&Value> = open["reports"].as_array().unwrap().iter().collect();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0]["message_id"], fine.to_string());
    let history = full_history(&cluster, &group, "rv_mem").await;
    let gone = history.iter().find(|m| m.message_id == scam).unwrap();
    assert!(gone.content.is_none() && gone.deleted_at.is_some());
}

/// The tenant default `retention_days` (v1.2, kept in its record): bounded
/// like a conversation's; a message of a conversation without a retention
/// of its own expires that many days after it was sent; and every
/// conversation of such a tenant is visited, so a message whose time has
/// come goes even where the conversation has no lifetime any more (here:
/// sent while it disappeared after 5 s, which was then turned off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenant_default_retention_applies_where_a_conversation_sets_none() {
    use switchboard_tests::cluster::{OPERATOR_TOKEN, SECRET, TENANT};
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "operator_token = \"{OPERATOR_TOKEN}\"\nexpiry_pass_secs = 3600\ntenant_retention_pass_secs = 1\n"
        ),
        ..Default::default()
    })
    .await;
    create_tenant_record(&cluster, TENANT, SECRET).await;
    let tenant = format!("/v1/operator/tenants/{TENANT}");
    let patch = |body: Value| {
        let (cluster, tenant) = (&cluster, tenant.clone());
        async move {
            cluster
                .operator(
                    reqwest::Method::PATCH,
                    &tenant,
                    Some(body),
                    Some(OPERATOR_TOKEN),
                )
                .await
        }
    };
    for bad in [0, 36501] {
        let (status, body) = patch(json!({"retention_days": bad})).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (status, body) = patch(json!({"retention_days": 36500})).await;
    assert_eq!((status, &body["retention_days"]), (200, &json!(36500)));
    let (status, body) = patch(json!({"retention_days": null})).await;
    assert_eq!((status, &body["retention_days"]), (200, &Value::Null));
    let (status, body) = patch(json!({"retention_days": 1})).await;
    assert_eq!((status, &body["retention_days"]), (200, &json!(1)));

    let group = cluster
        .create(ConversationKind::Group, "tr_own", &["tr_mem"])
        .await;
    let owner = cluster.rest(0, "tr_own");
    let member = cluster.rest(0, "tr_mem");
    let path = format!("/v1/conversations/{group}");
    let mut own = cluster.ws(0, "tr_own", "o").await;
    let mut mem = cluster.ws(0, "tr_mem", "m").await;
    // The workers follow the record: a send carries a day's lifetime.
    let day = 86_400_000;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for n in 0.. {
        let (id, _) = send_acked(&mut own, &group, &format!("r{n}"), "a day").await;
        let seen = expect(&mut mem, "the message", |f| match f {
            ServerFrame::Message { message } if message.message_id == id => Some(message),
            _ => None,
        })
        .await;
        let lifetime = seen
            .expires_at
            .map(|at| at.unix_ms() - seen.created_at.unix_ms());
        if lifetime == Some(day) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no message carries the tenant's retention: {lifetime:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // A conversation's own retention wins over the tenant's.
    let (status, _) = call(&owner, "PATCH", &path, Some(json!({"retention_days": 3}))).await;
    assert_eq!(status, 200);
    let (id, _) = send_acked(&mut own, &group, "own", "three days").await;
    let seen = expect(&mut mem, "the message", |f| match f {
        ServerFrame::Message { message } if message.message_id == id => Some(message),
        _ => None,
    })
    .await;
    assert_eq!(
        seen.expires_at
            .map(|at| at.unix_ms() - seen.created_at.unix_ms()),
        Some(3 * day)
    );

    // Sent while it disappeared after 5 s; then the conversation has no
    // lifetime of its own, and only the tenant's pass visits it.
    let (status, _) = call(
        &owner,
        "PATCH",
        &path,
        Some(json!({"retention_days": null, "disappearing_secs": 5})),
    )
    .await;
    assert_eq!(status, 200);
    let (doomed, _) = send_acked(&mut own, &group, "d1", "soon gone").await;
    let (status, _) = call(
        &owner,
        "PATCH",
        &path,
        Some(json!({"disappearing_secs": null})),
    )
    .await;
    assert_eq!(status, 200);
    let history = format!("/v1/conversations/{group}/messages");
    switchboard_tests::eventually(
        "the message goes at its time",
        Duration::from_secs(20),
        || async {
            let (_, page) = call(&member, "GET", &history, None).await;
            let gone = page["messages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["message_id"] == doomed.to_string())
                .cloned()
                .unwrap();
            (!gone["deleted_at"].is_null() && gone["content"].is_null()).then_some(())
        },
    )
    .await;
}
