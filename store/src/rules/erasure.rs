//! The rules of an erasure (v1.2): a conversation's rows that name the
//! user, its membership, and the user's own rows. What each row becomes
//! is `crate::erasure`'s; here is which rows a step visits.

use switchboard_protocol::{TenantId, Timestamp, UserId, reaction};

use super::commit::{Commit, InboxEntries, Placement, Write};
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
            view.write(Write::SentGone {
                c,
                sender: user,
                client_msg_id: m.client_msg_id.as_str(),
            })
            .await?;
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
            // Their reactions and their vote go, with what they counted.
            let marks = view.reactions_of(c, seq, user).await?;
            for mark in &marks {
                view.write(Write::Reaction {
                    c,
                    seq,
                    user,
                    emoji: mark,
                    at: None,
                })
                .await?;
            }
            changed |= reaction::forget_marks(&mut m, e.user, &marks);
        }
        changed |= e.message(&mut m, at);
        if changed {
            view.write(Write::Message {
                c,
                m: &m,
                placement: Placement::Changed,
            })
            .await?;
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
        return view.write(Write::JoinedGone { c, user }).await;
    }
    if view.is_member(c, user).await? {
        view.write(Write::Member {
            c,
            user,
            joined: None,
        })
        .await?;
    }
    for d in view.devices(&c.tenant, user).await? {
        view.write(Write::InboxGone {
            c,
            user,
            device: &d,
            which: InboxEntries::All,
        })
        .await?;
    }
    view.write(Write::Ban { c, user, ban: None }).await?;
    for mut ban in view.bans(c).await? {
        if e.ban(&mut ban) {
            view.write(Write::Ban {
                c,
                user: ban.user_id.as_str(),
                ban: Some(&ban),
            })
            .await?;
        }
    }
    for mut pin in view.pins(c).await? {
        if e.pin(&mut pin) {
            view.write(Write::Pin {
                c,
                message_id: pin.message_id,
                pin: Some(&pin),
            })
            .await?;
        }
    }
    for invite in view.invites(c).await? {
        if invite.created_by == *e.user {
            view.write(Write::Invite {
                c,
                code: &invite.code,
                invite: None,
            })
            .await?;
        }
    }
    // Reactions to messages no longer live (archived) have rows still,
    // and those messages would still count as unread.
    view.write(Write::ReactionsOfGone { c, user }).await?;
    view.write(Write::UncountedOf { c, user }).await?;
    view.write(Write::AnonymisedCreator { c, e }).await?;
    // Last: the job takes a conversation gone from the list as done.
    view.write(Write::JoinedGone { c, user }).await
}

/// The user's own rows, wherever they are kept: devices, cursors and
/// inboxes, blocks both ways, thread marks, mentions, the index of what
/// they sent, unsolicited adds and the conversations they ever joined.
pub(super) async fn erase_user<C: Commit>(
    view: &mut C,
    tenant: &TenantId,
    user: &UserId,
) -> StoreResult<()> {
    view.write(Write::UserRowsGone {
        tenant,
        user: user.as_str(),
    })
    .await
}
