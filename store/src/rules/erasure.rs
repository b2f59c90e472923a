//! The rules of an erasure (v1.2): a conversation's rows that name the
//! user, its membership, and the user's own rows. What each row becomes
//! is `crate::erasure`'s; here is which rows a step visits.

use switchboard_protocol::{ReactAction, TenantId, Timestamp, UserId, reaction};

use super::commit::{Commit, InboxEntries, Placement};
use super::delete::delete;
use super::steps::check_not_archived_here;
use crate::erasure::Erasure;
use crate::{ConversationKey, StoreResult};

/// Messages `seqs` no longer name the user: their own become tombstones
/// (deleted as a deletion does, without telling the inboxes, and without
/// their idempotency keys); in others' their reactions go and their id
/// becomes the pseudonym. A conversation that is gone, and rows archived
/// or gone, are passed over.
pub(super) async fn erase_messages<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    e: Erasure<'_>,
    seqs: &[u64],
    at: Timestamp,
) -> StoreResult<()> {
    if view.last_seq(c).await?.is_none() {
        return Ok(());
    }
    check_not_archived_here(view, c)?;
    let user = e.user.as_str();
    for &seq in seqs {
        let Some(mut m) = view.message(c, seq).await? else {
            continue;
        };
        let mut changed = false;
        if m.sender_id == *e.user {
            // Their idempotency key names them, a system message's too.
            view.remove_sent(c, user, m.client_msg_id.as_str()).await?;
        }
        if e.owns(&m) {
            if m.deleted_at.is_none() {
                delete(view, c, seq, at, false).await?;
            }
            let Some(deleted) = view.message(c, seq).await? else {
                continue;
            };
            m = deleted;
        } else {
            for emoji in view.reactions_of(c, seq, user).await? {
                view.remove_reaction(c, seq, user, &emoji).await?;
                reaction::apply(&mut m.reactions, &emoji, ReactAction::Remove);
                changed = true;
            }
        }
        changed |= e.message(&mut m, at);
        if changed {
            view.put_message(c, &m, Placement::Changed).await?;
        }
    }
    Ok(())
}

/// The conversation's last step: the user is a member no more (as a
/// removal does, inbox entries included), their ban goes, and the pins,
/// bans and creator that named them name the pseudonym.
pub(super) async fn erase_member<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    e: Erasure<'_>,
) -> StoreResult<()> {
    let user = e.user.as_str();
    if view.last_seq(c).await?.is_none() {
        return view.remove_joined(c, user).await;
    }
    if view.is_member(c, user).await? {
        view.remove_member(c, user).await?;
    }
    for d in view.devices(&c.tenant, user).await? {
        view.remove_inbox(c, user, &d, InboxEntries::All).await?;
    }
    view.remove_ban(c, user).await?;
    for mut ban in view.bans(c).await? {
        if e.ban(&mut ban) {
            view.put_ban(c, &ban).await?;
        }
    }
    for mut pin in view.pins(c).await? {
        if e.pin(&mut pin) {
            view.insert_pin(c, &pin).await?;
        }
    }
    // Reactions to messages no longer live (archived) have rows still.
    view.remove_reactions_of(c, user).await?;
    view.anonymise_creator(c, e).await?;
    // Last: the job takes a conversation gone from the list as done.
    view.remove_joined(c, user).await
}

/// The user's own rows, wherever they are kept: devices, cursors and
/// inboxes, blocks both ways, thread marks, mentions, the index of what
/// they sent, unsolicited adds and the conversations they ever joined.
pub(super) async fn erase_user<C: Commit>(
    view: &mut C,
    tenant: &TenantId,
    user: &UserId,
) -> StoreResult<()> {
    view.erase_user_rows(tenant, user.as_str()).await
}
