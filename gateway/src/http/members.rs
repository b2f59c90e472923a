//! `/v1/conversations/{id}/members`: adding members and removing one, each
//! a command its conversation's writer applies (and may refuse).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_nats::envelope::{Command, MembersCommand};
use switchboard_protocol::conversation::AddMembers;
use switchboard_protocol::{ConversationId, ConversationView, Timestamp, UserId};
use switchboard_store::StoreError;

use super::conversations::{detail_view, done};
use super::extract::Shared;
use super::extract::{JsonBody, PathParams};
use super::openapi::Operation;
use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;

async fn members_command(
    gw: &Gateway,
    id: &Identity,
    conversation: ConversationId,
    users: Vec<UserId>,
    add: bool,
) -> Result<(), ApiError> {
    let command = MembersCommand {
        command_id: gw.ids.next_id()?,
        tenant: id.tenant.clone(),
        conversation_id: conversation,
        users,
        actor: id.user.clone(),
        device: id.device.clone(),
        actor_is_admin: id.admin,
        at: Timestamp::now(),
    };
    let command = if add {
        Command::AddMembers(command)
    } else {
        Command::RemoveMembers(command)
    };
    done(gw.run_command(command).await?)?;
    Ok(())
}

/// `POST /v1/conversations/{id}/members`
pub(super) fn add_op() -> Operation {
    Operation::post("Add members")
        .describe("Any member may add members to a group or channel; direct conversations keep their two members (409). Adds a system message. A user may be put into at most the tenant's `unsolicited_groups_per_day` groups a day (20 by default) by people they have not spoken with: past it 403 `forbidden`, naming them; tenant admins are not limited.")
        .path::<ConversationId>("id", "The conversation.")
        .json_body::<AddMembers>()
        .reply::<ConversationView>(200, "The conversation after the change.")
        .errors(&[404, 409])
}

pub(super) async fn add(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
    JsonBody(body): JsonBody<AddMembers>,
) -> Result<Json<ConversationView>, ApiError> {
    let conversation = path.get()?;
    // The limit is on the list, as the OpenAPI document says (`maxItems`);
    // `user_id` adds one.
    let listed = body.members.len();
    let mut users = body.members;
    users.extend(body.user_id);
    if users.is_empty() {
        return Err(ApiError::invalid(
            "give \"members\": [user ids] or \"user_id\"",
        ));
    }
    if listed > gw.config.limits.max_members_per_request {
        return Err(ApiError::invalid(format!(
            "at most {} members per request",
            gw.config.limits.max_members_per_request
        )));
    }
    gw.rates.members_added(&id, users.len())?;
    let added = users[0].clone();
    members_command(&gw, &id, conversation.clone(), users, true).await?;
    let detail = match gw
        .store
        .conversation(&id.tenant, &conversation, &id.user)
        .await
    {
        // A tenant admin adds members without being one: the conversation
        // is read as a user it has now.
        Err(StoreError::NotAMember) if id.admin => {
            gw.store
                .conversation(&id.tenant, &conversation, &added)
                .await?
        }
        read => read?,
    };
    Ok(Json(detail_view(detail, &id.user)))
}

/// `DELETE /v1/conversations/{id}/members/{user}`
pub(super) fn remove_op() -> Operation {
    Operation::delete("Remove a member")
        .describe("Anyone may leave; removing someone else takes an owner or admin (an owner, to remove an owner) or a tenant admin. Adds a system message.")
        .path::<ConversationId>("id", "The conversation.")
        .path::<UserId>("user", "The member to remove.")
        .reply_empty(204, "Removed (or was not a member).")
        .errors(&[404, 409])
}

pub(super) async fn remove(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<(ConversationId, UserId)>,
) -> Result<StatusCode, ApiError> {
    let (conversation, user) = path.get()?;
    members_command(&gw, &id, conversation, vec![user], false).await?;
    Ok(StatusCode::NO_CONTENT)
}
