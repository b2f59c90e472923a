//! `GET /v1/ws`: the WebSocket upgrade, where a connection is admitted
//! (token, drain, connection quotas) and its session prepared before the
//! upgrade is answered; `crate::connection` runs it from there.

use axum::extract::rejection::QueryRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use switchboard_protocol::ErrorCode;

use super::Shared;
use super::extract::bearer;
use super::openapi::Operation;
use crate::auth::AuthError;
use crate::connection;
use crate::error::ApiError;

/// Browsers cannot give a WebSocket headers: they send the token as
/// `?token=`.
#[derive(Deserialize, schemars::JsonSchema)]
pub(super) struct TokenQuery {
    /// The session's JWT, when not in an `Authorization` header.
    token: Option<String>,
}

/// `GET /v1/ws`
pub(super) fn upgrade_op() -> Operation {
    Operation::get("Open the WebSocket data plane")
        .describe("Upgrade to a WebSocket; the token may be given as ?token=<JWT> instead of the header. One JSON object per text frame: /v1/asyncapi.json describes every frame, docs/protocol.md the session.")
        .query_fields::<TokenQuery>()
        .reply_empty(101, "Switching protocols.")
}

pub(super) async fn upgrade(
    State(gw): State<Shared>,
    headers: HeaderMap,
    query: Result<Query<TokenQuery>, QueryRejection>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let from_query = query.ok().and_then(|Query(q)| q.token);
    let token = bearer(&headers)
        .map(str::to_owned)
        .or(from_query)
        .ok_or(AuthError::Missing)?;
    let identity = gw.tenants.verify(&token)?;
    if gw.is_draining() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this gateway is shutting down; connect to another",
        ));
    }
    let admission = gw
        .quotas
        .admit(&identity, gw.config.limits.max_connections_per_user)?;
    // Routed here before the upgrade is answered: see `connection::Session`.
    let session = connection::prepare(&gw, &identity).await.map_err(|e| {
        tracing::warn!(error = %e, "connection refused: backbone or store unavailable");
        ApiError::new(ErrorCode::Unavailable, e.to_string())
    })?;
    let limits = &gw.config.limits;
    // Every connection holds its read buffer for as long as it lives, and
    // most of them are idle: 1 KiB takes a typical frame in one read (a
    // larger one takes a read per KiB) and costs 3 KiB less per
    // connection than 4 (BENCHMARKS.md, issue 14, step 3).
    Ok(upgrade
        .read_buffer_size(1024)
        .write_buffer_size(8 * 1024)
        .max_message_size(limits.hard_max_frame_bytes)
        .max_frame_size(limits.hard_max_frame_bytes)
        .on_upgrade(move |socket| connection::run(identity, token, socket, session, admission)))
}
