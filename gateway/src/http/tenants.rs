//! The operator API for tenants (F21): what `switchboard tenant` does, over
//! HTTP, for operators' tooling. It takes the deployment's operator token
//! (`operator_token` in the configuration, a bearer token), not a tenant's
//! JWT: tenants never administer themselves here. Secrets are write-only:
//! answers show them as fingerprints.

use std::collections::BTreeMap;

use axum::Json;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use switchboard_nats::records::tenants::{
    self, ED25519_KEY_PATTERN, HTTP_URL_PATTERN, MAX_CLAIM_LEN, MAX_HTTP_URL_LEN, MAX_ORIGIN_LEN,
    PushSettings, RedactedTenant, TenantQuotas, TenantRecord, WEB_ORIGIN_PATTERN, fingerprint,
    object, optional_object,
};
use switchboard_protocol::TenantId;
use switchboard_protocol::safety::MAX_RETENTION_DAYS;
use switchboard_protocol::webhooks::WebhookEndpoint;

use super::extract::{JsonBody, Operator, PathParams};
use super::openapi::Operation;
use crate::error::ApiError;

/// `GET /v1/operator/tenants`
pub(super) fn list_op() -> Operation {
    Operation::get("List tenants")
        .describe("Every tenant of sb_tenants.")
        .for_operator()
        .reply::<TenantList>(200, "The tenants.")
}

pub(super) async fn list(Operator(registry): Operator) -> Result<Json<TenantList>, ApiError> {
    let all: Vec<_> = registry
        .list()
        .await?
        .iter()
        .map(TenantRecord::redacted)
        .collect();
    Ok(Json(TenantList { tenants: all }))
}

#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct TenantList {
    tenants: Vec<RedactedTenant>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewTenant {
    id: TenantId,
    /// HS256 secrets, at least 16 characters each.
    #[serde(default)]
    #[schemars(inner(length(min = 16)))]
    hs256_secrets: Vec<String>,
    /// Ed25519 public keys: 32 bytes, base64 (standard or URL-safe,
    /// canonical).
    #[serde(default)]
    #[schemars(inner(pattern(ED25519_KEY_PATTERN)))]
    ed25519_public_keys: Vec<String>,
    #[serde(default, deserialize_with = "object")]
    quotas: TenantQuotas,
    #[serde(default, deserialize_with = "optional_object")]
    push: Option<PushSettings>,
    /// Web origins whose browser clients may use the tenant's tokens
    /// (scheme, host, port).
    #[serde(default)]
    #[schemars(inner(length(max = MAX_ORIGIN_LEN), pattern(WEB_ORIGIN_PATTERN)))]
    allowed_origins: Vec<String>,
    /// The `iss` every token of the tenant must carry (absent: not
    /// checked).
    #[serde(default, deserialize_with = "switchboard_protocol::fields::present")]
    #[schemars(with = "String", length(min = 1, max = MAX_CLAIM_LEN))]
    issuer: Option<String>,
    /// What every token's `aud` must be or contain (absent: not checked).
    #[serde(default, deserialize_with = "switchboard_protocol::fields::present")]
    #[schemars(with = "String", length(min = 1, max = MAX_CLAIM_LEN))]
    audience: Option<String>,
    /// The identity provider's JSON Web Key Set (RS256, ES256 and EdDSA
    /// signing keys), which every gateway fetches and keeps.
    #[serde(default, deserialize_with = "switchboard_protocol::fields::present")]
    #[schemars(with = "String", length(max = MAX_HTTP_URL_LEN), pattern(HTTP_URL_PATTERN))]
    jwks_url: Option<String>,
    /// Outbound webhooks (v1.2): at most 10 endpoints.
    #[serde(default)]
    #[schemars(length(max = 10))]
    webhooks: Vec<WebhookEndpoint>,
    /// The default retention in days (v1.2), where a conversation sets
    /// none of its own (absent or null: messages are kept).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_RETENTION_DAYS))]
    retention_days: Option<u32>,
}

/// Refuses anything but web origins, by the backbone's rule.
fn check_origins(origins: &[String]) -> Result<(), ApiError> {
    tenants::check_origins(origins).map_err(|e| ApiError::invalid(e.to_string()))
}

