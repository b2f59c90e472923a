//! Moderation without code (v1.3), a tenant admin's tools:
//! - `GET/PUT /v1/admin/blocklist`, the word list every send and edit
//!   passes before the tenant's plugin (`screen.rs`), kept in the
//!   tenant's record in `sb_tenants`, which every gateway and worker
//!   follows;
//! - `GET /v1/admin/bans`, `PUT/DELETE /v1/admin/bans/{user}`, tenant-wide
//!   bans, kept in `sb_tenant_bans`, which every gateway follows: the
//!   token check (`auth`) refuses a banned user, and their open sessions
//!   close (`connection`);
//! - `GET /v1/admin/shadow_bans`, `PUT/DELETE /v1/admin/shadow_bans/{user}`,
//!   shadow bans, in the same bucket, which every worker follows too: a
//!   conversation's writer stores a shadow-banned user's messages for
//!   their own devices alone (`Message::shadow`);
//! - `GET /v1/admin/audit`, the log of those changes (`SB_AUDIT`), each
//!   recorded once it is made.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use switchboard_nats::audit::{self, Cursor};
use switchboard_nats::records::bans::BanKind;
use switchboard_nats::records::tenants::TenantError;
use switchboard_protocol::moderation::{
    AuditAction, AuditEntry, AuditList, Blocklist, TenantBan, TenantBanList, TenantBanRequest,
};
use switchboard_protocol::{ErrorCode, Timestamp, UserId};

use super::extract::{Admin, JsonBody, OptionalJsonBody, PathParams, Shared};
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::state::Gateway;

/// Bans per page of `GET /v1/admin/bans` by default, and at most.
const BANS_PAGE: usize = 100;
const MAX_BANS_PAGE: usize = 1000;
/// Ended bans deleted from the bucket at each ban: the bucket keeps no
/// more than the bans in force for long, at a bounded cost per request.
const ENDED_SWEPT_PER_BAN: usize = 100;
/// Audit entries per page of `GET /v1/admin/audit` by default, and at
/// most.
const AUDIT_PAGE: usize = 50;
const MAX_AUDIT_PAGE: usize = 200;

/// Records a tenant-wide change `id`'s caller made (to `user_id`, if to
/// someone), once it is made; a conversation's writer records the
/// changes made in it. A change whose entry could not be recorded is
/// answered `unavailable`: every change audited here is idempotent, and
/// the client's retry records it.
async fn audited(
    gw: &Gateway,
    id: &Identity,
    action: AuditAction,
    user_id: Option<UserId>,
    details: serde_json::Value,
) -> Result<(), ApiError> {
    let entry = AuditEntry {
        id: String::new(),
        at: Timestamp::now(),
        actor: id.user.clone(),
        action,
        user_id,
        conversation_id: None,
        details,
    };
    match audit::record(&gw.js, &id.tenant, entry).await {
        Ok(_) => Ok(()),
        Err(e) => {
            tracing::error!(tenant = %id.tenant, ?action, error = %e, "a moderation change was made but not audited");
            Err(ApiError::new(
                ErrorCode::Unavailable,
                "the change was made but its audit entry was not recorded: repeat the request",
            ))
        }
    }
}

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
    let list = updated.blocklist.unwrap_or_default();
    let details = json!({"words": list.words.len(), "mode": list.mode});
    audited(&gw, &id, AuditAction::BlocklistSet, None, details).await?;
    Ok(Json(list))
}

/// The query of `GET /v1/admin/bans`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct BansQuery {
    /// Bans per page: 100 when absent; at least 1, larger values are
    /// capped at 1000.
    limit: Option<usize>,
    /// Where the previous page ended (its `next_cursor`).
    #[schemars(regex(pattern = r"^[0-9]{1,15}:.*$"))]
    cursor: Option<String>,
}

/// Where a page of bans ends: the last ban's time and user, in the
/// list's order (newest first, then by user).
fn ban_cursor(ban: &TenantBan) -> String {
    format!("{}:{}", ban.banned_at.unix_ms(), ban.user_id)
}

