//! A member's role and own settings (v1.1): `PATCH
//! /v1/conversations/{id}/members/{user}` and `GET/PUT
//! /v1/conversations/{id}/settings`. Each change is a command its
//! conversation's writer applies (and may refuse), so every gateway and
//! every device sees one order.

use axum::Json;
use axum::extract::State;
use switchboard_nats::envelope::{Command, RoleCommand, SettingsCommand};
use switchboard_protocol::membership::ChangeRole;
use switchboard_protocol::{ConversationId, ConversationView, MemberSettings, UserId};

use super::conversations::{detail_view, done};
use super::extract::Shared;
use super::extract::{JsonBody, PathParams};
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

pub(super) use crate::commands::actor;

/// `PATCH /v1/conversations/{id}/members/{user}`
pub(super) fn change_role_op() -> Operation {
    Operation::patch("Change a member's role")
        .describe("Owners and admins change roles; only an owner makes owners or changes an owner's role (403 otherwise). A group or channel keeps at least one owner (409 when the last one would go); a direct conversation has no roles (409). Told to every member as a `role_changed` system message.")
        .path::<ConversationId>("id", "The conversation.")
        .path::<UserId>("user", "The member.")
        .json_body::<ChangeRole>()
        .reply::<ConversationView>(200, "The conversation after the change.")
        .errors(&[404, 409])
}

pub(super) async fn change_role(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<(ConversationId, UserId)>,
    JsonBody(body): JsonBody<ChangeRole>,
) -> Result<Json<ConversationView>, ApiError> {
    let (conversation, user) = path.get()?;
    let command = Command::SetRole(RoleCommand {
        by: actor(&gw, &id, conversation.clone())?,
        user,
        role: body.role,
    });
    done(gw.run_command(command).await?)?;
    let detail = gw
        .store
        .conversation(&id.tenant, &conversation, &id.user)
        .await?;
    Ok(Json(detail_view(detail, &id.user)))
}

/// `GET /v1/conversations/{id}/settings`
pub(super) fn settings_op() -> Operation {
    Operation::get("The caller's settings of a conversation")
        .path::<ConversationId>("id", "The conversation.")
        .reply::<MemberSettings>(200, "The settings.")
        .errors(&[404])
}

pub(super) async fn settings(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
) -> Result<Json<MemberSettings>, ApiError> {
    let conversation = path.get()?;
    let detail = gw
        .store
        .conversation(&id.tenant, &conversation, &id.user)
        .await?;
    let mine = detail
        .members
        .into_iter()
        .find(|m| m.user_id == id.user)
        .map(|m| m.settings)
        .unwrap_or_default();
    Ok(Json(mine))
}

/// `PUT /v1/conversations/{id}/settings`
pub(super) fn put_settings_op() -> Operation {
    Operation::put("Set the caller's settings of a conversation")
        .describe("`notifications`: which messages push (`all`, `mentions`: only those that mention the caller, mention all, or reply to them; `none`); `muted_until`: no push at all until then. The whole settings object: an absent field takes its default. The caller's other devices get a `settings_changed` frame.")
        .path::<ConversationId>("id", "The conversation.")
        .json_body::<MemberSettings>()
        .reply::<MemberSettings>(200, "The settings now.")
        .errors(&[404])
}

pub(super) async fn put_settings(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
    JsonBody(body): JsonBody<MemberSettings>,
) -> Result<Json<MemberSettings>, ApiError> {
    let conversation = path.get()?;
    let command = Command::Settings(SettingsCommand {
        by: actor(&gw, &id, conversation)?,
        settings: body.clone(),
    });
    done(gw.run_command(command).await?)?;
    Ok(Json(body))
}
