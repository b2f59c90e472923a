//! Scheduled messages (v1.2): a send with `send_at` waits on
//! `SB_SCHEDULED`, survives kill -9 of the worker, is sent once at its
//! time with the next `seq`, and can be listed and cancelled.

use std::time::Duration;
use switchboard_protocol::SendAck;

use serde_json::{Value, json};
use switchboard_protocol::AckStatus;
use switchboard_protocol::{ConversationKind, ServerFrame, Timestamp};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

pub(crate) fn in_ms(ms: i64) -> String {
    Timestamp::from_unix_ms(Timestamp::now().unix_ms() + ms).to_rfc3339()
}

/// Schedules a text over the socket: the ack's (scheduled_id, send_at).
pub(crate) async fn schedule(
    ws: &mut switchboard_client::WsClient,
    conv: &str,
    id: &str,
    text: &str,
    send_at: &str,
) -> (String, String) {
    let frame = json!({
        "type": "send_message", "client_msg_id": id, "conversation_id": conv,
        "content": {"kind": "text", "text": text}, "send_at": send_at,
    });
    ws.send_text(frame.to_string()).await.unwrap();
    expect(ws, &format!("the ack of {id}"), |f| match f {
        ServerFrame::Ack(SendAck {
            client_msg_id,
            status,
            message_id,
            seq,
            scheduled_id: Some(scheduled),
            send_at: Some(at),
            ..
        }) if client_msg_id.as_str() == id => {
            assert_eq!(status, AckStatus::Scheduled);
            assert!(message_id.is_none() && seq.is_none(), "no seq until sent");
            Some((scheduled, at.to_rfc3339()))
        }
        ServerFrame::Error {
            client_msg_id: Some(c),
            message,
            ..
        } if c == id => {
            panic!("{id} refused: {message}")
        }
        _ => None,
    })
    .await
}

