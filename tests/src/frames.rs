//! Every frame a server sends in the integration tests is checked against
//! the frames' JSON Schema (`protocol/schema/frames.schema.json`, made
//! from the protocol types): the tests connect with [`connect_ws`], whose
//! clients check each text frame they receive before handing it on. A
//! frame built by hand on the server (the `message` frames fanned out as
//! they are, the `ack` made from them) cannot drift from the schema
//! without failing the test that received it.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use switchboard_client::ws::{FrameCheck, WsClient, WsError};

/// The `ServerFrame` schema, with every definition it refers to.
static SERVER_FRAME: LazyLock<jsonschema::Validator> = LazyLock::new(|| {
    let document: serde_json::Value =
        serde_json::from_str(switchboard_protocol::FRAMES_SCHEMA_JSON).unwrap();
    let schema = serde_json::json!({
        "$schema": document["$schema"],
        "$ref": "#/$defs/ServerFrame",
        "$defs": document["$defs"],
    });
    jsonschema::validator_for(&schema).unwrap()
});

static CHECKED: AtomicUsize = AtomicUsize::new(0);

/// Panics, naming what is wrong, unless `text` is a valid server frame.
pub fn check_server_frame(text: &str) {
    if let Err(why) = server_frame_errors(text) {
        panic!("the server sent a frame its schema refuses: {why}\nframe: {text}");
    }
    CHECKED.fetch_add(1, Ordering::Relaxed);
}

/// Why `text` is not a valid server frame, if it is not.
pub fn server_frame_errors(text: &str) -> Result<(), String> {
    let frame: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let errors: Vec<String> = SERVER_FRAME
        .iter_errors(&frame)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// How many frames this test process has checked.
pub fn frames_checked() -> usize {
    CHECKED.load(Ordering::Relaxed)
}

/// Connects like [`WsClient::connect`], with every received frame
/// checked against the schema.
pub async fn connect_ws(base: &str, token: &str) -> Result<WsClient, WsError> {
    let check: FrameCheck = std::sync::Arc::new(check_server_frame);
    Ok(WsClient::connect(base, token)
        .await?
        .with_frame_check(check))
}
