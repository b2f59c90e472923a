//! Issue 16, item 4: the frames' JSON Schema and the AsyncAPI document.
//! Every frame any test receives is checked against the schema
//! (`switchboard_tests::frames`); these tests show the check refuses what
//! it should, and that gateways serve the AsyncAPI document.

use std::time::Duration;

use switchboard_protocol::{ConversationKind, ServerFrame};
use switchboard_tests::frames::{frames_checked, server_frame_errors};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

#[test]
fn the_schema_refuses_frames_the_protocol_does_not_have() {
    let ok = ServerFrame::error(switchboard_protocol::ErrorCode::Forbidden, "no").to_json();
    assert_eq!(server_frame_errors(&ok), Ok(()));
    for bad in [
        "not json",
        r#"{"type":"nope"}"#,
        // An ack without its seq.
        r#"{"type":"ack","client_msg_id":"m","conversation_id":"c","message_id":"1","status":"sent"}"#,
        // A message id as a number: JavaScript would lose digits.
        r#"{"type":"ack","client_msg_id":"m","conversation_id":"c","message_id":1,"seq":1,"status":"sent"}"#,
        // An id outside the alphabet.
        r#"{"type":"receipt","conversation_id":"c c","user_id":"u","kind":"read","seq":1}"#,
        r#"{"type":"error","code":"no_such_code","message":"x"}"#,
        r#"{"type":"message","message":{"message_id":"1","conversation_id":"c","seq":1,"sender_id":"a","sender_device":"d","client_msg_id":"m","content":{"kind":"video","url":"x"},"created_at":"2026-01-01T00:00:00.000Z","edited_at":null,"deleted_at":null}}"#,
    ] {
        assert!(server_frame_errors(bad).is_err(), "accepted: {bad}");
    }
}

#[tokio::test]
async fn gateways_serve_the_asyncapi_document_and_frames_match_it() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    cluster.wait_for_writers(8, Duration::from_secs(20)).await;
    let rest = cluster.rest(0, "alice");
    let doc: serde_json::Value = reqwest::get(format!("{}/v1/asyncapi.json", rest.base()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["asyncapi"], "3.0.0");
    assert_eq!(doc["channels"]["ws"]["address"], "/v1/ws");
    let messages = doc["channels"]["ws"]["messages"].as_object().unwrap();
    for name in [
        "client_send_message",
        "server_ack",
        "server_message",
        "server_error",
    ] {
        assert!(messages.contains_key(name), "{name}");
    }
    // What this gateway serves is the checked-in document.
    assert_eq!(
        doc,
        serde_json::from_str::<serde_json::Value>(switchboard_protocol::ASYNCAPI_JSON).unwrap()
    );

    // A short chat: every frame received passes the schema check.
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    let mut bob = cluster.ws(0, "bob", "b").await;
    let before = frames_checked();
    alice.send(&send_frame(&conv, "m1", "hi")).await.unwrap();
    let (id, _) = expect_ack(&mut alice, "m1").await;
    expect_message(&mut bob).await;
    alice.send(&edit_frame(&conv, id, "hi!")).await.unwrap();
    expect_update(&mut bob).await;
    alice.send_text("{oops").await.unwrap();
    expect_error(&mut alice).await;
    assert!(frames_checked() >= before + 4);
}
