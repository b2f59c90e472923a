//! Threads and mentions (v1.1): a reply's root counts it, the thread's
//! index lists it, and who took part reads it; a message that names
//! members records it for each (and, where the conversation fans out on
//! read, gives them an inbox entry anyway).

use switchboard_protocol::{Message, ThreadSummary, Timestamp, UserId};

use super::commit::{Commit, Placement, Write};
use super::steps::check_not_archived_here;
use crate::{ConversationKey, StoreError, StoreResult};

/// Reply `seq` of `sender` joins the thread of `root_seq`.
pub(super) async fn thread_reply<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    root_seq: u64,
    seq: u64,
    sender: &UserId,
    at: Timestamp,
) -> StoreResult<()> {
    check_not_archived_here(view, c)?;
    let Some(mut root) = view.message(c, root_seq).await? else {
        return Err(StoreError::NotFound);
    };
    root.thread = Some(ThreadSummary::after_reply(root.thread.as_ref(), sender, at));
    view.write(Write::Message {
        c,
        m: &root,
        placement: Placement::Changed,
    })
    .await?;
    view.write(Write::ThreadReply { c, root_seq, seq }).await?;
    // The replier has read the thread up to their reply; the root's
    // author takes part from the first reply on, reading nothing yet.
    let mark = view
        .thread_mark(c, sender.as_str(), root_seq)
        .await?
        .unwrap_or(0)
        .max(seq);
    view.write(Write::ThreadMark {
        c,
        user: sender.as_str(),
        root_seq,
        seq: mark,
    })
    .await?;
    let author = root.sender_id.as_str();
    if author != sender.as_str()
        && view.is_member(c, author).await?
        && view.thread_mark(c, author, root_seq).await?.is_none()
    {
        view.write(Write::ThreadMark {
            c,
            user: author,
            root_seq,
            seq: root_seq,
        })
        .await?;
    }
    Ok(())
}

/// The members `m` names besides its sender: every member for
/// `mention_all`, else those of its `mentions` who are members. The rows
/// a send records and a delete removes are these (a member who leaves
/// loses theirs then).
async fn named<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    m: &Message,
) -> StoreResult<Vec<String>> {
    let mut named = Vec::new();
    if m.mention_all {
        named = view.members(c).await?;
    } else {
        for u in &m.mentions {
            if view.is_member(c, u.as_str()).await? {
                named.push(u.as_str().to_owned());
            }
        }
    }
    named.retain(|u| *u != m.sender_id.as_str());
    Ok(named)
}

/// Records whom `m` names; with `to_inboxes`, each of their devices gets
/// an inbox entry (the conversation fans out on read: nobody else gets
/// one).
pub(super) async fn mentions<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    m: &Message,
    to_inboxes: bool,
) -> StoreResult<()> {
    // A shadow-banned sender's message names nobody: only they see it.
    if m.shadow || (m.mentions.is_empty() && !m.mention_all) {
        return Ok(());
    }
    for user in named(view, c, m).await? {
        view.write(Write::Mention {
            c,
            user: &user,
            seq: m.seq,
            present: true,
        })
        .await?;
        if to_inboxes {
            for device in view.devices(&c.tenant, &user).await? {
                view.write(Write::Inbox {
                    c,
                    user: &user,
                    device: &device,
                    seq: m.seq,
                    at: m.created_at,
                })
                .await?;
            }
        }
    }
    Ok(())
}

/// A deleted message mentions nobody: its mentions leave the members'
/// counts.
pub(super) async fn unmention<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    m: &Message,
) -> StoreResult<()> {
    if m.mentions.is_empty() && !m.mention_all {
        return Ok(());
    }
    for user in named(view, c, m).await? {
        view.write(Write::Mention {
            c,
            user: &user,
            seq: m.seq,
            present: false,
        })
        .await?;
    }
    Ok(())
}

/// `user` read the thread of `root_seq` up to `seq`: their mark there
/// moves forward (never back, never past the conversation's end). Only a
/// thread they take part in keeps a mark; reading another changes
/// nothing.
pub async fn ack_thread_read<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    user: &UserId,
    root_seq: u64,
    seq: u64,
) -> StoreResult<()> {
    let Some(last) = view.last_seq(c).await? else {
        return Err(StoreError::NotFound);
    };
    if !view.is_member(c, user.as_str()).await? {
        return Err(StoreError::NotAMember);
    }
    let seq = seq.min(last);
    if let Some(mark) = view.thread_mark(c, user.as_str(), root_seq).await?
        && seq > mark
    {
        view.write(Write::ThreadMark {
            c,
            user: user.as_str(),
            root_seq,
            seq,
        })
        .await?;
    }
    Ok(())
}
