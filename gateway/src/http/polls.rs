//! Polls (v1.3) over REST: `POST /v1/conversations/{id}/messages/
//! {message_id}/votes` (what the `vote` frame does, for clients without
//! a socket) and `POST .../close`. Both are commands the poll's writer
//! checks and applies, answering every member with `poll_updated`.

use axum::extract::State;
use axum::http::StatusCode;
use switchboard_nats::envelope::{Command, PinCommand, VoteCommand};
use switchboard_protocol::poll::{MAX_OPTIONS, VoteRequest};
use switchboard_protocol::{ConversationId, ErrorCode, MessageId};

use super::conversations::done;
use super::extract::{JsonBody, PathParams, Shared};
use super::openapi::Operation;
use super::roles::actor;
use crate::auth::Identity;
use crate::error::ApiError;

/// `POST /v1/conversations/{id}/messages/{message_id}/votes`
pub(super) fn vote_op() -> Operation {
    Operation::post("Vote in a poll")
        .describe("Replaces the caller's vote: `option_ids` in any order (one unless the poll is `multiple`); empty retracts it. Idempotent. Members only; refused while muted, in a frozen conversation (but for owners and admins), on a poll from before the caller joined (404), on a deleted message or a closed poll (409). Sends `poll_updated` to the members.")
        .path::<ConversationId>("id", "The conversation.")
        .path::<MessageId>("message_id", "The poll message.")
        .json_body::<VoteRequest>()
        .reply_empty(204, "The vote is stored (or was already).")
        .errors(&[400, 403, 404, 409])
}

pub(super) async fn vote(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<(ConversationId, MessageId)>,
    JsonBody(body): JsonBody<VoteRequest>,
) -> Result<StatusCode, ApiError> {
    let (conversation, message_id) = path.get()?;
    if body.option_ids.len() > MAX_OPTIONS {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!("a vote names at most {MAX_OPTIONS} options"),
        ));
    }
    let command = Command::Vote(VoteCommand {
        by: actor(&gw, &id, conversation)?,
        message_id,
        option_ids: body.option_ids,
    });
    done(gw.run_command(command).await?)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/conversations/{id}/messages/{message_id}/close`
pub(super) fn close_op() -> Operation {
    Operation::post("Close a poll")
        .describe("Its author, an owner or admin of the conversation, or a tenant admin ends the voting early (403 for anyone else); closing a closed poll changes nothing. Sends `poll_updated` with `closed: true`.")
        .path::<ConversationId>("id", "The conversation.")
        .path::<MessageId>("message_id", "The poll message.")
        .reply_empty(204, "Closed (or was).")
        .errors(&[400, 403, 404, 409])
}

pub(super) async fn close(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<(ConversationId, MessageId)>,
) -> Result<StatusCode, ApiError> {
    let (conversation, message_id) = path.get()?;
    let command = Command::ClosePoll(PinCommand {
        by: actor(&gw, &id, conversation)?,
        message_id,
    });
    done(gw.run_command(command).await?)?;
    Ok(StatusCode::NO_CONTENT)
}
