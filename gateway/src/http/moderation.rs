//! Moderation without code (v1.3), a tenant admin's tools kept in the
//! tenant's record in `sb_tenants`, which every gateway and worker
//! follows: `GET/PUT /v1/admin/blocklist`, the word list every send and
//! edit passes before the tenant's plugin (`screen.rs`).

use axum::Json;
use axum::extract::State;
use switchboard_nats::records::tenants::TenantError;
use switchboard_protocol::ErrorCode;
use switchboard_protocol::moderation::Blocklist;

use super::extract::{Admin, JsonBody, Shared};
use super::openapi::Operation;
use crate::error::ApiError;

/// `GET /v1/admin/blocklist`
pub(super) fn blocklist_op() -> Operation {
    Operation::get("The tenant's word list")
        .describe("The words every text, caption and custom message's `fallback_text` is checked against before the tenant's plugin, in lower case and sorted, and the `mode`: `reject` (`rejected_by_policy`) or `mask` (each listed word's characters become `*`; the sender's ack carries what was stored). No list: `{\"words\": [], \"mode\": \"reject\"}`. Tenant admins only.")
        .reply::<Blocklist>(200, "The list.")
        .errors(&[403])
}

pub(super) async fn blocklist(
    State(gw): State<Shared>,
    Admin(id): Admin,
) -> Result<Json<Blocklist>, ApiError> {
    let list = match gw.tenant_registry.get(&id.tenant).await {
        Ok(record) => record.blocklist.unwrap_or_default(),
        Err(TenantError::NotFound(_)) => Blocklist::default(),
        Err(e) => return Err(e.into()),
    };
    Ok(Json(list))
}

/// `PUT /v1/admin/blocklist`
pub(super) fn set_blocklist_op() -> Operation {
    Operation::put("Set the tenant's word list")
        .describe("Replaces the list: at most 1000 `words`, each 1 to 64 letters and digits (Unicode), matched as whole words ignoring case (\"darn\" matches \"Darn!\", not \"darned\"), and the `mode`, `reject` (the default) or `mask`. Applies to every send and edit from then on, over the socket, REST and scheduled sends alike, before the tenant's plugin (which sees the masked text); never to ciphertext or a custom message's `data`. An empty list turns it off. Answers the list as stored (lower case, sorted, each word once). Tenant admins only. 409 for a tenant defined only in the configuration file: create it in sb_tenants first.")
        .json_body::<Blocklist>()
        .reply::<Blocklist>(200, "The list now.")
        .errors(&[400, 403, 409])
}

pub(super) async fn set_blocklist(
    State(gw): State<Shared>,
    Admin(id): Admin,
    JsonBody(list): JsonBody<Blocklist>,
) -> Result<Json<Blocklist>, ApiError> {
    let list = list
        .normalized()
        .map_err(|e| ApiError::new(ErrorCode::InvalidRequest, e.to_string()))?;
    let words = list.words.len();
    let stored = (!list.is_empty()).then_some(list);
    let updated = gw
        .tenant_registry
        .update(&id.tenant, |record| {
            record.blocklist = stored;
            Ok(())
        })
        .await
        .map_err(|e| super::webhooks::record_unchanged(e, "word list"))?;
    tracing::info!(tenant = %id.tenant, by = %id.user, words, "word list set");
    Ok(Json(updated.blocklist.unwrap_or_default()))
}
