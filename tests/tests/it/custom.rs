//! Custom messages (v1.3): content kind `custom` stored and delivered as
//! sent, bounded, moderated through its `fallback_text` by a plugin of
//! an earlier package, previewed and searched by it.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_client::RestClient;
use switchboard_protocol::{Content, ConversationKind, ErrorCode, ServerFrame};
use switchboard_tests::{Cluster, ClusterSpec, TENANT, eventually, plugin};

use crate::support::*;

fn order(fallback: &str) -> Value {
    json!({
        "kind": "custom",
        "type": "shop.order/v1",
        "data": {"order": 7, "items": [{"sku": "tea", "qty": 2}], "paid": true},
        "fallback_text": fallback,
    })
}

async fn send_custom(
    ws: &mut switchboard_client::WsClient,
    conv: &str,
    id: &str,
    content: Value,
) -> Result<(u64, Option<Content>), (ErrorCode, String)> {
    let frame = json!({
        "type": "send_message", "client_msg_id": id, "conversation_id": conv, "content": content,
    });
    let ack = send_json(ws, frame).await?;
    Ok((ack.seq.unwrap(), ack.content))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_message_arrives_as_sent_bounded_moderated_previewed_and_searched() {
    let mut cluster = Cluster::start(ClusterSpec::default()).await;
    cluster.add_search().await;
    let conv = cluster
        .create(ConversationKind::Group, "cu_ann", &["cu_bob"])
        .await;
    let mut ann = cluster.ws(0, "cu_ann", "phone").await;
    let mut bob = cluster.ws(0, "cu_bob", "phone").await;

    // Stored and delivered as it is: the other member's copy is the JSON
    // that was sent.
    let sent = order("Order 7: two teas");
    let (seq, shown) = send_custom(&mut ann, &conv, "o1", sent.clone())
        .await
        .unwrap();
    assert_eq!(shown, None, "stored as sent: the ack carries no content");
    let got = expect_message(&mut bob).await;
    assert_eq!(got.seq, seq);
    assert_eq!(serde_json::to_value(&got.content).unwrap(), sent);

    // Bounds: the type's alphabet and length, the fallback's length
    // (16 KiB, the text limit), data that is not an object.
    for (id, content, code) in [
        (
            "b1",
            json!({"kind": "custom", "type": "a b"}),
            ErrorCode::InvalidFrame,
        ),
        (
            "b2",
            json!({"kind": "custom", "type": "t".repeat(65)}),
            ErrorCode::InvalidFrame,
        ),
        (
            "b3",
            json!({"kind": "custom", "type": "t", "data": [1]}),
            ErrorCode::InvalidFrame,
        ),
        ("b4", order(&"f".repeat(16 * 1024 + 1)), ErrorCode::TooLarge),
    ] {
        let (got, why) = send_custom(&mut ann, &conv, id, content).await.unwrap_err();
        assert_eq!(got, code, "{id}: {why}");
    }
    let at_the_limit = send_custom(&mut ann, &conv, "b5", order(&"f".repeat(16 * 1024))).await;
    assert!(at_the_limit.is_ok(), "{at_the_limit:?}");
    let typed = send_custom(
        &mut ann,
        &conv,
        "b6",
        json!({"kind": "custom", "type": "t".repeat(64)}),
    )
    .await;
    assert!(typed.is_ok(), "{typed:?}");

    // The conversation list previews its fallback text (the last message
    // now is b6, which has none: `[type]`).
    let list = cluster.rest(0, "cu_bob").conversations().await.unwrap();
    assert_eq!(
        list.conversations[0].preview,
        Some(format!("[{}]", "t".repeat(64)))
    );

    // Found by its fallback text.
    let bob_rest = cluster.rest(0, "cu_bob");
    let found = eventually("the order in search", Duration::from_secs(20), || async {
        let (status, body) = call(&bob_rest, "GET", "/v1/search?q=teas", None).await;
        (status == 200 && body["results"].as_array().is_some_and(|r| r.len() == 1)).then_some(body)
    })
    .await;
    assert_eq!(found["results"][0]["message"]["content"], sent);

    // A moderator of an earlier package sees the fallback text: its
    // rewrite masks the text, the type and data stay.
    let admin: RestClient = cluster.rest_as(0, TENANT, "root", true);
    let v = admin
        .deploy_plugin("moderation", plugin("word-list"), &[], None)
        .await
        .unwrap();
    let revision = v["revision"].as_u64();
    eventually("the moderator runs", Duration::from_secs(10), || async {
        let listing = admin.plugin_versions("moderation").await.unwrap();
        (listing["running_here"].as_u64() == revision).then_some(())
    })
    .await;
    let (_, shown) = send_custom(&mut ann, &conv, "m1", order("darn, out of tea"))
        .await
        .unwrap();
    let masked = order("****, out of tea");
    assert_eq!(serde_json::to_value(&shown).unwrap(), masked);
    let stored = expect(&mut bob, "the moderated order", |f| match f {
        ServerFrame::Message { message } if message.client_msg_id.as_str() == "m1" => Some(message),
        _ => None,
    })
    .await;
    assert_eq!(serde_json::to_value(&stored.content).unwrap(), masked);
}

/// `custom` fields on a message (v1.3): sent with it over a socket or
/// REST, bounded at 4096 bytes, carried in events and history, changed
/// only by an edit (absent keeps them, `{}` removes them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_messages_custom_fields_travel_with_it_and_change_only_by_an_edit() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "cf_ann", &["cf_bob"])
        .await;
    let mut ann = cluster.ws(0, "cf_ann", "phone").await;
    let mut bob = cluster.ws(0, "cf_bob", "phone").await;
    let fields = json!({"priority": "high", "ticket": 42});

    let (id, _) = send_with(
        &mut ann,
        &conv,
        "c1",
        "about the ticket",
        json!({"custom": fields}),
    )
    .await
    .unwrap();
    let got = expect_message(&mut bob).await;
    assert_eq!(serde_json::to_value(&got.custom).unwrap(), fields);

    // 4096 bytes of JSON pass, 4097 do not.
    let sized = |n: usize| json!({"custom": {"k": "x".repeat(n - 8)}});
    assert!(
        send_with(&mut ann, &conv, "c2", "at", sized(4096))
            .await
            .is_ok()
    );
    let (code, _) = send_with(&mut ann, &conv, "c3", "past", sized(4097))
        .await
        .unwrap_err();
    assert_eq!(code, ErrorCode::TooLarge);
    // Not an object: a bad frame.
    let (code, _) = send_with(&mut ann, &conv, "c4", "list", json!({"custom": [1]}))
        .await
        .unwrap_err();
    assert_eq!(code, ErrorCode::InvalidFrame);
    // Over REST too.
    let (status, body) = call(
        &cluster.rest(0, "cf_ann"),
        "POST",
        &format!("/v1/conversations/{conv}/messages"),
        Some(json!({"client_msg_id": "r1", "content": {"kind": "text", "text": "rest"}, "custom": {"via": "rest"}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // An edit without `custom` keeps them; with an object replaces them;
    // `{}` removes them.
    let edit = |custom: Option<Value>, text: &str| {
        let mut frame = json!({
            "type": "edit_message", "conversation_id": conv, "message_id": id.to_string(),
            "content": {"kind": "text", "text": text},
        });
        if let Some(c) = custom {
            frame["custom"] = c;
        }
        frame.to_string()
    };
    ann.send_text(edit(None, "about the ticket (edited)"))
        .await
        .unwrap();
    let m = expect_update(&mut bob).await;
    assert_eq!(serde_json::to_value(&m.custom).unwrap(), fields);
    ann.send_text(edit(
        Some(json!({"priority": "low"})),
        "about the ticket (edited)",
    ))
    .await
    .unwrap();
    let m = expect_update(&mut bob).await;
    assert_eq!(
        serde_json::to_value(&m.custom).unwrap(),
        json!({"priority": "low"})
    );
    ann.send_text(edit(Some(json!({})), "about the ticket (edited)"))
        .await
        .unwrap();
    let m = expect_update(&mut bob).await;
    assert_eq!(m.custom, None);

    // History (what a device away reads) carries them as they are now.
    let history = full_history(&cluster, &conv, "cf_bob").await;
    let rest = history
        .iter()
        .find(|m| m.client_msg_id.as_str() == "r1")
        .unwrap();
    assert_eq!(
        serde_json::to_value(&rest.custom).unwrap(),
        json!({"via": "rest"})
    );
    let edited = history.iter().find(|m| m.message_id == id).unwrap();
    assert_eq!(edited.custom, None);
}

/// A conversation's `custom` fields (v1.3): owners and admins merge them
/// key by key with `PATCH`, bounded at 4096 bytes; every member learns a
/// change as `conversation_updated` (live, and in history for a device
/// away); the list and the conversation carry them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversations_custom_fields_are_merged_by_its_admins_and_reach_every_member() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "cc_ann", &["cc_bob"])
        .await;
    let (ann, bob) = (cluster.rest(0, "cc_ann"), cluster.rest(0, "cc_bob"));
    let mut bob_ws = cluster.ws(0, "cc_bob", "phone").await;
    let patch = |rest: &RestClient, body: Value| {
        let (rest, path) = (rest.clone(), format!("/v1/conversations/{conv}"));
        async move { call(&rest, "PATCH", &path, Some(body)).await }
    };

    let (status, body) = patch(&ann, json!({"custom": {"topic": "release", "color": 3}})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["custom"], json!({"topic": "release", "color": 3}));
    let told = expect_message(&mut bob_ws).await;
    let Some(Content::System(event)) = &told.content else {
        panic!("{told:?}")
    };
    assert_eq!(event.event, "conversation_updated");
    assert_eq!(
        serde_json::to_value(&event.custom).unwrap(),
        json!({"topic": "release", "color": 3})
    );

    // A plain member may not; a key given as null goes, the others stay.
    let (status, _) = patch(&bob, json!({"custom": {"topic": "mine"}})).await;
    assert_eq!(status, 403);
    let (status, body) = patch(&ann, json!({"custom": {"color": null}})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["custom"], json!({"topic": "release"}));
    // 4096 bytes as a whole after the merge, not one more.
    let room = 4096 - r#"{"pad":"","topic":"release"}"#.len();
    let (status, body) = patch(&ann, json!({"custom": {"pad": "x".repeat(room)}})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = patch(&ann, json!({"custom": {"pad": "x".repeat(room + 1)}})).await;
    assert_eq!(status, 400, "{body}");
    let (_, body) = patch(&ann, json!({"custom": {"pad": null}})).await;
    assert_eq!(body["custom"], json!({"topic": "release"}));
    // The same again changes nothing and tells nobody.
    let last = body["last_seq"].as_u64().unwrap();
    let (_, body) = patch(&ann, json!({"custom": {"topic": "release"}})).await;
    assert_eq!(body["last_seq"].as_u64().unwrap(), last);

    // The list and the conversation carry them; a device away reads each
    // change in history.
    let (_, listed) = call(&bob, "GET", "/v1/conversations", None).await;
    assert_eq!(
        listed["conversations"][0]["custom"],
        json!({"topic": "release"})
    );
    let (_, one) = call(&bob, "GET", &format!("/v1/conversations/{conv}"), None).await;
    assert_eq!(one["custom"], json!({"topic": "release"}));
    let history = full_history(&cluster, &conv, "cc_bob").await;
    let changes: Vec<Value> = history
        .iter()
        .filter_map(|m| match &m.content {
            Some(Content::System(e)) if e.event == "conversation_updated" => {
                Some(serde_json::to_value(&e.custom).unwrap())
            }
            _ => None,
        })
        .collect();
    // Set, a key removed, padded, the pad removed: four changes, in order.
    assert_eq!(changes.len(), 4);
    assert_eq!(changes[0], json!({"topic": "release", "color": 3}));
    assert_eq!(changes[3], json!({"topic": "release"}));
}
