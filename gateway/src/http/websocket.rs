//! `GET /v1/ws`: the WebSocket upgrade, where a connection is admitted
//! (token, drain, the user's connect rate, connection quotas) and its
//! session prepared before the upgrade is answered; `crate::connection`
//! runs it from there.

use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use switchboard_protocol::ErrorCode;

use super::extract::Shared;
use super::extract::{
    WS_PROTOCOL, WS_TOKEN_PROTOCOL_PREFIX, offered_protocols, protocol_token, request_token,
};
use super::openapi::Operation;
use crate::auth::AuthError;
use crate::connection;
use crate::error::ApiError;

/// Browsers cannot give a WebSocket headers: they offer the token as
/// the subprotocol `switchboard.token.<JWT>` beside `switchboard.v1`, or,
/// as older clients do, send it as `?token=`, which proxies log (both
/// read by `extract::request_token`; this is the query's document).
#[derive(schemars::JsonSchema)]
pub(super) struct TokenQuery {
    /// The session's JWT, when not in an `Authorization` header.
    #[expect(dead_code, reason = "only documented: `request_token` reads it")]
    token: Option<String>,
}

/// `GET /v1/ws`
pub(super) fn upgrade_op() -> Operation {
    Operation::get("Open the WebSocket data plane")
        .describe("Upgrade to a WebSocket. The token goes in the Authorization header; a browser, which cannot set headers, offers the subprotocols `switchboard.v1` and `switchboard.token.<JWT>` (Sec-WebSocket-Protocol; the answer selects `switchboard.v1`), or gives ?token=<JWT>, which proxies and access logs may keep. One JSON object per text frame: /v1/asyncapi.json describes every frame, docs/protocol.md the session.")
        .query_fields::<TokenQuery>()
        .reply_empty(101, "Switching protocols.")
}

pub(super) async fn upgrade(
    State(gw): State<Shared>,
    headers: HeaderMap,
    uri: Uri,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let token = request_token(&headers, &uri).ok_or(AuthError::Missing)?;
    // A token offered as a subprotocol is never echoed: the answer names
    // `switchboard.v1`, which such a client must offer too (a browser
    // fails a connection whose answer selects none of its offers).
    if protocol_token(&headers).is_some() && !offered_protocols(&headers).any(|p| p == WS_PROTOCOL)
    {
        return Err(ApiError::invalid(format!(
            "offer the subprotocol {WS_PROTOCOL} beside {WS_TOKEN_PROTOCOL_PREFIX}<JWT>"
        )));
    }
    let identity = gw.tenants.verify_fresh(&token).await?;
    if gw.is_draining() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this gateway is shutting down; connect to another",
        ));
    }
    // Before anything is written: each connect writes the session registry.
    gw.rates.connect(&identity)?;
    let limits = &gw.config.limits;
    let admission = gw
        .quotas
        .admit(&identity, gw.config.limits.max_connections_per_user)?;
    // Routed here before the upgrade is answered: see `connection::Session`.
    let session = connection::prepare(&gw, &identity).await.map_err(|e| {
        tracing::warn!(error = %e, "connection refused: backbone or store unavailable");
        ApiError::new(ErrorCode::Unavailable, e.to_string())
    })?;
    // Every connection holds its read buffer for as long as it lives, and
    // most of them are idle: 1 KiB takes a typical frame in one read (a
    // larger one takes a read per KiB) and costs 3 KiB less per
    // connection than 4 (BENCHMARKS.md, issue 14, step 3).
    Ok(upgrade
        .protocols([WS_PROTOCOL])
        .read_buffer_size(1024)
        .write_buffer_size(8 * 1024)
        .max_message_size(limits.hard_max_frame_bytes)
        .max_frame_size(limits.hard_max_frame_bytes)
        .on_upgrade(move |socket| connection::run(identity, token, socket, session, admission)))
}
