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
        // A scheduled ack without its schedule, and a status of neither.
        r#"{"type":"ack","client_msg_id":"m","conversation_id":"c","status":"scheduled"}"#,
        r#"{"type":"ack","client_msg_id":"m","conversation_id":"c","message_id":"1","seq":1,"status":"queued"}"#,
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

/// The schema allows exactly the message ids the server parses, so that a
/// client (or a contract test) never sends a schema-valid id it refuses.
#[test]
fn message_ids_the_schema_allows_are_the_ones_that_parse() {
    use std::str::FromStr;
    let schema = serde_json::json!({
        "type": "string",
        "pattern": switchboard_protocol::schema::MESSAGE_ID_PATTERN,
    });
    let validator = jsonschema::validator_for(&schema).unwrap();
    let max = u64::MAX;
    let mut samples: Vec<String> = vec![
        "0".into(),
        "00000000000000000001".into(),
        "99999999999999999999".into(),
        "19038871077759061582".into(),
        "100000000000000000000".into(),
        "".into(),
        "-1".into(),
        "1 2".into(),
    ];
    // Around the top, and each power of ten.
    for d in 0..=20u32 {
        let below = max - 10u64.pow(d.min(19)) + 1;
        samples.push(below.to_string());
        samples.push(format!("{}", u128::from(max) + 10u128.pow(d)));
        samples.push(10u128.pow(d).to_string());
        samples.push((10u128.pow(d) - 1).to_string());
    }
    // Every value one digit away from the largest.
    let digits = max.to_string();
    for i in 0..digits.len() {
        for d in b'0'..=b'9' {
            let mut s = digits.clone().into_bytes();
            s[i] = d;
            samples.push(String::from_utf8(s).unwrap());
        }
    }
    for s in samples {
        let parses = switchboard_protocol::MessageId::from_str(&s).is_ok();
        let allowed = validator.is_valid(&serde_json::Value::String(s.clone()));
        assert_eq!(
            allowed, parses,
            "{s:?}: schema allows {allowed}, parses {parses}"
        );
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

/// docs/protocol.md against the schema: every frame type has its row in
/// its side's table, naming each of its fields, and at least one example;
/// every example marked as a frame validates.
#[test]
fn the_protocol_page_matches_the_schema() {
    let page =
        std::fs::read_to_string(switchboard_tests::workspace_root().join("docs/protocol.md"))
            .unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(switchboard_protocol::FRAMES_SCHEMA_JSON).unwrap();
    let client_table = section(&page, "### Client frames", "### Server frames");
    let server_table = section(&page, "### Server frames", "### The message object");
    let examples = marked_examples(&page);
    for (side, table, name) in [
        ("client", client_table, "ClientFrame"),
        ("server", server_table, "ServerFrame"),
    ] {
        for variant in schema["$defs"][name]["oneOf"].as_array().unwrap() {
            let kind = variant["properties"]["type"]["const"].as_str().unwrap();
            let row = table
                .lines()
                .find(|l| l.starts_with(&format!("| `{kind}` |")))
                .unwrap_or_else(|| panic!("no row for the {side} frame {kind}"));
            for field in variant["properties"].as_object().unwrap().keys() {
                if field != "type" {
                    assert!(
                        row.contains(&format!("`{field}`")),
                        "the {side} frame {kind}'s row does not name `{field}`: {row}"
                    );
                }
            }
            assert!(
                examples
                    .iter()
                    .any(|(s, frame)| *s == side && frame["type"] == kind),
                "no example of the {side} frame {kind}"
            );
        }
    }
    let client = jsonschema::validator_for(&serde_json::json!({
        "$schema": schema["$schema"],
        "$ref": "#/$defs/ClientFrame",
        "$defs": schema["$defs"],
    }))
    .unwrap();
    for (side, frame) in &examples {
        let errors: Vec<String> = if *side == "client" {
            client.iter_errors(frame).map(|e| e.to_string()).collect()
        } else {
            server_frame_errors(&frame.to_string())
                .err()
                .into_iter()
                .collect()
        };
        assert!(errors.is_empty(), "{side} example {frame}: {errors:?}");
    }
    assert!(examples.len() >= 20, "{} examples", examples.len());
}

/// The text between two headings.
fn section<'a>(page: &'a str, from: &str, to: &str) -> &'a str {
    let start = page.find(from).unwrap_or_else(|| panic!("no {from}"));
    let end = page[start..].find(to).unwrap_or_else(|| panic!("no {to}")) + start;
    &page[start..end]
}

/// The JSON blocks right after a `<!-- client frame -->` or
/// `<!-- server frame -->` marker, with their side.
fn marked_examples(page: &str) -> Vec<(&'static str, serde_json::Value)> {
    let mut out = Vec::new();
    for (marker, side) in [
        ("<!-- client frame -->", "client"),
        ("<!-- server frame -->", "server"),
    ] {
        for (at, _) in page.match_indices(marker) {
            let rest = &page[at + marker.len()..];
            let block = rest
                .trim_start()
                .strip_prefix("```json")
                .and_then(|b| b.split("```").next())
                .unwrap_or_else(|| panic!("a {side} frame marker without a json block"));
            let frame = serde_json::from_str(block.trim())
                .unwrap_or_else(|e| panic!("a {side} example is not JSON ({e}): {block}"));
            out.push((side, frame));
        }
    }
    out
}
