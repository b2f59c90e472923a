//! Steps several rules share: refusing a write to a conversation whose
//! bucket this very commit archived, and writing a changed message back
//! with fresh inbox entries.

use switchboard_protocol::{Message, Timestamp};

use super::commit::{Commit, Placement, Write, conflict};
use crate::{ConversationKey, StoreResult};

/// Writes a changed message back, and into every member device's inbox
/// (its sender's alone for a shadow-banned sender's), the entry as fresh
/// as the change (`at`), for expiry.
pub(crate) async fn store_update<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    m: &Message,
    inbox: bool,
    at: Timestamp,
) -> StoreResult<()> {
    view.write(Write::Message {
        c,
        m,
        placement: Placement::Changed,
    })
    .await?;
    if inbox {
        for (user, devices) in view.recipients(c).await? {
            if !m.shadow_reaches(&user) {
                continue;
            }
            for device in devices {
                view.write(Write::Inbox {
                    c,
                    user: &user,
                    device: &device,
                    seq: m.seq,
                    at,
                })
                .await?;
            }
        }
    }
    Ok(())
}

/// Refuses a write to a conversation whose rows this commit removed.
pub(crate) fn check_not_archived_here<C: Commit>(view: &C, c: &ConversationKey) -> StoreResult<()> {
    if view.archived_here(c) {
        return Err(conflict(
            "a bucket of the conversation was archived in this commit",
        ));
    }
    Ok(())
}

/// `user` a member from `at`; nothing changes for a member already.
pub(super) async fn add_member<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    user: &str,
    at: Timestamp,
) -> StoreResult<()> {
    if view.is_member(c, user).await? {
        return Ok(());
    }
    view.write(Write::Member {
        c,
        user,
        joined: Some(at),
    })
    .await
}