/// The time and user a cursor names; the user as given, compared as a
/// string (a cursor is a position, whoever it names).
fn after_cursor(cursor: &str) -> Result<(i64, &str), ApiError> {
    let bad = || ApiError::invalid("cursor is not one this list gave");
    let (ms, user) = cursor.split_once(':').ok_or_else(bad)?;
    let ms = ms.parse::<i64>().map_err(|_| bad())?;
    Ok((ms, user))
}

/// `GET /v1/admin/bans`
pub(super) fn list_bans_op() -> Operation {
    Operation::get("The tenant's bans")
        .describe("The tenant-wide bans in force, newest first (then by user), `limit` per page (100 by default, at most 1000), the next page from `next_cursor`. A ban whose `until` passed is not listed. Tenant admins only.")
        .query_fields::<BansQuery>()
        .reply::<TenantBanList>(200, "A page of bans.")
        .errors(&[400, 403])
}

pub(super) async fn list_bans(
    State(gw): State<Shared>,
    Admin(id): Admin,
    query: Result<Query<BansQuery>, QueryRejection>,
) -> Result<Json<TenantBanList>, ApiError> {
    list_of(&gw, &id, BanKind::Tenant, query).await
}

/// `GET /v1/admin/shadow_bans`
pub(super) fn list_shadow_bans_op() -> Operation {
    Operation::get("The tenant's shadow bans")
        .describe("The shadow bans in force, newest first (then by user), `limit` per page (100 by default, at most 1000), the next page from `next_cursor`, as `GET /v1/admin/bans` lists bans. Tenant admins only.")
        .query_fields::<BansQuery>()
        .reply::<TenantBanList>(200, "A page of shadow bans.")
        .errors(&[400, 403])
}

pub(super) async fn list_shadow_bans(
    State(gw): State<Shared>,
    Admin(id): Admin,
    query: Result<Query<BansQuery>, QueryRejection>,
) -> Result<Json<TenantBanList>, ApiError> {
    list_of(&gw, &id, BanKind::Shadow, query).await
}

/// A page of the tenant's bans of `kind` in force.
async fn list_of(
    gw: &Gateway,
    id: &Identity,
    kind: BanKind,
    query: Result<Query<BansQuery>, QueryRejection>,
) -> Result<Json<TenantBanList>, ApiError> {
    let Query(query) = query?;
    let limit = query.limit.unwrap_or(BANS_PAGE).clamp(1, MAX_BANS_PAGE);
    let after = query.cursor.as_deref().map(after_cursor).transpose()?;
    let all = gw
        .tenants
        .bans()
        .in_force(kind, &id.tenant, Timestamp::now());
    let start = match &after {
        Some((ms, user)) => all.partition_point(|b| {
            let at = b.banned_at.unix_ms();
            at > *ms || (at == *ms && b.user_id.as_str() <= *user)
        }),
        None => 0,
    };
    let bans: Vec<TenantBan> = all.into_iter().skip(start).take(limit + 1).collect();
    let (bans, next_cursor) = if bans.len() > limit {
        let page = bans[..limit].to_vec();
        let cursor = page.last().map(ban_cursor);
        (page, cursor)
    } else {
        (bans, None)
    };
    Ok(Json(TenantBanList { bans, next_cursor }))
}

/// `PUT /v1/admin/bans/{user}`
pub(super) fn ban_op() -> Operation {
    Operation::put("Ban a user from the tenant")
        .describe("From then on every token of the user is refused, on REST and at the WebSocket upgrade, with 403 `banned`; their open connections close with code 4005, on every gateway within moments. `until` (in the future) ends it by itself; without it, it lasts until lifted. `reason` (at most 500 characters) is for the tenant's admins. Banning again replaces the ban (its time and admin with it). Their conversations, messages and memberships stay. Nobody bans themselves (403). At most `max_tenant_bans` bans in force per tenant (100,000 by default; 409 past it). Tenant admins only.")
        .path::<UserId>("user", "The user to ban.")
        .json_body::<TenantBanRequest>()
        .reply::<TenantBan>(200, "The ban.")
        .errors(&[400, 403, 409])
}

