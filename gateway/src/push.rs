//! Push registration (F15): a device tells Switchboard its address at a
//! push provider. Only for the token's own device. Registering also
//! records the device (as connecting does), so messages get inbox entries
//! for it, and those entries are what the push stage checks: a message the
//! device has not acknowledged a few seconds after it was stored gets a
//! push.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::put;
use switchboard_backbone::push_tokens::PushTokenError;
use switchboard_protocol::push::{MAX_PUSH_TOKEN_BYTES, PushRegistration};
use switchboard_protocol::{DeviceId, ErrorCode};

use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::rest::JsonBody;

type Shared = Arc<Gateway>;

pub(crate) fn routes() -> axum::Router<Shared> {
    axum::Router::new().route(
        "/v1/devices/{device}/push",
        put(register).get(show).delete(unregister),
    )
}

fn token_error(e: PushTokenError) -> ApiError {
    tracing::warn!(error = %e, "push tokens");
    ApiError::new(ErrorCode::Unavailable, e.to_string())
}

fn own_device(
    id: &Identity,
    path: Result<Path<String>, PathRejection>,
) -> Result<DeviceId, ApiError> {
    let Path(raw) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let device = DeviceId::new(raw).map_err(|e| ApiError::invalid(e.to_string()))?;
    if device != id.device {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "a device registers its own push token only: the path must name the token's device",
        ));
    }
    Ok(device)
}

async fn register(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<PushRegistration>,
) -> Result<Json<PushRegistration>, ApiError> {
    let device = own_device(&id, path)?;
    let token = body.token.trim();
    if token.is_empty() || token.len() > MAX_PUSH_TOKEN_BYTES || token.chars().any(char::is_control)
    {
        return Err(ApiError::invalid(format!(
            "token must be 1 to {MAX_PUSH_TOKEN_BYTES} bytes without control characters"
        )));
    }
    let registration = PushRegistration {
        provider: body.provider,
        token: token.to_owned(),
    };
    gw.store
        .register_device(&id.tenant, &id.user, &device)
        .await?;
    gw.push_tokens
        .register(&id.tenant, &id.user, &device, registration.clone())
        .await
        .map_err(token_error)?;
    Ok(Json(registration))
}

async fn show(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<PushRegistration>, ApiError> {
    let device = own_device(&id, path)?;
    let devices = gw
        .push_tokens
        .devices(&id.tenant, &id.user)
        .await
        .map_err(token_error)?;
    devices
        .get(&device)
        .map(|t| Json(t.registration.clone()))
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no push token for this device"))
}

async fn unregister(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<String>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let device = own_device(&id, path)?;
    gw.push_tokens
        .unregister(&id.tenant, &id.user, &device, None)
        .await
        .map_err(token_error)?;
    Ok(StatusCode::NO_CONTENT)
}
