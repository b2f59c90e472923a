//! `GET/PUT /v1/admin/webhooks` (v1.2): a tenant admin's outbound
//! webhooks, kept in the tenant's record in `sb_tenants` (where the
//! operator API sets them too). The workers deliver them
//! (`switchboard-webhooks`); secrets are write-only.

use axum::Json;
use axum::extract::State;
use switchboard_nats::records::tenants::{TenantError, fingerprint};
use switchboard_protocol::ErrorCode;
use switchboard_protocol::webhooks::{WebhookList, WebhooksBody};

use super::extract::{Admin, JsonListBody, Shared};
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
        Err(TenantError::NotFound(_)) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    Ok(Json(WebhookList { webhooks }))
}

/// `PUT /v1/admin/webhooks`
pub(super) fn put_op() -> Operation {
    Operation::put("Set the tenant's webhooks")
        .describe("Replaces the list (a JSON array, or `{\"webhooks\": [...]}` as GET answers): at most 10 endpoints, each an http(s) `url`, a `secret` of at least 16 characters (the key of `Switchboard-Signature`; the fingerprint GET showed keeps the stored one) and the `events` it gets: `message.created`, `message.updated`, `reaction`, `member.added`, `member.removed`, `report.created`, `member.role_changed`, `member.banned`, `member.unbanned`, `message.pinned`, `message.unpinned`, `conversation.updated`, `moderation.audit` (v1.3: each entry of the tenant's audit log). An empty list turns them off. Events that happen from then on are delivered; answers the list, secrets as fingerprints. Tenant admins only. 409 for a tenant defined only in the configuration file: create it in sb_tenants first (`switchboard tenant create`, the operator API).")
        .json_body::<WebhooksBody>()
        .reply::<WebhookList>(200, "The endpoints now.")
        .errors(&[400, 403, 409])
}

pub(super) async fn put(
    State(gw): State<Shared>,
    Admin(id): Admin,
    JsonListBody(body): JsonListBody<WebhooksBody>,
) -> Result<Json<WebhookList>, ApiError> {
    let mut webhooks = body.into_list();
    let updated = gw
        .tenant_registry
        .update(&id.tenant, |record| {
            // A secret given back as the fingerprint GET showed keeps the
            // one stored for that URL (an admin that edits the list it
            // read must not replace every secret with its fingerprint).
            for w in &mut webhooks {
                if let Some(kept) = record
                    .webhooks
                    .iter()
                    .find(|old| old.url == w.url && fingerprint(&old.secret) == w.secret)
                {
                    w.secret.clone_from(&kept.secret);
                }
            }
            // Checked with the rest of the record (`check_webhooks`).
            record.webhooks = webhooks;
            Ok(())
        })
        .await
        .map_err(|e| record_unchanged(e, "webhooks"))?;
    tracing::info!(tenant = %id.tenant, by = %id.user, endpoints = updated.webhooks.len(), "webhooks set");
    Ok(Json(WebhookList {
        webhooks: updated.redacted_webhooks(),
    }))
}

/// The answer to a tenant admin's change of their tenant's record (its
/// webhooks, its word list) that did not happen: a tenant of the
/// configuration file only has no record to change (409).
pub(super) fn record_unchanged(e: TenantError, what: &str) -> ApiError {
    match e {
        TenantError::NotFound(_) => ApiError::new(
            ErrorCode::Conflict,
            format!(
                "this tenant is defined in the configuration file only: create it in sb_tenants (switchboard tenant create, or the operator API) to set its {what}"
            ),
        ),
        other => other.into(),
    }
}
