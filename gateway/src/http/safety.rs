//! Safety (v1.2): a user's blocks (`PUT/DELETE /v1/blocks/{user}`, `GET
//! /v1/blocks`), a conversation's bans (`POST/GET
//! /v1/conversations/{id}/bans`, `DELETE .../bans/{user}`) and the
//! settings that affect every member (`PATCH /v1/conversations/{id}`).
//! Every change is a command its conversation's writer checks and
//! applies: a block goes to the pair's direct conversation, whose writer
//! keeps the two apart from then on.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_nats::envelope::{
    BanCommand, BlockCommand, Command, PolicyCommand, direct_conversation_id,
};
use switchboard_protocol::safety::{
    Ban, BanList, BanRequest, Block, BlockAction, BlockList, ConversationPatch,
};
use switchboard_protocol::{ConversationId, ConversationView, ErrorCode, Timestamp, UserId};
use switchboard_store::ConversationKey;

use super::conversations::{detail_view, done};
use super::extract::{JsonBody, PathParams, Shared};
use super::openapi::Operation;
use super::roles::actor;
use crate::auth::Identity;
use crate::error::ApiError;

/// Blocks one user keeps at most: the list is read whole at every
/// history page and connection.
pub const MAX_BLOCKS: usize = 1000;

/// `GET /v1/blocks`
pub(super) fn list_blocks_op() -> Operation {
    Operation::get("The users the caller blocks")
        .describe("Newest first, at most 1000.")
        .reply::<BlockList>(200, "The blocks.")
}

pub(super) async fn list_blocks(
    State(gw): State<Shared>,
    id: Identity,
) -> Result<Json<BlockList>, ApiError> {
    let blocks = gw.store.blocks(&id.tenant, &id.user).await?;
    Ok(Json(BlockList { blocks }))
}

/// `PUT /v1/blocks/{user}`
pub(super) fn block_op() -> Operation {
    Operation::put("Block a user")
        .describe("From then on neither of the two writes in their direct conversation, nor opens one (403 `forbidden`); in groups the blocked user's messages still flow, flagged `blocked_sender: true` for the caller in history, backlog and events. The caller's devices get `blocks_changed`. Idempotent. Nobody blocks themselves (403). At most 1000 blocks (409 past it).")
        .path::<UserId>("user", "The user to block.")
        .reply::<Block>(200, "Blocked (or was: then the time is the block's).")
        .errors(&[403, 409])
}

pub(super) async fn block(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<UserId>,
) -> Result<Json<Block>, ApiError> {
    let user = path.get()?;
    let blocks = gw.store.blocks(&id.tenant, &id.user).await?;
    if let Some(existing) = blocks.iter().find(|b| b.user_id == user) {
        return Ok(Json(existing.clone()));
    }
    if blocks.len() >= MAX_BLOCKS {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("a user blocks at most {MAX_BLOCKS} users: unblock one first"),
        ));
    }
    let command = block_command(&gw, &id, user.clone(), BlockAction::Block)?;
    let blocked_at = command.by.at;
    done(gw.run_command(Command::Block(command)).await?)?;
    Ok(Json(Block {
        user_id: user,
        blocked_at,
    }))
}

/// `DELETE /v1/blocks/{user}`
pub(super) fn unblock_op() -> Operation {
    Operation::delete("Unblock a user")
        .describe("The caller's devices get `blocks_changed`. Idempotent.")
        .path::<UserId>("user", "The user to unblock.")
        .reply_empty(204, "Unblocked (or was not blocked).")
        .errors(&[403])
}

pub(super) async fn unblock(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<UserId>,
) -> Result<StatusCode, ApiError> {
    let user = path.get()?;
    let command = block_command(&gw, &id, user, BlockAction::Unblock)?;
    done(gw.run_command(Command::Block(command)).await?)?;
    Ok(StatusCode::NO_CONTENT)
}

/// A block or unblock, for the writer of the pair's direct conversation.
fn block_command(
    gw: &Shared,
    id: &Identity,
    user: UserId,
    action: BlockAction,
) -> Result<BlockCommand, ApiError> {
    if user == id.user {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "you cannot block yourself",
        ));
    }
    let conversation = direct_conversation_id(&id.user, &user)
        .ok_or_else(|| ApiError::invalid("no direct conversation id for this pair"))?;
    Ok(BlockCommand {
        by: actor(gw, id, conversation)?,
        user,
        action,
    })
}

/// `GET /v1/conversations/{id}/bans`
pub(super) fn list_bans_op() -> Operation {
    Operation::get("The bans in force")
        .describe("Owners and admins (and tenant admins) only (403 otherwise). Newest first; ended bans are not listed.")
        .path::<ConversationId>("id", "The conversation.")
        .reply::<BanList>(200, "The bans.")
        .errors(&[403, 404])
}

pub(super) async fn list_bans(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
) -> Result<Json<BanList>, ApiError> {
    let conversation = path.get()?;
    require_moderator(
        &gw,
        &id,
        &conversation,
        "only owners and admins see the bans",
    )
    .await?;
    let key = ConversationKey::new(id.tenant.clone(), conversation);
    let now = Timestamp::now();
    let bans = gw
        .store
        .bans(&key)
        .await?
        .into_iter()
        .filter(|b| b.holds_at(now))
        .collect();
    Ok(Json(BanList { bans }))
}

