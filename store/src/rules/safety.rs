//! The rules of v1.2's safety rows: a conversation's policy and bans, and
//! the blocks between users. Who may set them is the writer's decision;
//! here a conversation must exist, and the rows are written.

use switchboard_protocol::safety::{Ban, ConversationPolicy};
use switchboard_protocol::{TenantId, Timestamp, UserId};

use super::commit::Commit;
use crate::{ConversationKey, StoreError, StoreResult};

async fn existing<C: Commit>(view: &mut C, key: &ConversationKey) -> StoreResult<()> {
    match view.last_seq(key).await? {
        Some(_) => Ok(()),
        None => Err(StoreError::NotFound),
    }
}

pub(super) async fn set_policy<C: Commit>(
    view: &mut C,
    key: &ConversationKey,
    policy: &ConversationPolicy,
) -> StoreResult<()> {
    existing(view, key).await?;
    view.put_policy(key, policy).await
}

pub(super) async fn ban<C: Commit>(
    view: &mut C,
    key: &ConversationKey,
    ban: &Ban,
) -> StoreResult<()> {
    existing(view, key).await?;
    view.put_ban(key, ban).await
}

pub(super) async fn unban<C: Commit>(
    view: &mut C,
    key: &ConversationKey,
    user: &UserId,
) -> StoreResult<()> {
    existing(view, key).await?;
    view.remove_ban(key, user.as_str()).await
}

pub(super) async fn set_block<C: Commit>(
    view: &mut C,
    tenant: &TenantId,
    user: &UserId,
    target: &UserId,
    at: Option<Timestamp>,
) -> StoreResult<()> {
    view.put_block(tenant, user.as_str(), target.as_str(), at)
        .await
}