fn listed(body: &Value) -> Vec<String> {
    body["scheduled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["client_msg_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_messages_wait_survive_a_killed_worker_and_go_once() {
    let mut cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster
        .create(ConversationKind::Group, "sc_ann", &["sc_bob"])
        .await;
    let ann = cluster.rest(0, "sc_ann");
    let mut ann_phone = cluster.ws(0, "sc_ann", "phone").await;
    let mut bob = cluster.ws(0, "sc_bob", "phone").await;
    let (_, before) = send_acked(&mut ann_phone, &group, "now-1", "first").await;
    expect_message(&mut bob).await;

    let send_at = in_ms(4_000);
    let (kept, at) = schedule(&mut ann_phone, &group, "later-1", "later", &send_at).await;
    assert_eq!(at, send_at);
    let (again, _) = schedule(&mut ann_phone, &group, "later-1", "later", &send_at).await;
    assert_eq!(again, kept, "the same client_msg_id is the same schedule");
    let (cancelled, _) = schedule(&mut ann_phone, &group, "later-2", "never", &send_at).await;
    let (status, body) = call(&ann, "GET", "/v1/scheduled", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(listed(&body), ["later-1", "later-2"]);
    assert_eq!(body["scheduled"][0]["scheduled_id"], kept.as_str());
    assert_eq!(body["scheduled"][0]["content"]["text"], "later");
    assert_eq!(body["scheduled"][0]["send_at"], send_at.as_str());
    let path = format!("/v1/scheduled/{cancelled}");
    assert_eq!(call(&ann, "DELETE", &path, None).await.0, 204);
    assert_eq!(call(&ann, "DELETE", &path, None).await.0, 404);
    let bob_rest = cluster.rest(0, "sc_bob");
    let (status, body) = call(&bob_rest, "DELETE", &format!("/v1/scheduled/{kept}"), None).await;
    assert_eq!(
        status, 404,
        "another user's schedule is not theirs to cancel: {body}"
    );
    assert_eq!(
        listed(&call(&bob_rest, "GET", "/v1/scheduled", None).await.1),
        Vec::<String>::new()
    );

    // The only worker dies and comes back while the message waits.
    cluster.workers[0].kill9().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.workers[0].restart().await;

    let seen = expect(&mut bob, "the scheduled message", |f| match f {
        ServerFrame::Message { message } => Some(message),
        _ => None,
    })
    .await;
    assert_eq!(text_of(&seen), "later");
    assert_eq!(seen.seq, before + 1, "its seq is given when it is sent");
    assert_eq!(seen.sender_id.as_str(), "sc_ann");
    assert_eq!(seen.sender_device.as_str(), "sb:scheduled");
    assert!(
        seen.created_at.unix_ms() >= Timestamp::parse_rfc3339(&send_at).unwrap().unix_ms(),
        "not before its time"
    );
    // Every device of the sender gets it as a message.
    let mine = expect_message(&mut ann_phone).await;
    assert_eq!(mine.message_id, seen.message_id);

    tokio::time::sleep(Duration::from_secs(3)).await;
    let texts: Vec<_> = full_history(&cluster, &group, "sc_bob")
        .await
        .iter()
        .filter(|m| m.deleted_at.is_none())
        .map(|m| text_of(m).to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(
        texts.iter().filter(|t| *t == "later").count(),
        1,
        "sent once: {texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t == "never"),
        "a cancelled one never goes"
    );
    assert_eq!(
        listed(&call(&ann, "GET", "/v1/scheduled", None).await.1),
        Vec::<String>::new()
    );
    assert_eq!(
        call(&ann, "DELETE", &format!("/v1/scheduled/{kept}"), None)
            .await
            .0,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduling_is_bounded_in_time_count_and_membership() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster
        .create(ConversationKind::Group, "sb_cid", &["sb_dan"])
        .await;
    let cid = cluster.rest(0, "sb_cid");
    let post = |id: String, send_at: String| json!({"client_msg_id": id, "content": {"kind": "text", "text": "x"}, "send_at": send_at});
    let messages = format!("/v1/conversations/{group}/messages");
    for (send_at, why) in [
        (in_ms(-1_000), "in the past"),
        (in_ms(31 * 24 * 3600 * 1000), "more than 30 days ahead"),
    ] {
        let (status, body) = call(&cid, "POST", &messages, Some(post("bad".into(), send_at))).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("invalid_request")),
            "{why}: {body}"
        );
    }
    let stranger = cluster.rest(0, "sb_stranger");
    let (status, body) = call(
        &stranger,
        "POST",
        &messages,
        Some(post("s".into(), in_ms(60_000))),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("not_a_member")),
        "{body}"
    );

    // 100 wait; the 101st is refused until one goes.
    let far = in_ms(29 * 24 * 3600 * 1000);
    for i in 0..100 {
        let (status, body) = call(
            &cid,
            "POST",
            &messages,
            Some(post(format!("m-{i}"), far.clone())),
        )
        .await;
        assert_eq!(status, 200, "{i}: {body}");
        assert_eq!(body["status"], "scheduled");
        assert!(body["seq"].is_null() && body["message_id"].is_null());
    }
    let (status, body) = call(
        &cid,
        "POST",
        &messages,
        Some(post("m-100".into(), far.clone())),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (429, Some("quota_exceeded")),
        "{body}"
    );
    // Scheduling one of the hundred again is not a new one.
    let (status, _) = call(
        &cid,
        "POST",
        &messages,
        Some(post("m-7".into(), far.clone())),
    )
    .await;
    assert_eq!(status, 200);
    let (_, listed_now) = call(&cid, "GET", "/v1/scheduled", None).await;
    assert_eq!(listed_now["scheduled"].as_array().unwrap().len(), 100);
    let first = listed_now["scheduled"][0]["scheduled_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        call(&cid, "DELETE", &format!("/v1/scheduled/{first}"), None)
            .await
            .0,
        204
    );
    let (status, body) = call(&cid, "POST", &messages, Some(post("m-100".into(), far))).await;
    assert_eq!(status, 200, "{body}");
    // Another user has their own hundred.
    let dan = cluster.rest(0, "sb_dan");
    let (status, _) = call(
        &dan,
        "POST",
        &messages,
        Some(post("d-0".into(), in_ms(60_000))),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_message_is_moderated_at_its_time() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster
        .create(ConversationKind::Group, "sm_ann", &["sm_bob"])
        .await;
    let mut ann = cluster.ws(0, "sm_ann", "phone").await;
    let mut bob = cluster.ws(0, "sm_bob", "phone").await;
    let (bad_at, fine_at) = (in_ms(3_000), in_ms(3_500));
    schedule(&mut ann, &group, "bad-1", "nope, later", &bad_at).await;
    schedule(&mut ann, &group, "fine-1", "fine, later", &fine_at).await;
    // The moderator arrives after they were scheduled, before their time.
    let admin = cluster.rest_as(0, switchboard_tests::TENANT, "sm_root", true);
    admin
        .deploy_plugin(
            "moderation",
            switchboard_tests::plugin("word-list"),
            &[("words", "nope"), ("action", "reject")],
            None,
        )
        .await
        .unwrap();
    let (code, request_type, client_msg_id, _) = expect_error(&mut ann).await;
    assert_eq!(
        (
            code.as_str(),
            request_type.as_deref(),
            client_msg_id.as_deref()
        ),
        ("rejected_by_policy", Some("send_message"), Some("bad-1"))
    );
    let seen = expect_message(&mut bob).await;
    assert_eq!(
        text_of(&seen),
        "fine, later",
        "the refused one never reached bob"
    );
}

/// `posting: "admins"` (v1.3) holds for a scheduled send as for any:
/// decided by the writer when it comes due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_message_of_a_plain_member_is_refused_once_only_admins_post() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let channel = cluster
        .create(ConversationKind::Channel, "sp_ann", &["sp_bob"])
        .await;
    let mut bob = cluster.ws(0, "sp_bob", "phone").await;
    schedule(&mut bob, &channel, "later-1", "my take", &in_ms(3_000)).await;
    let (status, body) = call(
        &cluster.rest(0, "sp_ann"),
        "PATCH",
        &format!("/v1/conversations/{channel}"),
        Some(json!({"posting": "admins"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (code, request_type, client_msg_id, _) = expect_error(&mut bob).await;
    assert_eq!(
        (
            code.as_str(),
            request_type.as_deref(),
            client_msg_id.as_deref()
        ),
        ("forbidden", Some("send_message"), Some("later-1"))
    );
}