/// `POST /v1/operator/tenants`
pub(super) fn create_op() -> Operation {
    Operation::post("Create a tenant")
        .describe("Every gateway and worker uses it within moments, without a restart.")
        .for_operator()
        .json_body::<NewTenant>()
        .reply::<RedactedTenant>(201, "The tenant.")
        .errors(&[409])
}

pub(super) async fn create(
    Operator(registry): Operator,
    JsonBody(body): JsonBody<NewTenant>,
) -> Result<(StatusCode, Json<RedactedTenant>), ApiError> {
    check_origins(&body.allowed_origins)?;
    let mut record = TenantRecord::new(body.id);
    record.hs256_secrets = body.hs256_secrets;
    record.ed25519_public_keys = body.ed25519_public_keys;
    record.quotas = body.quotas;
    record.push = body.push;
    record.allowed_origins = body.allowed_origins;
    record.issuer = body.issuer;
    record.audience = body.audience;
    record.jwks_url = body.jwks_url;
    record.webhooks = body.webhooks;
    record.retention_days = body.retention_days;
    let record = registry.create(record).await?;
    Ok((StatusCode::CREATED, Json(record.redacted())))
}

/// `GET /v1/operator/tenants/{id}`
pub(super) fn show_op() -> Operation {
    Operation::get("One tenant")
        .for_operator()
        .path::<TenantId>("id", "The tenant.")
        .reply::<RedactedTenant>(200, "The tenant.")
}

pub(super) async fn show(
    Operator(registry): Operator,
    path: PathParams<TenantId>,
) -> Result<Json<RedactedTenant>, ApiError> {
    let id = path.get()?;
    let record = registry.get(&id).await?;
    Ok(Json(record.redacted()))
}

/// A change: keys to add and remove (an HS256 secret by its value or its
/// fingerprint), quotas to set (`null` removes one).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Change {
    /// HS256 secrets, at least 16 characters each.
    #[serde(default)]
    #[schemars(inner(length(min = 16)))]
    add_hs256_secrets: Vec<String>,
    /// By value or by fingerprint.
    #[serde(default)]
    remove_hs256_secrets: Vec<String>,
    /// Ed25519 public keys: 32 bytes, base64 (standard or URL-safe,
    /// canonical).
    #[serde(default)]
    #[schemars(inner(pattern(ED25519_KEY_PATTERN)))]
    add_ed25519_public_keys: Vec<String>,
    #[serde(default)]
    remove_ed25519_public_keys: Vec<String>,
    /// Quotas to set: a value, or `null` to remove one; absent ones are
    /// unchanged.
    #[serde(default)]
    #[schemars(with = "TenantQuotas")]
    quotas: BTreeMap<String, Option<serde_json::Number>>,
    /// Push settings to set (`null` turns pushes off); absent: unchanged.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Option<PushSettings>")]
    push: Option<Option<PushSettings>>,
    /// The web origins allowed from now on (the whole list); absent:
    /// unchanged.
    #[serde(default, deserialize_with = "switchboard_protocol::fields::present")]
    #[schemars(with = "Vec<String>", inner(length(max = MAX_ORIGIN_LEN), pattern(WEB_ORIGIN_PATTERN)))]
    allowed_origins: Option<Vec<String>>,
    /// The `iss` the tenant's tokens must carry from now on (`null`: not
    /// checked); absent: unchanged.
    #[serde(default, deserialize_with = "switchboard_protocol::fields::present")]
    #[schemars(with = "Option<String>", length(min = 1, max = MAX_CLAIM_LEN))]
    issuer: Option<Option<String>>,
    /// What their `aud` must be or contain from now on (`null`: not
    /// checked); absent: unchanged.
    #[serde(default, deserialize_with = "switchboard_protocol::fields::present")]
    #[schemars(with = "Option<String>", length(min = 1, max = MAX_CLAIM_LEN))]
    audience: Option<Option<String>>,
    /// The key set URL from now on (`null`: none); absent: unchanged.
    #[serde(default, deserialize_with = "switchboard_protocol::fields::present")]
    #[schemars(with = "Option<String>", length(max = MAX_HTTP_URL_LEN), pattern(HTTP_URL_PATTERN))]
    jwks_url: Option<Option<String>>,
    /// The outbound webhooks from now on (the whole list, v1.2); absent:
    /// unchanged.
    #[serde(default)]
    #[schemars(length(max = 10))]
    webhooks: Option<Vec<WebhookEndpoint>>,
    /// The default retention in days from now on (`null`: messages are
    /// kept where a conversation sets none); absent: unchanged. Messages
    /// already older go within an hour (`tenant_retention_pass_secs`).
    #[serde(default, deserialize_with = "switchboard_protocol::fields::present")]
    #[schemars(with = "Option<u32>", range(min = 1, max = MAX_RETENTION_DAYS))]
    retention_days: Option<Option<u32>>,
}

