//! What a member would call unread (issue 43, a v1.2 promise): the
//! messages of the main timeline that are not system messages and not
//! deleted. Each is a row of the conversation's `counted` index (its
//! seq and sender), written as it is stored and removed as it is deleted,
//! expires or is erased; a member's `unread_count` is the rows after
//! their read mark whose sender is neither them nor someone they block
//! (each store's `unread_count`), so it never reads the messages.

use switchboard_protocol::{Content, Message};

use super::commit::{Commit, Write};
use crate::{ConversationKey, StoreResult};

/// Whether `m` counts toward its members' unread counts.
pub fn counts(m: &Message) -> bool {
    m.thread_id.is_none()
        && m.deleted_at.is_none()
        && !matches!(m.content, Some(Content::System(_)) | None)
}

/// `m` was stored: counted if it counts.
pub(super) async fn count<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    m: &Message,
) -> StoreResult<()> {
    if !counts(m) {
        return Ok(());
    }
    view.write(Write::Counted {
        c,
        seq: m.seq,
        sender: Some(m.sender_id.as_str()),
    })
    .await
}

/// Message `seq` went (deleted, expired, erased): it counts no more.
pub(super) async fn uncount<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    seq: u64,
) -> StoreResult<()> {
    view.write(Write::Counted {
        c,
        seq,
        sender: None,
    })
    .await
}
