//! The marks' rules: a device's delivered mark and cursor, a user's read
//! mark, and what a mark change tells the others.

use switchboard_protocol::{DeviceId, UserId};

use super::commit::{Commit, InboxEntries, Marks, Write};
use crate::{ConversationKey, MarkChange, StoreError, StoreResult};

/// A device received everything up to `seq`: its cursor moves there and
/// the inbox entries it covers go. An ack at or below the cursor confirms
/// an update (an edit or a delete re-enters the inbox at the message's seq).
pub async fn ack_delivered<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    user: &UserId,
    device: &DeviceId,
    seq: u64,
) -> StoreResult<MarkChange> {
    let (u, d) = (user.as_str(), device.as_str());
    let (last_seq, marks, previous) = ack_context(view, c, u, Some(d)).await?;
    // A mark past the end of the conversation would hide future messages.
    let seq = seq.min(last_seq);
    if seq <= previous {
        view.write(Write::InboxGone {
            c,
            user: u,
            device: d,
            which: InboxEntries::One(seq),
        })
        .await?;
    } else {
        view.write(Write::Cursor {
            c,
            user: u,
            device: d,
            seq,
        })
        .await?;
        let covered = InboxEntries::Through {
            from: previous + 1,
            to: seq,
        };
        view.write(Write::InboxGone {
            c,
            user: u,
            device: d,
            which: covered,
        })
        .await?;
    }
    let moved = seq > marks.delivered;
    if moved {
        view.write(Write::Marks {
            c,
            user: u,
            delivered: Some(seq),
            read: None,
        })
        .await?;
    }
    let after = Marks {
        delivered: marks.delivered.max(seq),
        ..marks
    };
    mark_change(view, c, after, moved, false).await
}

/// A user read everything up to `seq`; what was read was delivered.
pub async fn ack_read<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    user: &UserId,
    seq: u64,
) -> StoreResult<MarkChange> {
    let u = user.as_str();
    let (last_seq, marks, _) = ack_context(view, c, u, None).await?;
    let seq = seq.min(last_seq);
    let read_moved = seq > marks.read;
    let delivered_moved = seq > marks.delivered;
    if read_moved || delivered_moved {
        view.write(Write::Marks {
            c,
            user: u,
            delivered: delivered_moved.then_some(seq),
            read: read_moved.then_some(seq),
        })
        .await?;
    }
    let after = Marks {
        delivered: marks.delivered.max(seq),
        read: marks.read.max(seq),
    };
    mark_change(view, c, after, delivered_moved, read_moved).await
}

/// An ack's reads, refusing a missing conversation or a non-member.
async fn ack_context<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    user: &str,
    device: Option<&str>,
) -> StoreResult<(u64, Marks, u64)> {
    let reads = view.ack_reads(c, user, device).await?;
    let Some(last_seq) = reads.last_seq else {
        return Err(StoreError::NotFound);
    };
    let Some(marks) = reads.marks else {
        return Err(StoreError::NotAMember);
    };
    Ok((last_seq, marks, reads.cursor))
}

/// What the caller needs to broadcast a mark that moved. The members
/// come along only up to [`MarkChange::MEMBERS_INLINE`]: a large
/// conversation usually fans out on read and broadcasts no marks, and
/// copying thousands of ids for every ack of every member was most of
/// what its acks cost.
async fn mark_change<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    marks: Marks,
    delivered_moved: bool,
    read_moved: bool,
) -> StoreResult<MarkChange> {
    let kind = view.kind(c).await?;
    let member_count = view.member_count(c).await?;
    let members = if member_count <= MarkChange::MEMBERS_INLINE {
        view.members(c)
            .await?
            .into_iter()
            .map(|m| UserId::new(m).map_err(StoreError::from))
            .collect::<StoreResult<Vec<_>>>()?
    } else {
        Vec::new()
    };
    Ok(MarkChange {
        kind,
        member_count,
        members,
        delivered_seq: marks.delivered,
        read_seq: marks.read,
        delivered_moved,
        read_moved,
    })
}
