//! `GET/PUT /v1/admin/previews` (v1.3): whether a tenant's messages get
//! link previews. Kept in the tenant's record, which every writer
//! follows: a change holds for the messages sent after it.

use axum::Json;
use axum::extract::State;
use switchboard_nats::records::tenants::TenantError;
use switchboard_protocol::previews::PreviewSettings;

use super::extract::{Admin, JsonBody, Shared};
use super::openapi::Operation;
use crate::error::ApiError;

/// `GET /v1/admin/previews`
pub(super) fn show_op() -> Operation {
    Operation::get("The tenant's link previews")
        .describe("Whether the server unfurls the first links of the tenant's text messages after their ack (on unless turned off; a deployment may turn them off for every tenant). Tenant admins only.")
        .reply::<PreviewSettings>(200, "The setting.")
        .errors(&[403])
}

pub(super) async fn show(
    State(gw): State<Shared>,
    Admin(id): Admin,
) -> Result<Json<PreviewSettings>, ApiError> {
    let enabled = match gw.tenant_registry.get(&id.tenant).await {
        Ok(record) => record.link_previews != Some(false),
        Err(TenantError::NotFound(_)) => true,
        Err(e) => return Err(e.into()),
    };
    Ok(Json(PreviewSettings { enabled }))
}

/// `PUT /v1/admin/previews`
pub(super) fn set_op() -> Operation {
    Operation::put("Turn the tenant's link previews on or off")
        .describe("`{\"enabled\": false}`: no message of the tenant sent from then on is unfurled (cards already made stay); `true` turns them back on. Tenant admins only. 409 for a tenant defined only in the configuration file: create it in sb_tenants first.")
        .json_body::<PreviewSettings>()
        .reply::<PreviewSettings>(200, "The setting now.")
        .errors(&[400, 403, 409])
}

pub(super) async fn set(
    State(gw): State<Shared>,
    Admin(id): Admin,
    JsonBody(body): JsonBody<PreviewSettings>,
) -> Result<Json<PreviewSettings>, ApiError> {
    let updated = gw
        .tenant_registry
        .update(&id.tenant, |record| {
            record.link_previews = (!body.enabled).then_some(false);
            Ok(())
        })
        .await
        .map_err(|e| super::webhooks::record_unchanged(e, "link previews setting"))?;
    tracing::info!(tenant = %id.tenant, by = %id.user, enabled = body.enabled, "link previews set");
    Ok(Json(PreviewSettings {
        enabled: updated.link_previews != Some(false),
    }))
}