pub(super) async fn ban(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<UserId>,
    JsonBody(request): JsonBody<TenantBanRequest>,
) -> Result<Json<TenantBan>, ApiError> {
    put_ban(&gw, &id, BanKind::Tenant, path.get()?, request).await
}

/// `PUT /v1/admin/shadow_bans/{user}`
pub(super) fn shadow_ban_op() -> Operation {
    Operation::put("Shadow-ban a user")
        .describe("From then on the user's new messages (over the socket, REST, scheduled, in threads) are acked and stored as usual but shown to their own devices alone: the other members get no event, push or unread count for them and never see them in history, backlog, threads, pins, the conversation list or search, and webhooks get no event. The user is not told; their tokens keep working. Messages sent before stay as they were; lifting it shows the user's later messages to everyone, not the hidden ones. The body may be left out; `until` (in the future) ends it by itself, `reason` (at most 500 characters) is for the tenant's admins. Shadow-banning again replaces it. Nobody shadow-bans themselves (403). At most `max_tenant_bans` shadow bans in force per tenant (409 past it). Tenant admins only.")
        .path::<UserId>("user", "The user to shadow-ban.")
        .optional_json_body::<TenantBanRequest>()
        .reply::<TenantBan>(200, "The shadow ban.")
        .errors(&[400, 403, 409])
}

pub(super) async fn shadow_ban(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<UserId>,
    OptionalJsonBody(request): OptionalJsonBody<TenantBanRequest>,
) -> Result<Json<TenantBan>, ApiError> {
    put_ban(&gw, &id, BanKind::Shadow, path.get()?, request).await
}

/// Bans `user` (of `kind`) as `id`'s caller asks, and audits it.
async fn put_ban(
    gw: &Gateway,
    id: &Identity,
    kind: BanKind,
    user: UserId,
    request: TenantBanRequest,
) -> Result<Json<TenantBan>, ApiError> {
    if user == id.user {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "nobody bans themselves",
        ));
    }
    let now = Timestamp::now();
    let ban = request
        .ban(user.clone(), id.user.clone(), now)
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let book = gw.tenants.bans();
    let max = gw.config.limits.max_tenant_bans;
    if book.holding(kind, &id.tenant, &user, now).is_none()
        && book.count(kind, &id.tenant, now) >= max
    {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("a tenant has at most {max} bans of a kind in force: lift one first"),
        ));
    }
    gw.tenant_bans.put(kind, &id.tenant, &ban).await?;
    // This gateway's sessions and tokens at once; the others (and the
    // writers, for a shadow ban) as the change reaches them.
    book.set(kind, &id.tenant, &user, Some(ban.clone()));
    if kind == BanKind::Tenant {
        gw.tenants.ban_changed(&id.tenant, &user);
    }
    tracing::info!(tenant = %id.tenant, by = %id.user, banned = %user, ?kind, until = ?ban.until, "user banned");
    for ended in book
        .ended(kind, &id.tenant, now)
        .into_iter()
        .take(ENDED_SWEPT_PER_BAN)
    {
        if let Err(e) = gw.tenant_bans.delete(kind, &id.tenant, &ended).await {
            tracing::debug!(error = %e, "deleting an ended ban");
            break;
        }
        book.set(kind, &id.tenant, &ended, None);
    }
    let action = match kind {
        BanKind::Tenant => AuditAction::UserBanned,
        BanKind::Shadow => AuditAction::UserShadowBanned,
    };
    let details = json!({"until": ban.until, "reason": ban.reason});
    audited(gw, id, action, Some(user), details).await?;
    Ok(Json(ban))
}

