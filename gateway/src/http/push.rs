//! Push registration (F15): a device tells Switchboard its address at a
//! push provider. Only for the token's own device. Registering also
//! records the device (as connecting does), so messages get inbox entries
//! for it, and those entries are what the push stage checks: a message the
//! device has not acknowledged a few seconds after it was stored gets a
//! push.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_nats::records::push_tokens::checked_registration;
use switchboard_protocol::push::PushRegistration;
use switchboard_protocol::{DeviceId, ErrorCode};

use super::extract::Shared;
use super::extract::{JsonBody, PathParams};
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

/// Why another device's push token may not be registered, read or removed.
const NOT_OWN_DEVICE: &str =
    "a device registers its own push token only: the path must name the token's device";

/// `PUT /v1/devices/{device}/push`
pub(super) fn register_op() -> Operation {
    Operation::put("Register this device for push notifications")
        .describe("Only for the token's own device (403 otherwise). An APNs token is an even number of hex digits, 16 to 200 (400 otherwise). Replaces the device's earlier token. When the tenant has push configured, a message this device has not acknowledged a few seconds (the tenant's delay) after it was stored gets a push through the provider; a burst in one conversation is one push.")
        .path::<DeviceId>("device", "The token's own device.")
        .json_body::<PushRegistration>()
        .reply::<PushRegistration>(200, "Registered.")
}

pub(super) async fn register(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<DeviceId>,
    JsonBody(body): JsonBody<PushRegistration>,
) -> Result<Json<PushRegistration>, ApiError> {
    let device = path.own(&id, NOT_OWN_DEVICE)?;
    let registration =
        checked_registration(body.provider, &body.token).map_err(ApiError::invalid)?;
    gw.store
        .register_device(&id.tenant, &id.user, &device)
        .await?;
    gw.push_tokens
        .register(&id.tenant, &id.user, &device, registration.clone())
        .await?;
    Ok(Json(registration))
}

/// `GET /v1/devices/{device}/push`
pub(super) fn show_op() -> Operation {
    Operation::get("This device's push registration")
        .path::<DeviceId>("device", "The token's own device.")
        .reply::<PushRegistration>(200, "The registration.")
        .errors(&[404])
}

pub(super) async fn show(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<DeviceId>,
) -> Result<Json<PushRegistration>, ApiError> {
    let device = path.own(&id, NOT_OWN_DEVICE)?;
    let devices = gw.push_tokens.devices(&id.tenant, &id.user).await?;
    devices
        .get(&device)
        .map(|t| Json(t.registration.clone()))
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no push token for this device"))
}

/// `DELETE /v1/devices/{device}/push`
pub(super) fn unregister_op() -> Operation {
    Operation::delete("Stop pushes to this device")
        .path::<DeviceId>("device", "The token's own device.")
        .reply_empty(204, "Unregistered (also when there was nothing).")
}

pub(super) async fn unregister(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<DeviceId>,
) -> Result<StatusCode, ApiError> {
    let device = path.own(&id, NOT_OWN_DEVICE)?;
    gw.push_tokens
        .unregister(&id.tenant, &id.user, &device, None)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
