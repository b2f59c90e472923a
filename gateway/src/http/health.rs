//! `/healthz` (the process answers) and `/readyz` (it can serve: NATS
//! connected, the store answering, not draining), for load balancers and
//! orchestrators.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use super::Shared;

pub(super) async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// Ready when NATS is connected and the store answers.
pub(super) async fn readyz(State(gw): State<Shared>) -> (StatusCode, Json<serde_json::Value>) {
    let nats = gw.client.connection_state() == async_nats::connection::State::Connected;
    let store = matches!(
        tokio::time::timeout(Duration::from_secs(2), gw.store.ping()).await,
        Ok(Ok(()))
    );
    let draining = gw.is_draining();
    let ready = nats && store && !draining;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({
        "status": if draining { "draining" } else if ready { "ready" } else { "unavailable" },
        "nats": if nats { "connected" } else { "disconnected" },
        "store": if store { "ok" } else { "unavailable" },
    });
    (status, Json(body))
}
