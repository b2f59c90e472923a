//! Push registration (F15): a device tells Switchboard its address at a
//! push provider. Only for the token's own device. Registering also
//! records the device (as connecting does), so messages get inbox entries
//! for it, and those entries are what the push stage checks: a message the
//! device has not acknowledged a few seconds after it was stored gets a
//! push. Tenant admins word the pushes (`GET/PUT
//! /v1/admin/push/templates`, v1.3), kept in the tenant's record.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_nats::records::push_tokens::checked_registration;
use switchboard_nats::records::tenants::TenantError;
use switchboard_protocol::push::PushRegistration;
use switchboard_protocol::push_templates::PushTemplates;
use switchboard_protocol::{DeviceId, ErrorCode};

use super::extract::{Admin, Shared};
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

/// `GET /v1/admin/push/templates`
pub(super) fn templates_op() -> Operation {
    Operation::get("The tenant's push templates")
        .describe("What the tenant's pushes say per kind (`message`, `mention`, `reply`, `reaction`): `{title, body}` with the placeholders `{sender}`, `{conversation}` and `{text}`. A kind left out keeps the default wording. No templates: `{}`. Tenant admins only.")
        .reply::<PushTemplates>(200, "The templates.")
        .errors(&[403])
}

pub(super) async fn templates(
    State(gw): State<Shared>,
    Admin(id): Admin,
) -> Result<Json<PushTemplates>, ApiError> {
    let templates = match gw.tenant_registry.get(&id.tenant).await {
        Ok(record) => record.push_templates.unwrap_or_default(),
        Err(TenantError::NotFound(_)) => PushTemplates::default(),
        Err(e) => return Err(e.into()),
    };
    Ok(Json(templates))
}

/// `PUT /v1/admin/push/templates`
pub(super) fn set_templates_op() -> Operation {
    Operation::put("Set the tenant's push templates")
        .describe("Replaces every template: per kind (`message`, `mention`, `reply`, `reaction`), a `title` of 1 to 100 characters and an optional `body` of at most 500, where `{sender}` is the sender's display name (else their id), `{conversation}` the conversation's title (else the sender's name) and `{text}` the message's one-line preview; `{{` and `}}` are a literal brace, and anything else in braces is refused (400). Each recipient's push uses the first kind that applies: a mention of them (or of all), a reply to their message (or in their thread), else a message; `reaction` is for reactions to their message. The tenant's `preview` still decides what the placeholders may show: with `sender`, `{text}` is \"New message\"; with `off`, `{sender}` is \"Someone\" and `{conversation}` empty too; ciphertext is never previewed. `{}` goes back to the default wording. Answers the templates. 409 for a tenant defined only in the configuration file. Tenant admins only.")
        .json_body::<PushTemplates>()
        .reply::<PushTemplates>(200, "The templates now.")
        .errors(&[400, 403, 409])
}

pub(super) async fn set_templates(
    State(gw): State<Shared>,
    Admin(id): Admin,
    JsonBody(templates): JsonBody<PushTemplates>,
) -> Result<Json<PushTemplates>, ApiError> {
    templates
        .check()
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let stored = (!templates.is_empty()).then_some(templates);
    let updated = gw
        .tenant_registry
        .update(&id.tenant, |record| {
            record.push_templates = stored;
            Ok(())
        })
        .await
        .map_err(|e| super::webhooks::record_unchanged(e, "push templates"))?;
    tracing::info!(tenant = %id.tenant, by = %id.user, "push templates set");
    Ok(Json(updated.push_templates.unwrap_or_default()))
}
