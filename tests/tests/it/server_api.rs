//! The server API (v1.2): a bot's token sends over REST through the same
//! checks and writer as a socket's send, idempotent by `client_msg_id`.

use serde_json::json;
use switchboard_protocol::AckStatus;
use switchboard_protocol::server_api::PostMessage;
use switchboard_protocol::{ClientMsgId, Content, ConversationKind, ErrorCode};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

fn post(id: &str, text: &str) -> PostMessage {
    PostMessage {
        client_msg_id: ClientMsgId::new(id).unwrap(),
        content: Content::Text {
            text: text.to_owned(),
        },
        reply_to: None,
        thread_id: None,
        mentions: Vec::new(),
        mention_all: false,
        send_at: None,
        custom: None,
        previews: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_sends_over_rest_once_per_client_msg_id() {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let group = cluster
        .create(ConversationKind::Group, "sa_ann", &["sa_bot", "sa_bob"])
        .await;
    let mut bob = cluster.ws(1, "sa_bob", "phone").await;
    let bot = cluster.rest_bot(0, "sa_bot");

    let posted = bot
        .post_message(&group, &post("b-1", "deploy done"))
        .await
        .unwrap();
    assert_eq!(posted.status, AckStatus::Sent);
    assert_eq!(posted.client_msg_id.as_str(), "b-1");
    assert_eq!(posted.conversation_id.as_str(), group);
    assert!(posted.content.is_none(), "nothing rewrote it");
    let seen = expect_message(&mut bob).await;
    assert_eq!(Some(seen.message_id), posted.message_id);
    assert_eq!(Some(seen.seq), posted.seq);
    let posted_seq = posted.seq.unwrap();
    assert_eq!(seen.sender_id.as_str(), "sa_bot");
    assert_eq!(text_of(&seen), "deploy done");

    // Retries, one after the other and several at once, answer the first
    // message and store nothing.
    let again = bot
        .post_message(&group, &post("b-1", "deploy done"))
        .await
        .unwrap();
    assert_eq!(again, posted);
    let twice = post("b-2", "twice?");
    let at_once = futures::future::join_all((0..4).map(|_| bot.post_message(&group, &twice))).await;
    let first = at_once[0].as_ref().unwrap().clone();
    for answer in &at_once {
        assert_eq!(answer.as_ref().unwrap(), &first);
    }
    assert_eq!(first.seq, Some(posted_seq + 1));
    let history = full_history(&cluster, &group, "sa_ann").await;
    let texts: Vec<_> = history
        .iter()
        .filter(|m| matches!(m.content, Some(Content::Text { .. })))
        .map(text_of)
        .collect();
    assert_eq!(texts, ["deploy done", "twice?"]);

    // A socket's send after them continues the same seq.
    let (_, seq) = send_acked(&mut bob, &group, "bob-1", "thanks").await;
    assert_eq!(Some(seq), first.seq.map(|s| s + 1));

    // Refusals are the socket's, with the same codes; a refused retry is
    // refused again.
    let stranger = cluster.rest_bot(1, "sa_stranger");
    for _ in 0..2 {
        let refused = stranger
            .post_message(&group, &post("s-1", "hi"))
            .await
            .unwrap_err();
        assert_eq!(code_of(&refused), ErrorCode::NotAMember.as_str());
    }
    let (status, body) = call(
        &bot,
        "POST",
        &format!("/v1/conversations/{group}/messages"),
        Some(json!({"client_msg_id": "b-3", "content": {"kind": "text", "text": ""}})),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_request")),
        "{body}"
    );
    let (status, body) = call(
        &bot,
        "POST",
        &format!("/v1/conversations/{group}/messages"),
        Some(json!({"client_msg_id": "b-4", "content": {"kind": "text", "text": "x"}, "mentions": ["sa_nobody"]})),
    )
    .await;
    assert_eq!(body["code"], "invalid_request", "{status} {body}");
    let (status, body) = call(
        &bot,
        "POST",
        "/v1/conversations/no_such/messages",
        Some(json!({"client_msg_id": "b-5", "content": {"kind": "text", "text": "x"}})),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
}

fn code_of(e: &switchboard_client::RestError) -> &str {
    e.code().unwrap_or_else(|| panic!("not an API error: {e}"))
}
