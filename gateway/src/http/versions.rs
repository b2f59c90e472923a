//! `GET /v1/conversations/{id}/messages/{message_id}/versions`: every
//! version of an edited message.

use axum::Json;
use axum::extract::State;
use switchboard_protocol::{ConversationId, MessageId, MessageVersions};

use super::extract::PathParams;
use super::extract::Shared;
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

/// `GET /v1/conversations/{id}/messages/{message_id}/versions`
pub(super) fn list_op() -> Operation {
    Operation::get("The versions of an edited message")
        .describe("The original (version 1) and every edit, oldest first. Empty for a message never edited, and for a deleted one (no content is served after a delete).")
        .path::<ConversationId>("id", "The conversation.")
        .path::<MessageId>("message_id", "The message.")
        .reply::<MessageVersions>(200, "The versions.")
        .errors(&[404])
}

/// Every version of an edited message, the original first (none for a
/// message never edited, or deleted).
pub(super) async fn list(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<(ConversationId, MessageId)>,
) -> Result<Json<MessageVersions>, ApiError> {
    let (conversation, message_id) = path.get()?;
    let versions = gw
        .store
        .versions(&id.tenant, &conversation, &id.user, message_id)
        .await?;
    // A message from before the caller joined is none of theirs, nor a
    // shadow-banned sender's not theirs (v1.3).
    let first =
        crate::floors::first_seq(gw.store.as_ref(), &id.tenant, &id.user, &conversation).await?;
    let key = switchboard_store::MessageKey {
        tenant: id.tenant.clone(),
        conversation_id: conversation.clone(),
        message_id,
    };
    let message = gw.store.find_messages(vec![key]).await?.pop().flatten();
    let hidden = match &message {
        Some(m) => m.seq < first || !m.seen_by(&id.user),
        None => first > 1,
    };
    if hidden {
        return Err(ApiError::new(
            switchboard_protocol::ErrorCode::NotFound,
            "no such message",
        ));
    }
    Ok(Json(MessageVersions {
        message_id,
        versions,
    }))
}
