//! Polls (v1.3): a member's vote and a poll's closing, checked against
//! the poll as stored. A vote is kept as the voter's marks on the message
//! (one row per chosen option, beside their reactions:
//! [`switchboard_protocol::poll::vote_mark`]); the message carries the
//! counts and latest voters.

use switchboard_protocol::poll::{PollContent, PollResults, split_marks, vote_mark};
use switchboard_protocol::{Message, Timestamp, UserId};

use super::commit::{Commit, Write, conflict};
use super::steps::{check_not_archived_here, store_update};
use crate::{ConversationKey, StoreError, StoreResult};

/// The poll message `seq`, its poll and its results taken out to be
/// changed, as a vote or a closing finds them.
async fn poll_message<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    seq: u64,
) -> StoreResult<(Message, PollContent, PollResults)> {
    check_not_archived_here(view, c)?;
    let Some(mut message) = view.message(c, seq).await? else {
        return Err(StoreError::NotFound);
    };
    if message.deleted_at.is_some() {
        return Err(conflict("the message is deleted"));
    }
    let Some((poll, results)) = message.take_poll() else {
        return Err(conflict("the message is no poll"));
    };
    Ok((message, poll, results))
}

/// `user`'s vote in poll `seq` becomes `options`: the rows of the
/// options left go, those of the options chosen come, the results move.
#[allow(clippy::too_many_arguments)]
pub(super) async fn vote<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    seq: u64,
    user: &UserId,
    options: &[String],
    at: Timestamp,
    inbox: bool,
) -> StoreResult<()> {
    let (mut message, poll, mut results) = poll_message(view, c, seq).await?;
    if poll.is_closed(&results, at) {
        return Err(conflict("the poll is closed"));
    }
    let after = poll.choice(options).map_err(|e| conflict(e.to_string()))?;
    if !view.is_member(c, user.as_str()).await? {
        return Err(StoreError::NotAMember);
    }
    let (_, before) = split_marks(&view.reactions_of(c, seq, user.as_str()).await?);
    if before.len() == after.len() && before.iter().all(|id| after.contains(id)) {
        return Ok(());
    }
    for id in before.iter().filter(|id| !after.contains(id)) {
        let mark = vote_mark(id);
        view.write(Write::Reaction {
            c,
            seq,
            user: user.as_str(),
            emoji: &mark,
            at: None,
        })
        .await?;
    }
    for id in after.iter().filter(|id| !before.contains(id)) {
        let mark = vote_mark(id);
        view.write(Write::Reaction {
            c,
            seq,
            user: user.as_str(),
            emoji: &mark,
            at: Some(at),
        })
        .await?;
    }
    results.apply(user, &before, &after);
    message.poll_results = Some(results);
    store_update(view, c, &message, inbox, at).await
}

/// Poll `seq` takes no more votes.
pub(super) async fn close<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    seq: u64,
    at: Timestamp,
    inbox: bool,
) -> StoreResult<()> {
    let (mut message, _, mut results) = poll_message(view, c, seq).await?;
    if results.closed {
        return Ok(());
    }
    results.closed = true;
    message.poll_results = Some(results);
    store_update(view, c, &message, inbox, at).await
}