/// Refuses (`refusal`) a caller who is neither an owner or admin of the
/// conversation nor a tenant admin.
pub(super) async fn require_moderator(
    gw: &Shared,
    id: &Identity,
    conversation: &ConversationId,
    refusal: &'static str,
) -> Result<(), ApiError> {
    if id.admin {
        return Ok(());
    }
    let detail = gw
        .store
        .conversation(&id.tenant, conversation, &id.user)
        .await?;
    if moderates(id, &detail) {
        Ok(())
    } else {
        Err(ApiError::new(ErrorCode::Forbidden, refusal))
    }
}

/// Whether `id` moderates the conversation `detail` shows: a tenant
/// admin, or one of its owners and admins.
pub(super) fn moderates(id: &Identity, detail: &switchboard_store::ConversationDetail) -> bool {
    id.admin
        || detail
            .members
            .iter()
            .any(|m| m.user_id == id.user && m.role.moderates())
}

/// `POST /v1/conversations/{id}/bans`
pub(super) fn ban_op() -> Operation {
    Operation::post("Ban a user")
        .describe("Owners and admins (and tenant admins); an admin bans members only, nobody bans an owner or themselves (403); an `until` in the past is refused (409). Takes the user out if a member and keeps them from being added again (403 `forbidden`) until the ban is lifted or `until` passes. A `member_banned` system message tells the members, the banned user included. At most 1000 bans per conversation (409 past it); none in a direct conversation (409: block instead).")
        .path::<ConversationId>("id", "The conversation.")
        .json_body::<BanRequest>()
        .reply::<Ban>(200, "The ban.")
        .errors(&[400, 403, 404, 409])
}

pub(super) async fn ban(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
    JsonBody(body): JsonBody<BanRequest>,
) -> Result<Json<Ban>, ApiError> {
    let conversation = path.get()?;
    let by = actor(&gw, &id, conversation)?;
    let ban = Ban {
        user_id: body.user_id.clone(),
        by: id.user.clone(),
        banned_at: by.at,
        until: body.until,
    };
    let command = Command::Ban(BanCommand {
        by,
        user: body.user_id,
        until: body.until,
    });
    done(gw.run_command(command).await?)?;
    Ok(Json(ban))
}

/// `DELETE /v1/conversations/{id}/bans/{user}`
pub(super) fn unban_op() -> Operation {
    Operation::delete("Lift a ban")
        .describe("Owners and admins (and tenant admins). The user may be added again; they are not added back. A `member_unbanned` system message tells the members.")
        .path::<ConversationId>("id", "The conversation.")
        .path::<UserId>("user", "The banned user.")
        .reply_empty(204, "Lifted (or there was none).")
        .errors(&[403, 404])
}

pub(super) async fn unban(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<(ConversationId, UserId)>,
) -> Result<StatusCode, ApiError> {
    let (conversation, user) = path.get()?;
    let command = Command::Unban(BanCommand {
        by: actor(&gw, &id, conversation)?,
        user,
        until: None,
    });
    done(gw.run_command(command).await?)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PATCH /v1/conversations/{id}`
pub(super) fn patch_op() -> Operation {
    Operation::patch("Change the settings that affect every member")
        .describe("Owners and admins (and tenant admins; in a direct conversation, either member). `slow_mode_secs` (0 to 21600, 0 = off): a plain member sends once per that many seconds, an early send gets `rate_limited` with `retry_after_ms`; not in direct conversations (409). `retention_days` (1 to 36500, or null) and `disappearing_secs` (5 to 31536000, or null): how long messages live. `custom` (v1.3): the conversation's own fields, each key given set, a key given as null removed, the others kept; at most 4096 bytes of JSON as a whole after the change (400 past it). `frozen` (v1.3; not in direct conversations, 409): `true` stops every post, reply, reaction, edit and member change but by owners and admins (403 `forbidden`), `false` thaws; audited. An absent field stays as it is. A `conversation_updated` system message carries the settings as they are now (and `custom`, when it changed).")
        .path::<ConversationId>("id", "The conversation.")
        .json_body::<ConversationPatch>()
        .reply::<ConversationView>(200, "The conversation after the change.")
        .errors(&[400, 403, 404, 409])
}

pub(super) async fn patch(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
    JsonBody(body): JsonBody<ConversationPatch>,
) -> Result<Json<ConversationView>, ApiError> {
    let conversation = path.get()?;
    body.check().map_err(ApiError::invalid)?;
    let command = Command::SetPolicy(PolicyCommand {
        by: actor(&gw, &id, conversation.clone())?,
        patch: body,
    });
    // Freezing and thawing: the writer records them in the audit log.
    done(gw.run_command(command).await?)?;
    let detail = gw
        .store
        .conversation(&id.tenant, &conversation, &id.user)
        .await?;
    Ok(Json(detail_view(detail, &id.user)))
}
