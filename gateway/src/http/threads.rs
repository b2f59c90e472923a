//! `GET /v1/conversations/{id}/threads` (v1.1): the threads the caller
//! took part in, each with its root, reply count and the caller's unread
//! replies. A thread's own messages page through history with
//! `?thread_id=` (`history.rs`).

use axum::Json;
use axum::extract::State;
use switchboard_protocol::ConversationId;
use switchboard_protocol::conversation::{ThreadList, ThreadView};

use super::extract::PathParams;
use super::extract::Shared;
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

/// `GET /v1/conversations/{id}/threads`
pub(super) fn list_op() -> Operation {
    Operation::get("The caller's threads of a conversation")
        .describe("Threads the caller started (once replied to) or replied in, the most recent reply first; `unread_count` counts the replies after the caller's read mark in the thread (`ack_read` with `thread_id`), at most 999. A thread whose root has moved to the archive is not listed.")
        .path::<ConversationId>("id", "The conversation.")
        .reply::<ThreadList>(200, "The threads.")
        .errors(&[404])
}

pub(super) async fn list(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
) -> Result<Json<ThreadList>, ApiError> {
    let conversation = path.get()?;
    let mut entries = gw
        .store
        .threads(&id.tenant, &conversation, &id.user)
        .await?;
    // Not the threads of roots from before the caller joined (v1.3).
    let first =
        crate::floors::first_seq(gw.store.as_ref(), &id.tenant, &id.user, &conversation).await?;
    entries.retain(|e| e.root.seq >= first);
    let mut roots: Vec<_> = entries.iter().map(|e| e.root.clone()).collect();
    crate::blocks::as_seen_by(gw.store.as_ref(), &id.tenant, &id.user, &mut roots).await?;
    let threads = entries
        .into_iter()
        .zip(roots)
        .map(|(e, root)| ThreadView {
            reply_count: root.thread.as_ref().map_or(0, |t| t.reply_count),
            root,
            unread_count: e.unread,
        })
        .collect();
    Ok(Json(ThreadList { threads }))
}
