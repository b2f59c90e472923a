//! The end-to-end encryption key directory API (F17, docs/protocol.md): a
//! device publishes its public keys, anyone in the tenant lists a user's
//! devices and claims a session's keys, each one-time prekey exactly once
//! (`crate::key_directory`).
//!
//! Who may do what: a device publishes (and reads back) only its own keys,
//! the device of its token; listing and claiming are open to every user
//! of the tenant, since the keys are public and a session may start
//! before two users share a conversation. A claim that leaves the device
//! with few prekeys tells its owner (`prekeys_low` on every connection of
//! the user). Each user's claims are rate limited (`[limits]
//! key_claims_per_second`, per gateway), so no one drains another user's
//! one-time prekeys in a burst.

use crate::key_directory::{self, LOW_PREKEYS};
use axum::Json;
use axum::extract::State;
use switchboard_nats::envelope::frame_event;
use switchboard_protocol::keys::{ClaimedKeys, DeviceKeysUpload, DeviceKeysView, UserDevices};
use switchboard_protocol::{DeviceId, ServerFrame, UserId};

use super::extract::Shared;
use super::extract::{JsonBody, PathParams};
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

/// Why another device's keys may not be published or read back.
const NOT_OWN_DEVICE: &str =
    "a device publishes and reads its own keys only: the path must name the token's device";

/// `PUT /v1/devices/{device}/keys`
pub(super) fn publish_op() -> Operation {
    Operation::put("Publish this device's end-to-end encryption keys")
        .describe("Only for the token's own device. The signed prekey's signature is verified with identity_key over the prekey's 32 raw bytes. identity_key, identity_dh_key and signed_prekey replace what was published; one_time_prekeys join the unclaimed ones (ids already unclaimed are skipped), unless identity_key changed, which replaces them all. At most 200 unclaimed one-time prekeys per device.")
        .path::<DeviceId>("device", "The token's own device.")
        .json_body::<DeviceKeysUpload>()
        .reply::<DeviceKeysView>(200, "What is published now.")
}

pub(super) async fn publish(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<DeviceId>,
    JsonBody(upload): JsonBody<DeviceKeysUpload>,
) -> Result<Json<DeviceKeysView>, ApiError> {
    let device = path.own(&id, NOT_OWN_DEVICE)?;
    key_directory::validate(&upload)?;
    gw.keys
        .publish(&id.tenant, &id.user, &device, upload)
        .await?;
    let view = gw.keys.device(&id.tenant, &id.user, &device).await?;
    Ok(Json(view))
}

/// `GET /v1/devices/{device}/keys`
pub(super) fn own_keys_op() -> Operation {
    Operation::get("This device's published keys (how many one-time prekeys are left)")
        .path::<DeviceId>("device", "The token's own device.")
        .reply::<DeviceKeysView>(200, "The device's keys.")
        .errors(&[404])
}

pub(super) async fn own_keys(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<DeviceId>,
) -> Result<Json<DeviceKeysView>, ApiError> {
    let device = path.own(&id, NOT_OWN_DEVICE)?;
    let view = gw.keys.device(&id.tenant, &id.user, &device).await?;
    Ok(Json(view))
}

/// `GET /v1/users/{user}/devices`
pub(super) fn devices_op() -> Operation {
    Operation::get("A user's devices with their public keys")
        .describe(
            "Open to every user of the tenant. Devices that never published keys are not listed.",
        )
        .path::<UserId>("user", "The user.")
        .reply::<UserDevices>(200, "The devices.")
}

pub(super) async fn devices(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<UserId>,
) -> Result<Json<UserDevices>, ApiError> {
    let user = path.get()?;
    let devices = gw.keys.devices(&id.tenant, &user).await?;
    Ok(Json(UserDevices {
        user_id: user,
        devices,
    }))
}

/// `POST /v1/users/{user}/devices/{device}/claim`
pub(super) fn claim_op() -> Operation {
    Operation::post("Claim the keys to start a session with a device")
        .describe("Hands out one of the device's unclaimed one-time prekeys, each exactly once (also under concurrent claims); one_time_prekey is null when none is left, and the session starts from the signed prekey. When 10 or fewer are left, every connection of the owner gets a prekeys_low frame. Each user may claim 5 times a second, in bursts of 20 (per gateway; [limits] key_claims_per_second, key_claim_burst); past it: 429 rate_limited.")
        .path::<UserId>("user", "The device's owner.")
        .path::<DeviceId>("device", "The device.")
        .reply::<ClaimedKeys>(200, "The keys.")
        .errors(&[404])
}

pub(super) async fn claim(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<(UserId, DeviceId)>,
) -> Result<Json<ClaimedKeys>, ApiError> {
    let (user, device) = path.get()?;
    gw.rates.key_claim(&id)?;
    let claim = gw.keys.claim(&id.tenant, &user, &device).await?;
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
