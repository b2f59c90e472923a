//! `GET/PUT /v1/admin/webhooks` (v1.2): a tenant admin's outbound
//! webhooks, kept in the tenant's record in `sb_tenants` (where the
//! operator API sets them too). The workers deliver them
//! (`switchboard_push::hooks`); secrets are write-only.

use axum::Json;
use axum::extract::State;
use switchboard_nats::records::tenants::check_webhooks;
use switchboard_protocol::ErrorCode;
use switchboard_protocol::webhooks::WebhookList;

use super::extract::{Admin, JsonBody, Shared};
use super::openapi::Operation;
use crate::error::ApiError;

/// `GET /v1/admin/webhooks`
pub(super) fn list_op() -> Operation {
    Operation::get("The tenant's webhooks")
        .describe("Each endpoint with the events it gets; secrets as their fingerprints (`sha256:` and 16 hex digits). Tenant admins only.")
        .reply::<WebhookList>(200, "The endpoints.")
        .errors(&[403])
}

pub(super) async fn list(
    State(gw): State<Shared>,
    Admin(id): Admin,
) -> Result<Json<WebhookList>, ApiError> {
    let webhooks = match gw.tenant_registry.get(&id.tenant).await {
        Ok(record) => record.redacted_webhooks(),
        Err(switchboard_nats::records::tenants::TenantError::NotFound(_)) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    Ok(Json(WebhookList { webhooks }))
}

/// `PUT /v1/admin/webhooks`
pub(super) fn put_op() -> Operation {
    Operation::put("Set the tenant's webhooks")
        .describe("Replaces the list: at most 10 endpoints, each an http(s) `url`, a `secret` of at least 16 characters (the key of `Switchboard-Signature`) and the `events` it gets: `message.created`, `message.updated`, `reaction`, `member.added`, `member.removed`, `report.created`. An empty list turns them off. Events that happen from then on are delivered; answers the list, secrets as fingerprints. Tenant admins only. 409 for a tenant defined only in the configuration file: create it in sb_tenants first (`switchboard tenant create`, the operator API).")
        .json_body::<WebhookList>()
        .reply::<WebhookList>(200, "The endpoints now.")
        .errors(&[400, 403, 409])
}

pub(super) async fn put(
    State(gw): State<Shared>,
    Admin(id): Admin,
    JsonBody(body): JsonBody<WebhookList>,
) -> Result<Json<WebhookList>, ApiError> {
    check_webhooks(&body.webhooks).map_err(ApiError::from)?;
    let updated = gw
        .tenant_registry
        .update(&id.tenant, |record| {
            record.webhooks = body.webhooks;
            Ok(())
        })
        .await
        .map_err(|e| match e {
            switchboard_nats::records::tenants::TenantError::NotFound(_) => ApiError::new(
                ErrorCode::Conflict,
                "this tenant is defined in the configuration file only: create it in sb_tenants (switchboard tenant create, or the operator API) to set its webhooks",
            ),
            other => other.into(),
        })?;
    tracing::info!(tenant = %id.tenant, by = %id.user, endpoints = updated.webhooks.len(), "webhooks set");
    Ok(Json(WebhookList {
        webhooks: updated.redacted_webhooks(),
    }))
}
