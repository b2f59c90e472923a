//! Reactions and pins (v1.1): what each checks before it writes, and the
//! rows it writes.

use switchboard_protocol::conversation::MAX_PINS;
use switchboard_protocol::poll::split_marks;
use switchboard_protocol::reaction::{self, MAX_EMOJI_PER_MESSAGE, MAX_REACTIONS_PER_USER};
use switchboard_protocol::{MessageId, ReactAction, Timestamp, UserId};

use super::commit::{Commit, Write, conflict};
use super::steps::{check_not_archived_here, store_update};
use crate::{ConversationKey, PinRow, StoreError, StoreResult};

/// One user's reaction added or removed: the row, the message's counts,
/// and (with `inbox`) the message back in every member device's inbox.
#[allow(clippy::too_many_arguments)]
pub(super) async fn react<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    seq: u64,
    user: &UserId,
    emoji: &str,
    action: ReactAction,
    at: Timestamp,
    inbox: bool,
) -> StoreResult<()> {
    check_not_archived_here(view, c)?;
    let Some(mut message) = view.message(c, seq).await? else {
        return Err(StoreError::NotFound);
    };
    if message.deleted_at.is_some() {
        return Err(conflict("the message is deleted"));
    }
    if !view.is_member(c, user.as_str()).await? {
        return Err(StoreError::NotAMember);
    }
    // A voter's marks on a poll are theirs too; only emoji count here.
    let (mine, _) = split_marks(&view.reactions_of(c, seq, user.as_str()).await?);
    let has = mine.iter().any(|e| e == emoji);
    match action {
        ReactAction::Add if has => return Ok(()),
        ReactAction::Remove if !has => return Ok(()),
        ReactAction::Add => {
            if mine.len() >= MAX_REACTIONS_PER_USER {
                return Err(conflict(format!(
                    "a member may react to one message with at most {MAX_REACTIONS_PER_USER} emoji"
                )));
            }
            let new_emoji = !message.reactions.iter().any(|r| r.emoji == emoji);
            if new_emoji && message.reactions.len() >= MAX_EMOJI_PER_MESSAGE {
                return Err(conflict(format!(
                    "a message carries at most {MAX_EMOJI_PER_MESSAGE} different emoji"
                )));
            }
            view.write(Write::Reaction {
                c,
                seq,
                user: user.as_str(),
                emoji,
                at: Some(at),
            })
            .await?;
        }
        ReactAction::Remove => {
            view.write(Write::Reaction {
                c,
                seq,
                user: user.as_str(),
                emoji,
                at: None,
            })
            .await?;
        }
    }
    reaction::apply(&mut message.reactions, emoji, action);
    store_update(view, c, &message, inbox, at).await
}

/// Pins a message of the conversation, within the limit; a message
/// pinned already stays as it is.
pub(super) async fn pin<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    pin: &PinRow,
) -> StoreResult<()> {
    if view.last_seq(c).await?.is_none() {
        return Err(StoreError::NotFound);
    }
    let pins = view.pins(c).await?;
    if pins.iter().any(|p| p.message_id == pin.message_id) {
        return Ok(());
    }
    if pins.len() >= MAX_PINS {
        return Err(conflict(format!(
            "a conversation has at most {MAX_PINS} pinned messages: unpin one first"
        )));
    }
    view.write(Write::Pin {
        c,
        message_id: pin.message_id,
        pin: Some(pin),
    })
    .await
}

pub(super) async fn unpin<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    message_id: MessageId,
) -> StoreResult<()> {
    if view.last_seq(c).await?.is_none() {
        return Err(StoreError::NotFound);
    }
    view.write(Write::Pin {
        c,
        message_id,
        pin: None,
    })
    .await
}
