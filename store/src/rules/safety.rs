//! The rules of v1.2's safety rows: a conversation's policy and bans, and
//! the blocks between users. Who may set them is the writer's decision;
//! here a conversation must exist, and the rows are written.

use switchboard_protocol::safety::Ban;
use switchboard_protocol::{TenantId, Timestamp, UserId};

use super::commit::{Commit, Write};
use crate::{ConversationKey, ConversationSettings, Listing, StoreError, StoreResult};

async fn existing<C: Commit>(view: &mut C, key: &ConversationKey) -> StoreResult<()> {
    match view.last_seq(key).await? {
        Some(_) => Ok(()),
        None => Err(StoreError::NotFound),
    }
}

/// The settings row, and the directory row that follows from it: a
/// public conversation is listed with its title and topic.
pub(super) async fn set_policy<C: Commit>(
    view: &mut C,
    key: &ConversationKey,
    settings: &ConversationSettings,
) -> StoreResult<()> {
    existing(view, key).await?;
    view.write(Write::Policy { c: key, settings }).await?;
    let listing = match settings.listed() {
        true => Some(Listing {
            title: view.title(key).await?,
            topic: settings.channel.topic.clone(),
        }),
        false => None,
    };
    view.write(Write::Listing {
        c: key,
        listing: listing.as_ref(),
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