/// `DELETE /v1/admin/bans/{user}`
pub(super) fn unban_op() -> Operation {
    Operation::delete("Lift a user's tenant ban")
        .describe("Their tokens work again at once. Idempotent. Tenant admins only.")
        .path::<UserId>("user", "The user to let back.")
        .reply_empty(204, "Lifted (or was not banned).")
        .errors(&[403])
}

pub(super) async fn unban(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<UserId>,
) -> Result<StatusCode, ApiError> {
    lift(&gw, &id, BanKind::Tenant, path.get()?).await
}

/// `DELETE /v1/admin/shadow_bans/{user}`
pub(super) fn shadow_unban_op() -> Operation {
    Operation::delete("Lift a user's shadow ban")
        .describe("Their messages from then on reach everyone again; those sent while it held stay their own. Idempotent. Tenant admins only.")
        .path::<UserId>("user", "The user to let be heard.")
        .reply_empty(204, "Lifted (or was not shadow-banned).")
        .errors(&[403])
}

pub(super) async fn shadow_unban(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<UserId>,
) -> Result<StatusCode, ApiError> {
    lift(&gw, &id, BanKind::Shadow, path.get()?).await
}

/// Lifts `user`'s ban of `kind`, and audits it.
async fn lift(
    gw: &Gateway,
    id: &Identity,
    kind: BanKind,
    user: UserId,
) -> Result<StatusCode, ApiError> {
    gw.tenant_bans.delete(kind, &id.tenant, &user).await?;
    gw.tenants.bans().set(kind, &id.tenant, &user, None);
    if kind == BanKind::Tenant {
        gw.tenants.ban_changed(&id.tenant, &user);
    }
    tracing::info!(tenant = %id.tenant, by = %id.user, lifted = %user, ?kind, "ban lifted");
    let action = match kind {
        BanKind::Tenant => AuditAction::UserUnbanned,
        BanKind::Shadow => AuditAction::UserShadowUnbanned,
    };
    audited(gw, id, action, Some(user), serde_json::Value::Null).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The query of `GET /v1/admin/audit`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct AuditQuery {
    /// Entries per page: 50 when absent; at least 1, larger values are
    /// capped at 200.
    limit: Option<usize>,
    /// Where the previous page ended (its `next_cursor`).
    #[schemars(regex(pattern = r"^[0-9]{1,19}-[0-9]{1,15}$"))]
    cursor: Option<String>,
}

/// `GET /v1/admin/audit`
pub(super) fn audit_op() -> Operation {
    Operation::get("The tenant's moderation audit log")
        .describe("Every moderation change, newest first: `{id, at, actor, action, user_id, conversation_id, details}`, where `action` is `blocklist_set` (`details.words`, how many, and `details.mode`), `user_banned` (`details.until`, `details.reason`), `user_unbanned`, `user_shadow_banned` (`details.until`, `details.reason`), `user_shadow_unbanned`, and in a conversation (with its `conversation_id`) `member_muted` (`details.until`), `member_unmuted`, `conversation_frozen` and `conversation_thawed`. `limit` per page (50 by default, at most 200), the next page from `next_cursor`. The log keeps the tenant's last 10,000 changes for 400 days. Webhooks that take `moderation.audit` get each entry as it is recorded. Tenant admins only.")
        .query_fields::<AuditQuery>()
        .reply::<AuditList>(200, "A page of the log.")
        .errors(&[400, 403, 503])
}

pub(super) async fn audit_log(
    State(gw): State<Shared>,
    Admin(id): Admin,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<AuditList>, ApiError> {
    let Query(query) = query?;
    let limit = query.limit.unwrap_or(AUDIT_PAGE).clamp(1, MAX_AUDIT_PAGE);
    let before = match query.cursor.as_deref() {
        Some(c) => Some(
            Cursor::decode(c)
                .ok_or_else(|| ApiError::invalid("cursor is not one this log gave"))?,
        ),
        None => None,
    };
    let (entries, next) = audit::page(&gw.js, &id.tenant, before, limit).await?;
    Ok(Json(AuditList {
        entries,
        next_cursor: next.map(Cursor::encode),
    }))
}
