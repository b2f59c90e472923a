//! The gateway's Prometheus metrics: their names, what they mean, and the
//! little state the send→ack latency needs. The process installs the
//! exporter and serves `/metrics` (`switchboard/src/telemetry.rs`); with
//! no exporter installed, every call here is a no-op.
//!
//! Labels are bounded: tenants (configured by the operator), frame types
//! and error codes (the protocol's), never users or conversations.

use std::sync::Arc;
use std::time::Duration;

use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use switchboard_protocol::TenantId;

/// Renders the process's metrics in Prometheus' text format (the process
/// owns the exporter; the gateway only serves what it renders).
#[derive(Clone)]
pub struct Exposition(pub Arc<dyn Fn() -> String + Send + Sync>);

impl std::fmt::Debug for Exposition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Exposition")
    }
}

/// The content type of Prometheus' text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub const CONNECTIONS: &str = "switchboard_gateway_connections";
pub const FRAMES_IN: &str = "switchboard_gateway_frames_in_total";
pub const FRAMES_OUT: &str = "switchboard_gateway_frames_out_total";
pub const SENDS: &str = "switchboard_gateway_sends_total";
pub const ACKS: &str = "switchboard_gateway_acks_total";
pub const SCHEDULED: &str = "switchboard_gateway_scheduled_total";
pub const ERRORS: &str = "switchboard_gateway_errors_total";
pub const SEND_ACK_SECONDS: &str = "switchboard_gateway_send_ack_seconds";
pub const PUBLISH_SECONDS: &str = "switchboard_jetstream_publish_seconds";
pub const PENDING_ACKS: &str = "switchboard_jetstream_pending_acks";
pub const UPLOADS: &str = "switchboard_blob_uploads_total";
pub const UPLOAD_BYTES: &str = "switchboard_blob_upload_bytes_total";
pub const BLOBS_COLLECTED: &str = "switchboard_blob_collected_total";
pub const HTTP_REQUESTS: &str = "switchboard_gateway_http_requests_total";
pub const HTTP_SECONDS: &str = "switchboard_gateway_http_request_seconds";
pub const JWKS_FETCHES: &str = "switchboard_gateway_jwks_fetches_total";

/// Registers the descriptions (`# HELP` lines).
pub fn describe() {
    describe_gauge!(CONNECTIONS, "Open WebSocket connections, by tenant.");
    describe_counter!(
        FRAMES_IN,
        "Client frames taken, by type (`invalid` when it does not parse)."
    );
    describe_counter!(FRAMES_OUT, "Server frames written to clients, by type.");
    describe_counter!(SENDS, "Sends accepted and handed to the backbone.");
    describe_counter!(ACKS, "Acks of stored sends handed to their sending device.");
    describe_counter!(
        SCHEDULED,
        "Sends with send_at kept on SB_SCHEDULED until their time (v1.2)."
    );
    describe_counter!(ERRORS, "Error frames to clients, by code.");
    describe_histogram!(
        SEND_ACK_SECONDS,
        Unit::Seconds,
        "From a send frame's arrival to its ack leaving for the client."
    );
    describe_histogram!(
        PUBLISH_SECONDS,
        Unit::Seconds,
        "From an ingest publish to JetStream's ack of it (one or several sends)."
    );
    describe_gauge!(
        PENDING_ACKS,
        "Sends queued for their partition or published and waiting for JetStream's ack."
    );
    describe_counter!(UPLOADS, "Media uploads granted.");
    describe_counter!(
        UPLOAD_BYTES,
        Unit::Bytes,
        "Bytes of media uploads granted (the declared size an upload must match)."
    );
    describe_counter!(
        BLOBS_COLLECTED,
        "Uploads no message referred to, removed by the collector."
    );
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by route template, method and status."
    );
    describe_histogram!(
        HTTP_SECONDS,
        Unit::Seconds,
        "From an HTTP request's arrival to its response's head, by route template."
    );
    describe_counter!(
        JWKS_FETCHES,
        "Fetches of tenants' JSON Web Key Sets, by tenant and outcome (`changed`, `unchanged`, `failed`)."
    );
}

