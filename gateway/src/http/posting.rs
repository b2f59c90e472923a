//! `POST /v1/conversations/{id}/messages` (v1.2): the server API's send,
//! for backends and bots (`"bot": true` tokens) that hold no socket. It
//! passes what a socket's send passes (`screen.rs`) and the same writer,
//! and answers with the `ack`'s fields; a retry with the same
//! `client_msg_id` is answered with the message first stored.

use axum::Json;
use axum::extract::State;
use switchboard_nats::envelope::{Command, CommandReply, SendCommand};
use switchboard_protocol::server_api::{PostMessage, PostedMessage};
use switchboard_protocol::{ConversationId, ErrorCode, Timestamp};
use switchboard_store::SentKey;

use super::extract::{JsonBody, PathParams, Shared};
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

/// `POST /v1/conversations/{id}/messages`
pub(super) fn post_op() -> Operation {
    Operation::post("Send a message")
        .describe("Sends as the caller, as `send_message` does over the socket: the same checks, moderation, rates (the caller's per-user message rate and the tenant's quota, besides the REST request rate) and writer. Idempotent by `client_msg_id`: a retry answers the message first stored and stores nothing. Answers the `ack`'s fields once the message is committed; `content` is there only when a moderation plugin rewrote it. 503 `unavailable` when the answer does not come in time: retry with the same `client_msg_id`.")
        .path::<ConversationId>("id", "The conversation.")
        .json_body::<PostMessage>()
        .reply::<PostedMessage>(200, "Stored (now, or by an earlier request with this client_msg_id).")
        .errors(&[400, 403, 404, 413, 429, 503])
}

pub(super) async fn post(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
    JsonBody(body): JsonBody<PostMessage>,
) -> Result<Json<PostedMessage>, ApiError> {
    let conversation = path.get()?;
    let quotas = gw.quotas.of(&id.tenant);
    gw.rates.user_message(&id, &quotas)?;
    let options = body.options();
    let screened = gw
        .screen_send(&id, &conversation, body.content, &options)
        .await
        .map_err(|e| match e.code {
            // A body, not a frame, was wrong.
            ErrorCode::InvalidFrame => ApiError::new(ErrorCode::InvalidRequest, e.message),
            _ => e,
        })?;
    let command = Command::Send(SendCommand {
        tenant: id.tenant.clone(),
        conversation_id: conversation.clone(),
        sender: id.user.clone(),
        device: id.device.clone(),
        client_msg_id: body.client_msg_id.clone(),
        content: screened.content,
        received_at: Timestamp::now(),
        options,
    });
    let sent = SentKey {
        tenant: id.tenant.clone(),
        conversation_id: conversation,
        sender: id.user.clone(),
        client_msg_id: body.client_msg_id,
    };
    crate::metrics::send_accepted();
    match gw.run_send(&command, sent).await? {
        CommandReply::Sent { message } => Ok(Json(PostedMessage {
            client_msg_id: message.client_msg_id,
            conversation_id: message.conversation_id,
            message_id: message.message_id,
            seq: message.seq,
            status: "sent".to_owned(),
            content: if screened.rewritten {
                message.content
            } else {
                None
            },
        })),
        CommandReply::Refused {
            code,
            message,
            retry_after_ms,
        } => Err(ApiError::new(code, message).retry_after(retry_after_ms)),
        CommandReply::Done { .. } => Err(ApiError::new(
            ErrorCode::Internal,
            "the writer answered a send as another command",
        )),
    }
}
