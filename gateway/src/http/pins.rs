//! Pinned messages (v1.1): `GET/POST /v1/conversations/{id}/pins` and
//! `DELETE /v1/conversations/{id}/pins/{message_id}`. Pinning is a
//! command the conversation's writer applies: a system message and a
//! `pins_changed` event for the members.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_nats::envelope::{Command, PinCommand};
use switchboard_protocol::conversation::{Pin, PinList, PinMessage};
use switchboard_protocol::{ConversationId, MessageId};
use switchboard_store::{ConversationKey, MessageKey};

use super::conversations::done;
use super::extract::Shared;
use super::extract::{JsonBody, PathParams};
use super::openapi::Operation;
use super::roles::actor;
use crate::auth::Identity;
use crate::error::ApiError;

/// `GET /v1/conversations/{id}/pins`
pub(super) fn list_op() -> Operation {
    Operation::get("The pinned messages")
        .describe("Newest pin first, at most 50; each with the message as it is now (null once deleted or archived).")
        .path::<ConversationId>("id", "The conversation.")
        .reply::<PinList>(200, "The pins.")
        .errors(&[404])
}

pub(super) async fn list(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
) -> Result<Json<PinList>, ApiError> {
    let conversation = path.get()?;
    // Membership first: the pins themselves are read unchecked.
    gw.store
        .members(&id.tenant, &conversation, &id.user)
        .await?;
    let key = ConversationKey::new(id.tenant.clone(), conversation.clone());
    let rows = gw.store.pins(&key).await?;
    let keys = rows
        .iter()
        .map(|p| MessageKey {
            tenant: id.tenant.clone(),
            conversation_id: conversation.clone(),
            message_id: p.message_id,
        })
        .collect();
    let mut messages: Vec<_> = gw.store.find_messages(keys).await?.into_iter().collect();
    let mut live: Vec<_> = messages.iter().flatten().cloned().collect();
    crate::blocks::as_seen_by(gw.store.as_ref(), &id.tenant, &id.user, &mut live).await?;
    // Each message as the caller sees it, none where they may not.
    for m in messages.iter_mut() {
        *m = m
            .take()
            .and_then(|m| live.iter().find(|l| l.seq == m.seq).cloned());
    }
    // Not the pins of messages from before the caller joined (v1.3).
    let first =
        crate::floors::first_seq(gw.store.as_ref(), &id.tenant, &id.user, &conversation).await?;
    let pins = rows
        .into_iter()
        .zip(messages)
        .filter(|(_, message)| message.as_ref().is_none_or(|m| m.seq >= first))
        .map(|(p, message)| Pin {
            message_id: p.message_id,
            by: p.by,
            pinned_at: p.at,
            message: message.filter(|m| m.deleted_at.is_none()),
        })
        .collect();
    Ok(Json(PinList { pins }))
}

/// `POST /v1/conversations/{id}/pins`
pub(super) fn pin_op() -> Operation {
    Operation::post("Pin a message")
        .describe("Owners and admins pin (in a direct conversation, either member); at most 50 pins (409 past it); a pinned message stays as it is. Adds a `message_pinned` system message and sends `pins_changed`.")
        .path::<ConversationId>("id", "The conversation.")
        .json_body::<PinMessage>()
        .reply_empty(204, "Pinned (or was).")
        .errors(&[404, 409])
}

pub(super) async fn pin(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
    JsonBody(body): JsonBody<PinMessage>,
) -> Result<StatusCode, ApiError> {
    let conversation = path.get()?;
    let command = Command::Pin(PinCommand {
        by: actor(&gw, &id, conversation)?,
        message_id: body.message_id,
    });
    done(gw.run_command(command).await?)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /v1/conversations/{id}/pins/{message_id}`
pub(super) fn unpin_op() -> Operation {
    Operation::delete("Unpin a message")
        .describe("Who may pin may unpin. Adds a `message_unpinned` system message and sends `pins_changed`.")
        .path::<ConversationId>("id", "The conversation.")
        .path::<MessageId>("message_id", "The message.")
        .reply_empty(204, "Unpinned (or was not pinned).")
        .errors(&[404])
}

pub(super) async fn unpin(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<(ConversationId, MessageId)>,
) -> Result<StatusCode, ApiError> {
    let (conversation, message_id) = path.get()?;
    let command = Command::Unpin(PinCommand {
        by: actor(&gw, &id, conversation)?,
        message_id,
    });
    done(gw.run_command(command).await?)?;
    Ok(StatusCode::NO_CONTENT)
}