pub(crate) fn jwks_fetched(tenant: &TenantId, outcome: &'static str) {
    counter!(JWKS_FETCHES, "tenant" => tenant.as_str().to_owned(), "outcome" => outcome)
        .increment(1);
}

pub(crate) fn http_request(route: String, method: &'static str, status: u16, took: Duration) {
    histogram!(HTTP_SECONDS, "route" => route.clone()).record(took.as_secs_f64());
    counter!(HTTP_REQUESTS, "route" => route, "method" => method, "status" => status.to_string())
        .increment(1);
}

pub(crate) fn upload_granted(bytes: u64) {
    counter!(UPLOADS).increment(1);
    counter!(UPLOAD_BYTES).increment(bytes);
}

pub(crate) fn blobs_collected(n: usize) {
    counter!(BLOBS_COLLECTED).increment(n as u64);
}

/// Counts an open connection of its tenant for as long as it lives.
pub(crate) struct OpenConnection(TenantId);

impl OpenConnection {
    pub fn new(tenant: &TenantId) -> Self {
        gauge!(CONNECTIONS, "tenant" => tenant.as_str().to_owned()).increment(1.0);
        Self(tenant.clone())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        gauge!(CONNECTIONS, "tenant" => self.0.as_str().to_owned()).decrement(1.0);
    }
}

pub(crate) fn frame_in(kind: &'static str) {
    counter!(FRAMES_IN, "type" => kind).increment(1);
}

/// Counts a frame written to a client, and an error frame by its code.
pub(crate) fn frame_out(text: &str) {
    let kind = frame_type(text);
    counter!(FRAMES_OUT, "type" => kind).increment(1);
    if kind == "error" {
        counter!(ERRORS, "code" => error_code(text).to_owned()).increment(1);
    }
}

/// A server frame's type, from its start: every server frame is an object
/// whose first member is `type` (`other` if not, or if it is a type this
/// list lacks).
fn frame_type(text: &str) -> &'static str {
    let kind = text
        .strip_prefix(r#"{"type":""#)
        .and_then(|rest| rest.split_once('"'))
        .map(|(kind, _)| kind);
    kind.and_then(|kind| {
        switchboard_protocol::frames::SERVER_FRAME_TYPES
            .iter()
            .copied()
            .find(|t| *t == kind)
    })
    .unwrap_or("other")
}

/// An error frame's code: its second member (`other` if not).
fn error_code(text: &str) -> &str {
    text.strip_prefix(r#"{"type":"error","code":""#)
        .and_then(|rest| rest.split_once('"'))
        .map(|(code, _)| code)
        .filter(|code| {
            code.len() <= 32 && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        })
        .unwrap_or("other")
}

pub(crate) fn send_accepted() {
    counter!(SENDS).increment(1);
}

pub(crate) fn scheduled() {
    counter!(SCHEDULED).increment(1);
}

pub(crate) fn published(took: Duration) {
    histogram!(PUBLISH_SECONDS).record(took.as_secs_f64());
}

pub(crate) fn pending_acks(change: f64) {
    gauge!(PENDING_ACKS).increment(change);
}

/// An ack left for its sending device; `waited`, since its send arrived,
/// when the connection still followed it (`answers.rs`).
pub(crate) fn acked(waited: Option<Duration>) {
    counter!(ACKS).increment(1);
    if let Some(waited) = waited {
        histogram!(SEND_ACK_SECONDS).record(waited.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_protocol::ServerFrame;

    #[test]
    fn a_frame_is_counted_by_its_type() {
        assert_eq!(frame_type(r#"{"type":"ack","client_msg_id":"m"}"#), "ack");
        assert_eq!(frame_type(&ServerFrame::Pong {}.to_json()), "pong");
        assert_eq!(frame_type("not json"), "other");
        assert_eq!(frame_type(r#"{"type":"Evil label\"}"#), "other");
        let error =
            ServerFrame::error(switchboard_protocol::ErrorCode::RateLimited, "slow down").to_json();
        assert_eq!(frame_type(&error), "error");
        assert_eq!(error_code(&error), "rate_limited");
    }
}
