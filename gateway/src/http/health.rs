//! `/healthz` (the process answers) and `/readyz` (it can serve: NATS
//! connected, the store answering, not draining), for load balancers and
//! orchestrators.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;

use super::extract::Shared;
use super::openapi::Operation;

/// `GET /healthz`
pub(super) fn healthz_op() -> Operation {
    Operation::get("Liveness")
        .for_anyone()
        .reply::<Health>(200, "The process runs.")
}

/// `{"status": "ok"}`: the process answers.
#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct Health {
    #[schemars(extend("const" = "ok"))]
    status: &'static str,
}

/// Whether the gateway can serve, and if not, why.
#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct Readiness {
    #[schemars(extend("enum" = ["ready", "draining", "unavailable"]))]
    status: &'static str,
    #[schemars(extend("enum" = ["connected", "disconnected"]))]
    nats: &'static str,
    #[schemars(extend("enum" = ["ok", "unavailable"]))]
    store: &'static str,
}

pub(super) async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// `GET /readyz`
pub(super) fn readyz_op() -> Operation {
    Operation::get("Readiness")
        .describe("200 while NATS is connected, the store answers and the gateway is not draining; 503 otherwise.")
        .for_anyone()
        .reply::<Readiness>(200, "Ready.")
        .reply::<Readiness>(503, "Not ready; the body says which dependency is down.")
}

/// Ready when NATS is connected and the store answers.
pub(super) async fn readyz(State(gw): State<Shared>) -> (StatusCode, Json<Readiness>) {
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
    let body = Readiness {
        status: if draining {
            "draining"
        } else if ready {
            "ready"
        } else {
            "unavailable"
        },
        nats: if nats { "connected" } else { "disconnected" },
        store: if store { "ok" } else { "unavailable" },
    };
    (status, Json(body))
}
