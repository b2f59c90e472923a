//! The end-to-end encryption key directory API (F17, PROTOCOL.md): a
//! device publishes its public keys, anyone in the tenant lists a user's
//! devices and claims a session's keys, each one-time prekey exactly once
//! (`switchboard_backbone::key_directory`).
//!
//! Who may do what: a device publishes (and reads back) only its own keys,
//! the device of its token; listing and claiming are open to every user
//! of the tenant, since the keys are public and a session may start
//! before two users share a conversation. A claim that leaves the device
//! with few prekeys tells its owner (`prekeys_low` on every connection of
//! the user). Each user's claims are rate limited (`[limits]
//! key_claims_per_second`, per gateway), so no one drains another user's
//! one-time prekeys in a burst.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use switchboard_backbone::envelope::frame_event;
use switchboard_backbone::key_directory::{self, KeyError, LOW_PREKEYS};
use switchboard_protocol::keys::{ClaimedKeys, DeviceKeysUpload, DeviceKeysView, UserDevices};
use switchboard_protocol::{DeviceId, ErrorCode, ServerFrame, UserId};

use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::rest::JsonBody;

type Shared = Arc<Gateway>;

pub(crate) fn routes() -> axum::Router<Shared> {
    axum::Router::new()
        .route("/v1/devices/{device}/keys", get(own_keys).put(publish))
        .route("/v1/users/{user}/devices", get(devices))
        .route("/v1/users/{user}/devices/{device}/claim", post(claim))
}

fn key_error(e: KeyError) -> ApiError {
    let code = match &e {
        KeyError::Invalid(_) => ErrorCode::InvalidRequest,
        KeyError::NotFound => ErrorCode::NotFound,
        // Over the documented count (the schema's maxItems for one
        // upload): invalid, like any field out of bounds.
        KeyError::TooMany => ErrorCode::InvalidRequest,
        KeyError::Contended | KeyError::Backbone(_) => ErrorCode::Unavailable,
    };
    if code == ErrorCode::Unavailable {
        tracing::warn!(error = %e, "key directory");
    }
    ApiError::new(code, e.to_string())
}

fn parse<T>(
    raw: String,
    new: impl FnOnce(String) -> Result<T, switchboard_protocol::IdError>,
) -> Result<T, ApiError> {
    new(raw).map_err(|e| ApiError::invalid(e.to_string()))
}

/// The caller's own device, named in the path.
fn own_device(
    id: &Identity,
    path: Result<Path<String>, PathRejection>,
) -> Result<DeviceId, ApiError> {
    let Path(raw) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let device = parse(raw, DeviceId::new)?;
    if device != id.device {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "a device publishes and reads its own keys only: the path must name the token's device",
        ));
    }
    Ok(device)
}

async fn publish(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<String>, PathRejection>,
    JsonBody(upload): JsonBody<DeviceKeysUpload>,
) -> Result<Json<DeviceKeysView>, ApiError> {
    let device = own_device(&id, path)?;
    key_directory::validate(&upload).map_err(key_error)?;
    gw.keys
        .publish(&id.tenant, &id.user, &device, upload)
        .await
        .map_err(key_error)?;
    let view = gw
        .keys
        .device(&id.tenant, &id.user, &device)
        .await
        .map_err(key_error)?;
    Ok(Json(view))
}

async fn own_keys(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<DeviceKeysView>, ApiError> {
    let device = own_device(&id, path)?;
    let view = gw
        .keys
        .device(&id.tenant, &id.user, &device)
        .await
        .map_err(key_error)?;
    Ok(Json(view))
}

async fn devices(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<UserDevices>, ApiError> {
    let Path(raw) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let user = parse(raw, UserId::new)?;
    let devices = gw
        .keys
        .devices(&id.tenant, &user)
        .await
        .map_err(key_error)?;
    Ok(Json(UserDevices {
        user_id: user,
        devices,
    }))
}

async fn claim(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<ClaimedKeys>, ApiError> {
    let Path((user, device)) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let user = parse(user, UserId::new)?;
    let device = parse(device, DeviceId::new)?;
    let limits = &gw.config.limits;
    if !gw
        .quotas
        .key_claim(&id, limits.key_claims_per_second, limits.key_claim_burst)
    {
        return Err(ApiError::new(
            ErrorCode::RateLimited,
            format!(
                "more than {} key claims per second; slow down",
                limits.key_claims_per_second
            ),
        ));
    }
    let claim = gw
        .keys
        .claim(&id.tenant, &user, &device)
        .await
        .map_err(key_error)?;
    // Tell the owner while the supply is low, once per claim that took one
    // (and once more when a claim finds none left).
    if claim.remaining <= LOW_PREKEYS {
        let event = frame_event(&ServerFrame::PrekeysLow {
            device_id: device.clone(),
            remaining: claim.remaining,
        });
        if let Err(e) = gw
            .publish_to_users(&id.tenant, std::iter::once(&user), &event)
            .await
        {
            tracing::warn!(error = %e, "telling a device its prekeys run low failed");
        }
    }
    tracing::debug!(
        claimer = %id.user,
        owner = %user,
        device = %device,
        one_time = claim.keys.one_time_prekey.is_some(),
        remaining = claim.remaining,
        "prekeys claimed"
    );
    Ok(Json(claim.keys))
}
