//! `POST /v1/dev/token`, in dev mode only: a 24-hour token for the demo
//! tenant, signed with its HS256 secret.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use switchboard_protocol::{DeviceId, ErrorCode, UserId};

use super::extract::JsonBody;
use super::extract::{Shared, no_such_endpoint};
use super::openapi::Operation;
use crate::error::ApiError;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DevTokenRequest {
    #[schemars(with = "UserId")]
    user: String,
    /// Absent: the default device; `null` is refused like any non-string.
    #[serde(default, deserialize_with = "switchboard_protocol::fields::present")]
    #[schemars(with = "DeviceId")]
    device: Option<String>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct DevToken {
    /// An HS256 JWT, valid for 24 hours.
    token: String,
    tenant: String,
}

/// `POST /v1/dev/token`
pub(super) fn issue_op() -> Operation {
    Operation::post("Mint a token (switchboard dev only)")
        .describe("Only served by `switchboard dev`, which listens on loopback: a 24-hour token for the demo tenant, for the browser client.")
        .for_anyone()
        .json_body::<DevTokenRequest>()
        .reply::<DevToken>(200, "The token.")
}

/// Dev mode only: a 24-hour token for the demo tenant.
pub(super) async fn issue(
    State(gw): State<Shared>,
    JsonBody(body): JsonBody<DevTokenRequest>,
) -> Result<Json<DevToken>, ApiError> {
    let Some(dev) = &gw.config.dev_tokens else {
        return Err(no_such_endpoint());
    };
    let user = UserId::new(body.user)?;
    let device = body.device.map(DeviceId::new).transpose()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut claims =
        serde_json::json!({ "tenant": dev.tenant, "sub": user, "iat": now, "exp": now + 86_400 });
    if let Some(d) = device {
        claims["device"] = serde_json::Value::String(d.into_string());
    }
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(dev.hs256_secret.as_bytes()),
    )
    .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    Ok(Json(DevToken {
        token,
        tenant: dev.tenant.to_string(),
    }))
}
