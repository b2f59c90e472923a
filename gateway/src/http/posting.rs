//! `POST /v1/conversations/{id}/messages` (v1.2): the server API's send,
//! for backends and bots (`"bot": true` tokens) that hold no socket. It
//! passes what a socket's send passes (`screen.rs`) and the same writer,
//! and answers with the `ack`'s fields; a retry with the same
//! `client_msg_id` is answered with the message first stored.

use axum::Json;
use axum::extract::State;
use switchboard_nats::envelope::SendCommand;
use switchboard_protocol::server_api::{PostMessage, PostedMessage};
use switchboard_protocol::{ConversationId, ErrorCode, ServerFrame, Timestamp};

use super::extract::{JsonBody, PathParams, Shared};
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::scheduling::ToSchedule;

/// Content errors over REST: a body, not a frame, was wrong.
fn body_error(e: ApiError) -> ApiError {
    match e.code {
        ErrorCode::InvalidFrame => ApiError::new(ErrorCode::InvalidRequest, e.message),
        _ => e,
    }
}

/// `POST /v1/conversations/{id}/messages`
pub(super) fn post_op() -> Operation {
    Operation::post("Send a message")
        .describe("Sends as the caller, as `send_message` does over the socket: the same checks, moderation, rates (the caller's per-user message rate and the tenant's quota, besides the REST request rate) and writer. Idempotent by `client_msg_id`: a retry answers the message first stored and stores nothing. Answers the `ack`'s fields once the message is committed; `content` is there only when a moderation plugin rewrote it. With `send_at` (at most 30 days ahead) it is kept until then and answered at once with `status: \"scheduled\"` and its `scheduled_id` (at most 100 waiting per user: 429 `quota_exceeded`). 503 `unavailable` when the answer does not come in time: retry with the same `client_msg_id`.")
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
    if let Some(send_at) = body.send_at {
        let send = ToSchedule {
            conversation: conversation.clone(),
            client_msg_id: body.client_msg_id.clone(),
            content: body.content,
            options,
            send_at,
        };
        let scheduled_id = gw.schedule_send(&id, send).await.map_err(body_error)?;
        let ack = ServerFrame::scheduled(body.client_msg_id, conversation, scheduled_id, send_at);
        return posted(ack);
    }
    let screened = gw
        .screen(&id, &conversation, body.content, &options)
        .await
        .map_err(body_error)?;
    let stored_as = screened.rewritten.then(|| screened.content.clone());
    let send = SendCommand {
        tenant: id.tenant.clone(),
        conversation_id: conversation,
        sender: id.user.clone(),
        device: id.device.clone(),
        client_msg_id: body.client_msg_id,
        content: screened.content,
        received_at: Timestamp::now(),
        options,
    };
    crate::metrics::send_accepted();
    match gw.run_send(&send, stored_as).await? {
        ServerFrame::Error {
            code,
            message,
            retry_after_ms,
            ..
        } => Err(ApiError::new(code, message).retry_after(retry_after_ms)),
        ack => posted(ack),
    }
}

/// The answer of a send: its `ack`'s fields.
fn posted(ack: ServerFrame) -> Result<Json<PostedMessage>, ApiError> {
    ack.into_ack()
        .map(Json)
        .ok_or_else(|| ApiError::new(ErrorCode::Internal, "a send's answer is not an ack"))
}
