//! A conversation's mutes (v1.3): `POST /v1/conversations/{id}/mutes`,
//! `DELETE .../mutes/{user}`, `GET .../mutes`. A mute is a command its
//! conversation's writer checks and applies, as it checks it at every
//! post, reaction, reply and edit (`worker/src/sequencer/moderation.rs`);
//! each change is audited.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_nats::envelope::{BanCommand, Command};
use switchboard_protocol::moderation::{Mute, MuteList, MuteRequest};
use switchboard_protocol::{ConversationId, ErrorCode, Timestamp, UserId};

use super::conversations::done;
use super::extract::{JsonBody, PathParams, Shared};
use super::openapi::Operation;
use super::roles::actor;
use super::safety::moderates;
use crate::auth::Identity;
use crate::error::ApiError;

/// `GET /v1/conversations/{id}/mutes`
pub(super) fn list_op() -> Operation {
    Operation::get("A conversation's mutes")
        .describe("The mutes in force, newest first. Owners and admins (and tenant admins) only.")
        .path::<ConversationId>("id", "The conversation.")
        .reply::<MuteList>(200, "The mutes.")
        .errors(&[403, 404])
}

pub(super) async fn list(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
) -> Result<Json<MuteList>, ApiError> {
    let conversation = path.get()?;
    // One read: the members (who may see the mutes) and the mutes.
    let detail = gw
        .store
        .conversation(&id.tenant, &conversation, &id.user)
        .await?;
    if !moderates(&id, &detail) {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "only owners and admins see the mutes",
        ));
    }
    let now = Timestamp::now();
    let mutes = detail
        .record
        .mutes
        .into_iter()
        .filter(|m| m.holds_at(now))
        .collect();
    Ok(Json(MuteList { mutes }))
}

/// `POST /v1/conversations/{id}/mutes`
pub(super) fn mute_op() -> Operation {
    Operation::post("Mute a member")
        .describe("Owners and admins (and tenant admins). The member stays and reads, but every post, thread reply, reaction and edit of theirs is refused with 403 `forbidden`, whichever way it comes (socket, REST, a scheduled send at its time), until `until` (in the future; 400 otherwise) or until lifted. Muting again replaces the mute. Not an owner or admin (403), not a non-member (404), not in a direct conversation (409: block instead). At most 1000 mutes in force per conversation (409 past it). Audited (`member_muted`).")
        .path::<ConversationId>("id", "The conversation.")
        .json_body::<MuteRequest>()
        .reply::<Mute>(200, "The mute.")
        .errors(&[400, 403, 404, 409])
}

pub(super) async fn mute(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
    JsonBody(body): JsonBody<MuteRequest>,
) -> Result<Json<Mute>, ApiError> {
    let conversation = path.get()?;
    let by = actor(&gw, &id, conversation.clone())?;
    let mute = Mute {
        user_id: body.user_id.clone(),
        by: id.user.clone(),
        muted_at: by.at,
        until: body.until,
    };
    let command = Command::Mute(BanCommand {
        by,
        user: body.user_id.clone(),
        until: body.until,
    });
    // The writer records it in the audit log, before it answers.
    done(gw.run_command(command).await?)?;
    Ok(Json(mute))
}

/// `DELETE /v1/conversations/{id}/mutes/{user}`
pub(super) fn unmute_op() -> Operation {
    Operation::delete("Lift a mute")
        .describe("Owners and admins (and tenant admins). The member posts again at once. Idempotent. Audited (`member_unmuted`) when there was a mute.")
        .path::<ConversationId>("id", "The conversation.")
        .path::<UserId>("user", "The muted member.")
        .reply_empty(204, "Lifted (or there was none).")
        .errors(&[403, 404, 409])
}

pub(super) async fn unmute(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<(ConversationId, UserId)>,
) -> Result<StatusCode, ApiError> {
    let (conversation, user) = path.get()?;
    let command = Command::Unmute(BanCommand {
        by: actor(&gw, &id, conversation.clone())?,
        user: user.clone(),
        until: None,
    });
    done(gw.run_command(command).await?)?;
    Ok(StatusCode::NO_CONTENT)
}
