//! Polls (v1.3) from outside: content kind `poll` sent over the socket
//! and bounded, `vote` frames and REST votes counted once per member by
//! the conversation's writer, `poll_updated` to the members (voters
//! unless anonymous), `poll_results` with the reader's own `me` in
//! history and in an away device's backlog, closing by hand and by time,
//! no edits, search by its question; and in a channel that fans out on
//! read, a burst of votes coalesced.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_client::WsClient;
use switchboard_protocol::{
    ConversationKind, ErrorCode, Message, MessageId, ServerFrame, Timestamp,
};
use switchboard_tests::{Cluster, ClusterSpec, eventually};

use crate::support::*;

fn poll(question: &str, options: usize, extra: Value) -> Value {
    let mut p = json!({
        "kind": "poll",
        "question": question,
        "options": (0..options)
            .map(|i| json!({"id": format!("o{i}"), "text": format!("Option {i}")}))
            .collect::<Vec<_>>(),
    });
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

async fn send_poll(
    ws: &mut WsClient,
    conv: &str,
    id: &str,
    content: Value,
) -> Result<MessageId, (ErrorCode, String)> {
    let frame = json!({
        "type": "send_message", "client_msg_id": id, "conversation_id": conv, "content": content,
    });
    Ok(send_json(ws, frame).await?.message_id.unwrap())
}

async fn vote(ws: &mut WsClient, conv: &str, message: MessageId, options: &[&str]) {
    ws.send_text(
        json!({
            "type": "vote", "conversation_id": conv,
            "message_id": message.to_string(), "option_ids": options,
        })
        .to_string(),
    )
    .await
    .unwrap();
}

/// The next `poll_updated` of `message`: (counts, closed, voters).
async fn poll_updated(ws: &mut WsClient, message: MessageId) -> (Value, bool, Option<Value>) {
    expect(ws, "poll_updated", |f| match f {
        ServerFrame::PollUpdated {
            message_id,
            counts,
            closed,
            voters,
            ..
        } if message_id == message => Some((json!(counts), closed, voters.map(|v| json!(v)))),
        ServerFrame::Error { code, message, .. } => panic!("refused: {code} {message}"),
        _ => None,
    })
    .await
}

fn results_of(history: &[Message], message: MessageId) -> Value {
    let m = history
        .iter()
        .find(|m| m.message_id == message)
        .expect("the poll is in the history");
    json!(m.poll_results)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_counts_one_vote_per_member_and_shows_each_reader_their_own() {
    let mut cluster = Cluster::start(ClusterSpec::default()).await;
    cluster.add_search().await;
    // An away phone the gateway knows (it said hello once).
    cluster.ws(0, "po_dee", "phone").await.close().await;
    let group = cluster
        .create(
            ConversationKind::Group,
            "po_ann",
            &["po_bob", "po_cy", "po_dee"],
        )
        .await;
    let mut ann = cluster.ws(0, "po_ann", "phone").await;
    let mut bob = cluster.ws(0, "po_bob", "phone").await;

    // Bounds: 2 to 10 options, unique ids, a question, a future closing.
    let past = Timestamp::from_unix_ms(Timestamp::now().unix_ms() - 1_000).to_rfc3339();
    for (id, content) in [
        ("b1", poll("One?", 1, json!({}))),
        ("b2", poll("Eleven?", 11, json!({}))),
        ("b3", poll("", 2, json!({}))),
        ("b4", poll(&"q".repeat(301), 2, json!({}))),
        ("b5", poll("Late?", 2, json!({"closes_at": past}))),
        (
            "b6",
            json!({"kind": "poll", "question": "Same?", "options": [
                {"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}),
        ),
    ] {
        let (code, why) = send_poll(&mut ann, &group, id, content).await.unwrap_err();
        assert_eq!(code, ErrorCode::InvalidFrame, "{id}: {why}");
    }
    assert!(
        send_poll(
            &mut ann,
            &group,
            "b7",
            poll(&"q".repeat(300), 10, json!({}))
        )
        .await
        .is_ok()
    );
    expect_message(&mut bob).await;

    let lunch = send_poll(&mut ann, &group, "p1", poll("Lunch?", 3, json!({})))
        .await
        .unwrap();
    let got = expect_message(&mut bob).await;
    assert_eq!(got.message_id, lunch);
    assert_eq!(
        json!(got.poll_results),
        json!({"counts": {"o0": 0, "o1": 0, "o2": 0}, "closed": false,
               "voters": {"o0": [], "o1": [], "o2": []}, "me": []})
    );

    // Bob votes over the socket: every member hears it, with the voters.
    vote(&mut bob, &group, lunch, &["o1"]).await;
    let (counts, closed, voters) = poll_updated(&mut ann, lunch).await;
    assert_eq!(counts, json!({"o0": 0, "o1": 1, "o2": 0}));
    assert!(!closed);
    assert_eq!(voters.unwrap()["o1"], json!(["po_bob"]));
    poll_updated(&mut bob, lunch).await;
    // A new vote replaces his; more than one option is refused here.
    vote(&mut bob, &group, lunch, &["o2"]).await;
    let (counts, _, _) = poll_updated(&mut ann, lunch).await;
    assert_eq!(counts, json!({"o0": 0, "o1": 0, "o2": 1}));
    poll_updated(&mut bob, lunch).await;
    vote(&mut bob, &group, lunch, &["o0", "o1"]).await;
    let (code, request_type, message_id) = expect_refusal(&mut bob).await;
    assert_eq!(code, ErrorCode::InvalidRequest);
    assert_eq!(request_type.as_deref(), Some("vote"));
    assert_eq!(message_id, Some(lunch.to_string()));
    vote(&mut bob, &group, lunch, &["nope"]).await;
    assert_eq!(expect_refusal(&mut bob).await.0, ErrorCode::InvalidRequest);

    // Cy votes over REST; a repeat is the same vote.
    let cy = cluster.rest(0, "po_cy");
    let votes = format!("/v1/conversations/{group}/messages/{lunch}/votes");
    for _ in 0..2 {
        let (status, body) = call(&cy, "POST", &votes, Some(json!({"option_ids": ["o2"]}))).await;
        assert_eq!(status, 204, "{body}");
    }
    let (counts, _, voters) = poll_updated(&mut ann, lunch).await;
    assert_eq!(counts, json!({"o0": 0, "o1": 0, "o2": 2}));
    assert_eq!(voters.unwrap()["o2"], json!(["po_cy", "po_bob"]));
    // Not a member's to vote in.
    let (status, body) = call(
        &cluster.rest(0, "po_eve"),
        "POST",
        &votes,
        Some(json!({"option_ids": ["o0"]})),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("not_a_member")),
        "{body}"
    );

    // Each reader's own choice: in history, and in the away phone's backlog.
    let as_bob = full_history(&cluster, &group, "po_bob").await;
    assert_eq!(results_of(&as_bob, lunch)["me"], json!(["o2"]));
    let as_ann = full_history(&cluster, &group, "po_ann").await;
    assert_eq!(results_of(&as_ann, lunch)["me"], json!([]));
    assert_eq!(results_of(&as_ann, lunch)["counts"]["o2"], 2);
    let mut dee = cluster.ws(0, "po_dee", "phone").await;
    let (backlog, _, _) = pull(&mut dee, None, None, None).await;
    let latest = backlog
        .iter()
        .rev()
        .find(|m| m.message_id == lunch)
        .unwrap();
    assert_eq!(json!(latest.poll_results)["counts"]["o2"], 2);

    // A poll is not edited.
    ann.send_text(
        json!({"type": "edit_message", "conversation_id": group, "message_id": lunch.to_string(),
               "content": poll("Dinner?", 3, json!({}))})
        .to_string(),
    )
    .await
    .unwrap();
    assert_eq!(expect_refusal(&mut ann).await.0, ErrorCode::Conflict);

    // Closing: not Bob's (he did not ask it); Ann's, once; then no votes.
    let close = format!("/v1/conversations/{group}/messages/{lunch}/close");
    let (status, body) = call(&cluster.rest(0, "po_bob"), "POST", &close, None).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    for _ in 0..2 {
        let (status, body) = call(&cluster.rest(0, "po_ann"), "POST", &close, None).await;
        assert_eq!(status, 204, "{body}");
    }
    // (Bob hears Cy's vote first.)
    while !poll_updated(&mut bob, lunch).await.1 {}
    vote(&mut bob, &group, lunch, &["o1"]).await;
    assert_eq!(expect_refusal(&mut bob).await.0, ErrorCode::Conflict);
    let as_bob = full_history(&cluster, &group, "po_bob").await;
    assert_eq!(results_of(&as_bob, lunch)["closed"], true);

    // Anonymous: counts, never voters.
    let secret = send_poll(
        &mut ann,
        &group,
        "p2",
        poll("Secret?", 2, json!({"anonymous": true})),
    )
    .await
    .unwrap();
    vote(&mut bob, &group, secret, &["o0"]).await;
    let (counts, _, voters) = poll_updated(&mut ann, secret).await;
    assert_eq!((counts["o0"].as_u64(), voters), (Some(1), None));
    let as_bob = full_history(&cluster, &group, "po_bob").await;
    let results = results_of(&as_bob, secret);
    assert!(results.get("voters").is_none(), "{results}");
    assert_eq!(results["me"], json!(["o0"]));

    // Closing by time: once it passed, no vote, and it reads as closed.
    let soon = Timestamp::from_unix_ms(Timestamp::now().unix_ms() + 1_500).to_rfc3339();
    let timed = send_poll(
        &mut ann,
        &group,
        "p3",
        poll("Quick?", 2, json!({"closes_at": soon})),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1_700)).await;
    let (status, body) = call(
        &cy,
        "POST",
        &format!("/v1/conversations/{group}/messages/{timed}/votes"),
        Some(json!({"option_ids": ["o0"]})),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("conflict")),
        "{body}"
    );
    let as_cy = full_history(&cluster, &group, "po_cy").await;
    assert_eq!(results_of(&as_cy, timed)["closed"], true);

    // Found by its question; the list previews it as a poll.
    let found = eventually("the poll in search", Duration::from_secs(20), || async {
        let (status, body) = call(&cy, "GET", "/v1/search?q=lunch", None).await;
        (status == 200 && body["results"].as_array().is_some_and(|r| r.len() == 1)).then_some(body)
    })
    .await;
    assert_eq!(
        found["results"][0]["message"]["content"]["question"],
        "Lunch?"
    );
    let list = cy.conversations().await.unwrap();
    assert_eq!(
        list.conversations[0].preview.as_deref(),
        Some("[poll] Quick?")
    );
}

/// A channel that fans out on read: a burst of votes reaches a member
/// as fewer `poll_updated` than votes, the last with the final counts;
/// the voter hears each of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_channel_coalesces_poll_updates() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "fanout_threshold = 3\n".into(),
        ..Default::default()
    })
    .await;
    let channel = cluster
        .create(ConversationKind::Channel, "pl_a", &["pl_b", "pl_c", "pl_d"])
        .await;
    let mut a = cluster.ws(0, "pl_a", "d").await;
    let mut b = cluster.ws(0, "pl_b", "d").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let id = send_poll(
        &mut a,
        &channel,
        "p1",
        poll("Pick", 10, json!({"multiple": true})),
    )
    .await
    .unwrap();
    expect_message(&mut b).await;

    // Ann's choice grows one option at a time, then shrinks back; her
    // last is one she never made before.
    const BURST: usize = 16;
    let choice = |i: usize| -> Vec<String> {
        if i == BURST - 1 {
            return vec!["o9".into()];
        }
        let n = if i < 8 { i + 1 } else { BURST - 1 - i };
        (0..n).map(|o| format!("o{o}")).collect()
    };
    for i in 0..BURST {
        let c = choice(i);
        let refs: Vec<&str> = c.iter().map(String::as_str).collect();
        vote(&mut a, &channel, id, &refs).await;
    }
    for i in 0..BURST {
        let (counts, _, _) = poll_updated(&mut a, id).await;
        let chosen = counts
            .as_object()
            .unwrap()
            .values()
            .filter(|n| *n == 1)
            .count();
        assert_eq!(chosen, choice(i).len(), "the voter's own update {i}");
    }
    let mut events = 0;
    loop {
        let (counts, _, voters) = poll_updated(&mut b, id).await;
        events += 1;
        let chosen = counts
            .as_object()
            .unwrap()
            .values()
            .filter(|n| *n == 1)
            .count();
        if chosen == 1 && counts["o9"] == 1 {
            assert_eq!(voters.unwrap()["o9"], json!(["pl_a"]));
            break;
        }
    }
    assert!(events < BURST, "{events} poll_updated for {BURST} votes");
}
