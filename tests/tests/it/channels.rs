//! Public channels, invites and announcement posting (v1.3), from a
//! plain REST and WebSocket client: the directory, joining with history
//! from the join on, invites with uses and revocation, bans and blocks
//! on every way in, and `posting: "admins"`.

use serde_json::{Value, json};
use switchboard_client::RestClient;
use switchboard_protocol::{Content, ErrorCode};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

async fn make(rest: &RestClient, kind: &str, title: &str, members: &[&str]) -> String {
    let body = json!({"kind": kind, "title": title, "members": members});
    let (status, view) = call(rest, "POST", "/v1/conversations", Some(body)).await;
    assert_eq!(status, 201, "{view}");
    view["conversation_id"].as_str().unwrap().to_owned()
}

async fn patch(rest: &RestClient, conv: &str, body: Value) -> (u16, Value) {
    call(
        rest,
        "PATCH",
        &format!("/v1/conversations/{conv}"),
        Some(body),
    )
    .await
}

fn ids(directory: &Value) -> Vec<String> {
    directory["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["conversation_id"].as_str().unwrap().to_owned())
        .collect()
}

/// A public channel is listed and searched by title and topic, and any
/// user of the tenant joins it; the newcomer reads from their join on
/// (history, backlog, search) unless the channel says otherwise, and
/// nothing from before counts as unread. Private ones take an invite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_channel_is_found_joined_and_read_from_the_join_on() {
    let mut cluster = Cluster::start(ClusterSpec::default()).await;
    cluster.add_search().await;
    let ann = cluster.rest(0, "pc_ann");
    let cat = cluster.rest(0, "pc_cat");
    let rust = make(&ann, "channel", "Rust lovers", &["pc_bob"]).await;
    let quiet = make(&ann, "group", "Quiet corner", &[]).await;
    let mut ann_ws = cluster.ws(0, "pc_ann", "phone").await;
    let (early, _) = send_with(&mut ann_ws, &rust, "early", "the early plans", json!({}))
        .await
        .unwrap();

    // Only owners and admins open it; a direct conversation has no such
    // setting; the topic is bounded.
    let (status, _) = patch(
        &cluster.rest(0, "pc_bob"),
        &rust,
        json!({"visibility": "public"}),
    )
    .await;
    assert_eq!(status, 403);
    let direct = cluster
        .create(
            switchboard_protocol::ConversationKind::Direct,
            "pc_ann",
            &["pc_bob"],
        )
        .await;
    let (status, _) = patch(&ann, &direct, json!({"visibility": "public"})).await;
    assert_eq!(status, 409);
    let (status, _) = patch(&ann, &rust, json!({"topic": "é".repeat(251)})).await;
    assert_eq!(status, 400);
    let (status, view) = patch(
        &ann,
        &rust,
        json!({"visibility": "public", "topic": "é".repeat(250)}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    let (status, view) = patch(&ann, &rust, json!({"topic": "Crabs and borrowing"})).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["visibility"], "public");
    assert_eq!(view["posting"], "everyone");
    assert_eq!(view["history_visible_to_new_members"], false);

    // The directory: public ones only, searched by title or topic
    // ignoring case, with their member count.
    let (status, dir) = call(&cat, "GET", "/v1/channels", None).await;
    assert_eq!(status, 200, "{dir}");
    assert_eq!(ids(&dir), vec![rust.clone()]);
    assert_eq!(dir["channels"][0]["title"], "Rust lovers");
    assert_eq!(dir["channels"][0]["topic"], "Crabs and borrowing");
    assert_eq!(dir["channels"][0]["member_count"], 2);
    assert_eq!(dir["next_cursor"], Value::Null);
    for (q, found) in [("BORROW", true), ("lovers", true), ("quiet", false)] {
        let (_, dir) = call(&cat, "GET", &format!("/v1/channels?q={q}"), None).await;
        assert_eq!(!ids(&dir).is_empty(), found, "{q}");
    }
    let (status, _) = call(
        &cat,
        "GET",
        &format!("/v1/channels?q={}", "x".repeat(101)),
        None,
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = call(&cat, "GET", "/v1/channels?limit=51", None).await;
    assert_eq!(status, 400);
    let (status, _) = call(&cat, "GET", "/v1/channels?limit=50", None).await;
    assert_eq!(status, 200);
    let (status, _) = call(
        &cat,
        "GET",
        &format!("/v1/channels?q={}", "x".repeat(100)),
        None,
    )
    .await;
    assert_eq!(status, 200);

    // A private one is not joined without an invite.
    let (status, body) = call(
        &cat,
        "POST",
        &format!("/v1/conversations/{quiet}/join"),
        None,
    )
    .await;
    assert_eq!(status, 403, "{body}");

    // Joining: the members hear `members_added` with the joiner as actor.
    let (status, joined) = call(
        &cat,
        "POST",
        &format!("/v1/conversations/{rust}/join"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(joined["unread_count"], 0);
    // (Her own changes of the settings came first.)
    let told = loop {
        let m = expect_message(&mut ann_ws).await;
        match &m.content {
            Some(Content::System(e)) if e.event == "conversation_updated" => continue,
            _ => break m,
        }
    };
    let Some(Content::System(event)) = &told.content else {
        panic!("{told:?}")
    };
    assert_eq!(event.event, "members_added");
    assert_eq!(event.actor.as_str(), "pc_cat");
    // Again: nothing changes.
    let (status, _) = call(
        &cat,
        "POST",
        &format!("/v1/conversations/{rust}/join"),
        None,
    )
    .await;
    assert_eq!(status, 200);

    // The newcomer reads from their join on: history, backlog, search.
    let history = full_history(&cluster, &rust, "pc_cat").await;
    assert_eq!(
        history.first().map(|m| m.seq),
        Some(told.seq),
        "{history:?}"
    );
    let mut cat_ws = cluster.ws(0, "pc_cat", "phone").await;
    let (backlog, _, _) = pull(&mut cat_ws, Some(&rust), Some(0), None).await;
    assert!(backlog.iter().all(|m| m.seq >= told.seq), "{backlog:?}");
    // Nor does she reply in the thread of, or react to, what came before.
    let thread = json!({"thread_id": early.to_string()});
    let refused = send_with(&mut cat_ws, &rust, "c-th", "hi", thread).await;
    assert!(
        matches!(refused, Err((ErrorCode::InvalidRequest, _))),
        "{refused:?}"
    );
    let react = json!({"type": "react", "conversation_id": rust, "message_id": early.to_string(),
                       "emoji": "👍", "action": "add"});
    cat_ws.send_text(react.to_string()).await.unwrap();
    let (code, _, _, _) = expect_error(&mut cat_ws).await;
    assert_eq!(code.as_str(), "not_found");
    send_with(&mut ann_ws, &rust, "late", "the late plans", json!({}))
        .await
        .unwrap();
    let found = eventually_search(&cat, "plans", 1).await;
    assert_eq!(found, ["the late plans"]);
    let (_, listed) = call(&cat, "GET", "/v1/conversations", None).await;
    assert_eq!(listed["conversations"][0]["unread_count"], 1);

    // With the history open to newcomers, the next one reads it all.
    let (status, _) = patch(&ann, &rust, json!({"history_visible_to_new_members": true})).await;
    assert_eq!(status, 200);
    let (status, _) = call(
        &cluster.rest(0, "pc_dan"),
        "POST",
        &format!("/v1/conversations/{rust}/join"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let history = full_history(&cluster, &rust, "pc_dan").await;
    assert_eq!(history.first().map(|m| m.seq), Some(1));
    // Cat leaves and comes back: now the history is open to her too.
    let (status, _) = call(
        &cat,
        "DELETE",
        &format!("/v1/conversations/{rust}/members/pc_cat"),
        None,
    )
    .await;
    assert_eq!(status, 204);
    let (status, _) = call(
        &cat,
        "POST",
        &format!("/v1/conversations/{rust}/join"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let history = full_history(&cluster, &rust, "pc_cat").await;
    assert_eq!(history.first().map(|m| m.seq), Some(1));

    // Private again: out of the directory, closed to joins.
    let (status, _) = patch(&ann, &rust, json!({"visibility": "private"})).await;
    assert_eq!(status, 200);
    let (_, dir) = call(&cat, "GET", "/v1/channels", None).await;
    assert!(ids(&dir).is_empty());
    let (status, _) = call(
        &cluster.rest(0, "pc_eve"),
        "POST",
        &format!("/v1/conversations/{rust}/join"),
        None,
    )
    .await;
    assert_eq!(status, 403);
}

/// Searches until `q` finds `n` messages for `rest`'s user; their texts.
async fn eventually_search(rest: &RestClient, q: &str, n: usize) -> Vec<String> {
    let mut texts = Vec::new();
    for _ in 0..50 {
        let (status, body) = call(rest, "GET", &format!("/v1/search?q={q}"), None).await;
        if status == 200 {
            texts = body["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    r["message"]["content"]["text"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned()
                })
                .collect();
            if texts.len() >= n {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    texts
}

/// Invites: owners and admins make, list and revoke them; anyone of the
/// tenant previews and accepts one while it has uses left and has not
/// been revoked; bans and the creator's blocks hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invites_let_users_in_within_their_uses_until_revoked_and_bans_and_blocks_hold() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let ann = cluster.rest(0, "iv_ann");
    let bob = cluster.rest(0, "iv_bob");
    let group = make(&ann, "group", "Book club", &["iv_bob"]).await;
    let invites = format!("/v1/conversations/{group}/invites");

    let (status, _) = call(&bob, "POST", &invites, Some(json!({}))).await;
    assert_eq!(status, 403, "a plain member makes no invite");
    let (status, _) = call(&ann, "POST", &invites, Some(json!({"max_uses": 0}))).await;
    assert_eq!(status, 400);
    let (status, _) = call(
        &ann,
        "POST",
        &invites,
        Some(json!({"expires_at": "2020-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(status, 400);
    let (status, once) = call(&ann, "POST", &invites, Some(json!({"max_uses": 1}))).await;
    assert_eq!(status, 201, "{once}");
    let once = once["code"].as_str().unwrap().to_owned();
    assert_eq!(once.len(), 12);
    let (_, open) = call(&ann, "POST", &invites, Some(json!({}))).await;
    let open = open["code"].as_str().unwrap().to_owned();

    let (status, list) = call(&ann, "GET", &invites, None).await;
    assert_eq!(status, 200);
    assert_eq!(list["invites"].as_array().unwrap().len(), 2);
    let (status, _) = call(&bob, "GET", &invites, None).await;
    assert_eq!(status, 403);

    // Previewed and accepted by a user of the tenant; one use only.
    let fay = cluster.rest(0, "iv_fay");
    let (status, preview) = call(&fay, "GET", &format!("/v1/invites/{once}"), None).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["channel"]["title"], "Book club");
    assert_eq!(preview["channel"]["member_count"], 2);
    let (status, view) = call(&fay, "POST", &format!("/v1/invites/{once}/accept"), None).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["conversation_id"], group.as_str());
    // Accepting again as a member counts no use and changes nothing.
    let (status, _) = call(&fay, "POST", &format!("/v1/invites/{once}/accept"), None).await;
    assert_eq!(status, 200);
    let (status, body) = call(
        &cluster.rest(0, "iv_gil"),
        "POST",
        &format!("/v1/invites/{once}/accept"),
        None,
    )
    .await;
    assert_eq!(status, 403, "used up: {body}");
    let (status, _) = call(
        &cluster.rest(0, "iv_gil"),
        "GET",
        &format!("/v1/invites/{once}"),
        None,
    )
    .await;
    assert_eq!(status, 404);

    // A banned user is not let in by an invite; nor is one the invite's
    // maker blocks.
    let (status, _) = call(
        &ann,
        "POST",
        &format!("/v1/conversations/{group}/bans"),
        Some(json!({"user_id": "iv_eve"})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = call(
        &cluster.rest(0, "iv_eve"),
        "POST",
        &format!("/v1/invites/{open}/accept"),
        None,
    )
    .await;
    assert_eq!(status, 403, "banned: {body}");
    let (status, _) = call(&ann, "PUT", "/v1/blocks/iv_hal", None).await;
    assert_eq!(status, 200);
    let (status, body) = call(
        &cluster.rest(0, "iv_hal"),
        "POST",
        &format!("/v1/invites/{open}/accept"),
        None,
    )
    .await;
    assert_eq!(status, 403, "blocked: {body}");

    // Revoked: it lets nobody in; those who came with it stay.
    let (status, _) = call(&ann, "DELETE", &format!("{invites}/{open}"), None).await;
    assert_eq!(status, 204);
    let (status, _) = call(
        &cluster.rest(0, "iv_ivy"),
        "POST",
        &format!("/v1/invites/{open}/accept"),
        None,
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = call(&ann, "DELETE", &format!("{invites}/{open}"), None).await;
    assert_eq!(status, 404);
    let (status, _) = call(&fay, "GET", &format!("/v1/conversations/{group}"), None).await;
    assert_eq!(status, 200);
    let (status, _) = call(&fay, "GET", "/v1/invites/no.such", None).await;
    assert_eq!(status, 404);

    // At most 100 invites a conversation: the 100th is made, the 101st
    // refused until one is revoked.
    let (_, list) = call(&ann, "GET", &invites, None).await;
    let kept = list["invites"].as_array().unwrap().len();
    let mut last = String::new();
    for _ in kept..100 {
        let (status, made) = call(&ann, "POST", &invites, Some(json!({}))).await;
        assert_eq!(status, 201, "{made}");
        last = made["code"].as_str().unwrap().to_owned();
    }
    let (status, body) = call(&ann, "POST", &invites, Some(json!({}))).await;
    assert_eq!(status, 429, "{body}");
    let (status, _) = call(&ann, "DELETE", &format!("{invites}/{last}"), None).await;
    assert_eq!(status, 204);
    let (status, _) = call(&ann, "POST", &invites, Some(json!({}))).await;
    assert_eq!(status, 201);
}

/// `posting: "admins"`: plain members react and reply in threads but do
/// not post in the main timeline, over the socket or REST; owners do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_an_announcement_channel_only_admins_post_in_the_main_timeline() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let ann = cluster.rest(0, "an_ann");
    let bob = cluster.rest(0, "an_bob");
    let news = make(&ann, "channel", "News", &["an_bob"]).await;
    let (status, view) = patch(&ann, &news, json!({"posting": "admins"})).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["posting"], "admins");

    let mut ann_ws = cluster.ws(0, "an_ann", "phone").await;
    let mut bob_ws = cluster.ws(0, "an_bob", "phone").await;
    let (root, _) = send_with(&mut ann_ws, &news, "n1", "v2 is out", json!({}))
        .await
        .unwrap();
    let refused = send_with(&mut bob_ws, &news, "b1", "me too", json!({})).await;
    assert!(
        matches!(refused, Err((ErrorCode::Forbidden, _))),
        "{refused:?}"
    );
    send_with(
        &mut bob_ws,
        &news,
        "b2",
        "congrats",
        json!({"thread_id": root.to_string()}),
    )
    .await
    .unwrap();
    let path = format!("/v1/conversations/{news}/messages");
    let body = json!({"client_msg_id": "b3", "content": {"kind": "text", "text": "hi"}});
    let (status, answer) = call(&bob, "POST", &path, Some(body)).await;
    assert_eq!(status, 403, "{answer}");
    let body = json!({"client_msg_id": "n2", "content": {"kind": "text", "text": "more news"}});
    let (status, answer) = call(&ann, "POST", &path, Some(body)).await;
    assert!(status == 200 || status == 201, "{answer}");
    // Back to everyone: the member posts again.
    let (status, _) = patch(&ann, &news, json!({"posting": "everyone"})).await;
    assert_eq!(status, 200);
    send_with(&mut bob_ws, &news, "b4", "finally", json!({}))
        .await
        .unwrap();
}
