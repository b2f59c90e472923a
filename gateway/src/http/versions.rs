//! `GET /v1/conversations/{id}/messages/{message_id}/versions`: every
//! version of an edited message.

use axum::Json;
use axum::extract::State;
use switchboard_protocol::{ConversationId, MessageId, MessageVersions};

use super::Shared;
use super::extract::PathParams;
use crate::auth::Identity;
use crate::error::ApiError;

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
    Ok(Json(MessageVersions {
        message_id,
        versions,
    }))
}