/// Tells an absent field (`None`) from an explicit `null` (`Some(None)`).
fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<PushSettings>>, D::Error> {
    optional_object(d).map(Some)
}

/// `PATCH /v1/operator/tenants/{id}`
pub(super) fn change_op() -> Operation {
    Operation::patch("Change a tenant's keys and quotas")
        .describe("Keys to add and remove (an HS256 secret by value or fingerprint): during a rotation add the new key, move the token issuers over, then remove the old one. Quotas: name to value, null removes it. issuer and audience: the value tokens must carry, null stops checking it. jwks_url: the identity provider's key set, null drops it. retention_days (1 to 36500): the default retention of conversations that set none, null removes it. A compare-and-set: 409 if someone else changed the tenant meanwhile.")
        .for_operator()
        .path::<TenantId>("id", "The tenant.")
        .json_body::<Change>()
        .reply::<RedactedTenant>(200, "The tenant as it is now.")
        .errors(&[409])
}

pub(super) async fn change(
    Operator(registry): Operator,
    path: PathParams<TenantId>,
    JsonBody(body): JsonBody<Change>,
) -> Result<Json<RedactedTenant>, ApiError> {
    let id = path.get()?;
    if let Some(origins) = &body.allowed_origins {
        check_origins(origins)?;
    }
    let record = registry
        .update(&id, |r| {
            r.hs256_secrets.retain(|s| {
                !body
                    .remove_hs256_secrets
                    .iter()
                    .any(|gone| gone == s || *gone == fingerprint(s))
            });
            r.hs256_secrets
                .extend(body.add_hs256_secrets.iter().cloned());
            r.ed25519_public_keys.retain(|k| {
                !body
                    .remove_ed25519_public_keys
                    .iter()
                    .any(|gone| gone.trim() == k.trim())
            });
            r.ed25519_public_keys
                .extend(body.add_ed25519_public_keys.iter().cloned());
            if let Some(push) = &body.push {
                r.push = push.clone();
            }
            if let Some(origins) = &body.allowed_origins {
                r.allowed_origins = origins.clone();
            }
            if let Some(issuer) = &body.issuer {
                r.issuer = issuer.clone();
            }
            if let Some(audience) = &body.audience {
                r.audience = audience.clone();
            }
            if let Some(url) = &body.jwks_url {
                r.jwks_url = url.clone();
            }
            if let Some(webhooks) = &body.webhooks {
                r.webhooks = webhooks.clone();
            }
            if let Some(days) = body.retention_days {
                r.retention_days = days;
            }
            for (name, value) in &body.quotas {
                let value = value
                    .as_ref()
                    .map_or("none".to_owned(), ToString::to_string);
                r.quotas.set(name, &value)?;
            }
            Ok(())
        })
        .await?;
    Ok(Json(record.redacted()))
}

/// `DELETE /v1/operator/tenants/{id}`
pub(super) fn remove_op() -> Operation {
    Operation::delete("Delete a tenant")
        .describe("Its tokens stop verifying (a tenant also in the configuration file falls back to the file's keys); its data stays.")
        .for_operator()
        .path::<TenantId>("id", "The tenant.")
        .reply_empty(204, "Deleted.")
}

pub(super) async fn remove(
    Operator(registry): Operator,
    path: PathParams<TenantId>,
) -> Result<StatusCode, ApiError> {
    let id = path.get()?;
    registry.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}
