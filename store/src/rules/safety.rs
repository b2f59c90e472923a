//! The rules of v1.2's safety rows: a conversation's policy and bans, and
//! the blocks between users. Who may set them is the writer's decision;
//! here a conversation must exist, and the rows are written.

use switchboard_protocol::safety::{Ban, ConversationPolicy};
use switchboard_protocol::{TenantId, Timestamp, UserId};

use super::commit::{Commit, Write};
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
    custom: &serde_json::Map<String, serde_json::Value>,
) -> StoreResult<()> {
    existing(view, key).await?;
    let settings = crate::ConversationSettings {
        policy: *policy,
        custom: custom.clone(),
    };
    view.write(Write::Policy {
        c: key,
        settings: &settings,
    })
    .await
}

pub(super) async fn ban<C: Commit>(
    view: &mut C,
    key: &ConversationKey,
    ban: &Ban,
) -> StoreResult<()> {
    existing(view, key).await?;
    view.write(Write::Ban {
        c: key,
        user: ban.user_id.as_str(),
        ban: Some(ban),
    })
    .await
}

pub(super) async fn unban<C: Commit>(
    view: &mut C,
    key: &ConversationKey,
    user: &UserId,
) -> StoreResult<()> {
    existing(view, key).await?;
    view.write(Write::Ban {
        c: key,
        user: user.as_str(),
        ban: None,
    })
    .await
}

pub(super) async fn set_block<C: Commit>(
    view: &mut C,
    tenant: &TenantId,
    user: &UserId,
    target: &UserId,
    at: Option<Timestamp>,
) -> StoreResult<()> {
    view.write(Write::Block {
        tenant,
        user: user.as_str(),
        target: target.as_str(),
        at,
    })
    .await
}
