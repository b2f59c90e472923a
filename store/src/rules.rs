//! The meaning of every write, in one place for every backend.
//!
//! A commit checks before it writes: an append continues the conversation's
//! `seq` without a gap and stores each idempotency key once, an edit or a
//! delete finds its message live, an archive finds its bucket exactly as
//! the archiver read it. Then it decides which rows change: the message,
//! its idempotency key, its versions, an inbox entry for every member
//! device but the sender's, the sender's marks and that the sender has
//! spoken there, the conversation's position. Acks move a user's marks and
//! a device's cursor forward only. A member added unsolicited is recorded
//! against them, within the limit the mutation states.
//!
//! Each backend implements [`Commit`]: the reads those rules need and the
//! row writes they make, nothing more. How rows are keyed, which day bucket
//! a message lands in, how a range of inbox entries is removed and how a
//! commit is split into batches stay with the backend (`embedded/apply.rs`
//! over fjall, `store-scylla`'s `commit.rs` over Scylla). So the embedded
//! store's tests, which can run here, exercise the very rules Scylla runs.
//!
//! Every refusal comes before the first write of its mutation: a backend
//! that commits several mutations or jobs in one batch (the embedded
//! writer) can tell a clean refusal from a half-written one by whether it
//! was asked to write anything.

use std::collections::{HashMap, HashSet};

use switchboard_protocol::{Content, DeviceId, Message, MessageVersion, Timestamp, UserId};

use crate::erasure::Erasure;
use crate::{
    BucketKey, ConversationKey, ConversationRecord, MarkChange, Mutation, StoreError, StoreResult,
    UnsolicitedAdds,
};

mod commit;
mod consent;
mod delete;
mod erasure;
mod reactions;
mod safety;
mod steps;
mod threads;

use commit::conflict;
pub use commit::{BucketSpan, Commit, InboxEntries, MarkReads, Marks, Placement};
use delete::delete;
use steps::{check_not_archived_here, store_update};
pub use threads::ack_thread_read;

/// Applies one mutation of a commit.
pub async fn apply<C: Commit>(view: &mut C, m: &Mutation) -> StoreResult<()> {
    match m {
        Mutation::CreateConversation {
            record,
            members,
            unsolicited,
        } => create(view, record, members, unsolicited.as_ref()).await,
        Mutation::AddMembers {
            key,
            users,
            at,
            unsolicited,
        } => {
            if view.last_seq(key).await?.is_none() {
                return Err(StoreError::NotFound);
            }
            consent::check(view, &key.tenant, unsolicited.as_ref()).await?;
            for u in users {
                add_member(view, key, u.as_str(), *at).await?;
            }
            consent::record(view, key, unsolicited.as_ref()).await
        }
        Mutation::RemoveMembers { key, users } => {
            if view.last_seq(key).await?.is_none() {
                return Err(StoreError::NotFound);
            }
            for u in users {
                let u = u.as_str();
                view.remove_member(key, u).await?;
                for d in view.devices(&key.tenant, u).await? {
                    view.remove_inbox(key, u, &d, InboxEntries::All).await?;
                }
            }
            Ok(())
        }
        Mutation::Append {
            key,
            expected_last_seq,
            messages,
            inbox,
        } => append(view, key, *expected_last_seq, messages, *inbox).await,
        Mutation::Edit {
            key,
            seq,
            content,
            editor,
            at,
            inbox,
        } => edit(view, key, *seq, content, editor, *at, *inbox).await,
        Mutation::Delete {
            key,
            seq,
            at,
            inbox,
        } => delete(view, key, *seq, *at, *inbox).await,
        Mutation::Archive {
            bucket,
            first_seq,
            last_seq,
            object,
        } => archive(view, bucket, *first_seq, *last_seq, object).await,
        Mutation::Restore {
            key,
            message,
            versions,
        } => restore(view, key, message, versions).await,
        Mutation::React {
            key,
            seq,
            user,
            emoji,
            action,
            at,
            inbox,
        } => reactions::react(view, key, *seq, user, emoji, *action, *at, *inbox).await,
        Mutation::ThreadReply {
            key,
            root_seq,
            seq,
            sender,
            at,
        } => threads::thread_reply(view, key, *root_seq, *seq, sender, *at).await,
        Mutation::Pin { key, pin } => reactions::pin(view, key, pin).await,
        Mutation::Unpin { key, message_id } => reactions::unpin(view, key, *message_id).await,
        Mutation::SetMemberState { key, user, state } => {
            if view.last_seq(key).await?.is_none() {
                return Err(StoreError::NotFound);
            }
            if !view.is_member(key, user.as_str()).await? {
                return Err(StoreError::NotAMember);
            }
            view.put_member_state(key, user.as_str(), state).await
        }
        Mutation::SetPolicy { key, policy } => safety::set_policy(view, key, policy).await,
        Mutation::Ban { key, ban } => safety::ban(view, key, ban).await,
        Mutation::Unban { key, user } => safety::unban(view, key, user).await,
        Mutation::SetBlock {
            tenant,
            user,
            target,
            at,
        } => safety::set_block(view, tenant, user, target, *at).await,
        Mutation::PutReport { tenant, report } => view.put_report(tenant, report).await,
        Mutation::Expire {
            key,
            seqs,
            at,
            unindex,
        } => expire(view, key, seqs, *at, unindex).await,
        Mutation::EraseMessages {
            key,
            user,
            pseudonym,
            seqs,
            at,
        } => erasure::erase_messages(view, key, Erasure { user, pseudonym }, seqs, *at).await,
        Mutation::EraseMember {
            key,
            user,
            pseudonym,
        } => erasure::erase_member(view, key, Erasure { user, pseudonym }).await,
        Mutation::EraseUser { tenant, user } => erasure::erase_user(view, tenant, user).await,
        Mutation::ExpiredFromArchive { key, gone, blobs } => {
            expired_from_archive(view, key, gone, blobs).await
        }
        // The archive tier (`archive::Tiered`) handles these before a backend.
        Mutation::MoveToArchive { .. }
        | Mutation::EraseArchived { .. }
        | Mutation::ExpireArchived { .. } => Err(StoreError::Unavailable(
            "no archive store is configured".into(),
        )),
    }
}

async fn create<C: Commit>(
    view: &mut C,
    record: &ConversationRecord,
    members: &[UserId],
    unsolicited: Option<&UnsolicitedAdds>,
) -> StoreResult<()> {
    let key = record.key();
    if view.last_seq(&key).await?.is_some() {
        return Err(conflict("conversation exists"));
    }
    consent::check(view, &key.tenant, unsolicited).await?;
    view.insert_conversation(record).await?;
    for u in members {
        add_member(view, &key, u.as_str(), record.created_at).await?;
    }
    consent::record(view, &key, unsolicited).await
}

async fn add_member<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    user: &str,
    at: Timestamp,
) -> StoreResult<()> {
    if view.is_member(c, user).await? {
        return Ok(());
    }
    view.insert_member(c, user, at).await
}

async fn append<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    expected_last_seq: u64,
    messages: &[Message],
    inbox: bool,
) -> StoreResult<()> {
    let Some(last_seq) = view.last_seq(c).await? else {
        return Err(StoreError::NotFound);
    };
    if last_seq != expected_last_seq {
        return Err(conflict(format!(
            "append expected last_seq {expected_last_seq}, store has {last_seq}"
        )));
    }
    for (i, m) in messages.iter().enumerate() {
        if m.seq != expected_last_seq + 1 + i as u64 || m.conversation_id != c.conversation_id {
            return Err(conflict(format!(
                "message seq {} does not continue {expected_last_seq}",
                m.seq
            )));
        }
    }
    let already =
        |m: &Message| conflict(format!("client_msg_id {} already stored", m.client_msg_id));
    let keys: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| (m.sender_id.as_str(), m.client_msg_id.as_str()))
        .collect();
    let mut fresh = HashSet::new();
    if let Some((m, _)) = messages.iter().zip(&keys).find(|(_, k)| !fresh.insert(*k)) {
        return Err(already(m));
    }
    let stored = view.sent_exists(c, &keys).await?;
    if let Some((m, _)) = messages.iter().zip(stored).find(|(_, stored)| *stored) {
        return Err(already(m));
    }
    let Some(last) = messages.last() else {
        return Ok(());
    };

    // Every device of every member gets an inbox entry, except the device
    // that sent the message (it has it already).
    let recipients = if inbox {
        view.recipients(c).await?
    } else {
        Vec::new()
    };
    // Per sender: the highest seq they sent here.
    let mut senders: HashMap<&str, u64> = HashMap::new();
    for m in messages {
        view.put_message(c, m, Placement::New).await?;
        view.insert_sent(c, m).await?;
        if let Some(at) = m.expires_at {
            view.set_expiry(c, at, m.seq, true).await?;
        }
        if let Some(media) = m.content.as_ref().and_then(Content::media) {
            view.reference_media(c, m.seq, &media.blob_ref).await?;
        }
        threads::mentions(view, c, m, !inbox).await?;
        for (user, devices) in &recipients {
            for device in devices {
                if user == m.sender_id.as_str() && device == m.sender_device.as_str() {
                    continue;
                }
                view.insert_inbox(c, user, device, m.seq, m.created_at)
                    .await?;
            }
        }
        senders.insert(m.sender_id.as_str(), m.seq);
    }
    // Sending implies having received and read everything before it, and
    // speaking to the conversation's members.
    for (sender, seq) in senders {
        if view.is_member(c, sender).await? {
            view.raise_marks(c, sender, Some(seq), Some(seq)).await?;
            view.insert_speaker(c, sender).await?;
        }
    }
    view.set_position(c, last).await
}

async fn edit<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    seq: u64,
    content: &Content,
    editor: &UserId,
    at: Timestamp,
    inbox: bool,
) -> StoreResult<()> {
    check_not_archived_here(view, c)?;
    // An edit only follows the sequencer's checks, so the message exists
    // unless it was archived since.
    let Some(mut message) = view.message(c, seq).await? else {
        return Err(StoreError::NotFound);
    };
    if message.deleted_at.is_some() {
        return Err(conflict("the message is deleted"));
    }
    let mut newest = view.versions(c, seq).await?.last().map(|v| v.version);
    if newest.is_none() {
        // The first edit keeps the original as version 1.
        let original = MessageVersion {
            version: 1,
            content: message.content.clone().unwrap_or(Content::Text {
                text: String::new(),
            }),
            at: message.created_at,
            editor: message.sender_id.clone(),
        };
        view.put_version(c, seq, &original).await?;
        newest = Some(1);
    }
    let version = MessageVersion {
        version: newest.map_or(1, |v| v + 1),
        content: content.clone(),
        at,
        editor: editor.clone(),
    };
    view.put_version(c, seq, &version).await?;
    if let Some(media) = content.media() {
        view.reference_media(c, seq, &media.blob_ref).await?;
    }
    message.content = Some(content.clone());
    message.edited_at = Some(at);
    store_update(view, c, &message, inbox, at).await
}

/// Expiry: each live message goes as a deletion does, without telling
/// the inboxes; instead their entries for these seqs go.
async fn expire<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    seqs: &[u64],
    at: Timestamp,
    unindex: &[(Timestamp, u64)],
) -> StoreResult<()> {
    for &(when, seq) in unindex {
        view.set_expiry(c, when, seq, false).await?;
    }
    let (Some(&from), Some(&to)) = (seqs.iter().min(), seqs.iter().max()) else {
        return Ok(());
    };
    for &seq in seqs {
        if view.message(c, seq).await?.is_some() {
            delete(view, c, seq, at, false).await?;
        }
    }
    // One range per device where the seqs follow each other (what a
    // retention scan finds); else entry by entry.
    let contiguous = to - from + 1 == seqs.len() as u64;
    for (user, devices) in view.recipients(c).await? {
        for device in devices {
            if contiguous {
                view.remove_inbox(c, &user, &device, InboxEntries::Through { from, to })
                    .await?;
            } else {
                for &seq in seqs {
                    view.remove_inbox(c, &user, &device, InboxEntries::One(seq))
                        .await?;
                }
            }
        }
    }
    Ok(())
}

/// What archived messages that expired leave among the live rows: their
/// reaction rows, mentions and media references (the archive object
/// itself is `Tiered`'s to rewrite).
async fn expired_from_archive<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    gone: &[Message],
    blobs: &[(u64, String)],
) -> StoreResult<()> {
    if view.last_seq(c).await?.is_none() {
        return Ok(());
    }
    for m in gone {
        view.remove_reactions(c, m.seq).await?;
        threads::unmention(view, c, m).await?;
    }
    for (seq, blob_ref) in blobs {
        view.unreference_media(c, *seq, blob_ref).await?;
    }
    Ok(())
}

async fn archive<C: Commit>(
    view: &mut C,
    b: &BucketKey,
    first_seq: u64,
    last_seq: u64,
    object: &str,
) -> StoreResult<()> {
    let c = b.conversation();
    check_not_archived_here(view, &c)?;
    let Some(span) = view.bucket(b).await? else {
        return Err(StoreError::NotFound);
    };
    if span.archived {
        return Err(conflict("the bucket is archived already"));
    }
    if (span.first, span.last) != (first_seq, last_seq) || view.touched(&c) {
        return Err(conflict(format!(
            "the bucket holds {}..={} now, not {first_seq}..={last_seq}",
            span.first, span.last
        )));
    }
    // The newest message keeps its live row, versions and key: the
    // conversation's position and preview derive from it.
    let newest = view.last_seq(&c).await?.unwrap_or(0);
    view.archive_rows(b, &span, newest, object).await?;
    let which = InboxEntries::Through {
        from: span.first,
        to: span.last,
    };
    for (user, devices) in view.recipients(&c).await? {
        for device in devices {
            view.remove_inbox(&c, &user, &device, which).await?;
        }
    }
    Ok(())
}

async fn restore<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    message: &Message,
    versions: &[MessageVersion],
) -> StoreResult<()> {
    check_not_archived_here(view, c)?;
    if view.message(c, message.seq).await?.is_some() {
        return Ok(());
    }
    view.put_message(c, message, Placement::Restored).await?;
    for v in versions {
        view.put_version(c, message.seq, v).await?;
    }
    // Back among the live rows, it expires from there (v1.2); an entry
    // still in the index is written again, which changes nothing.
    if let Some(at) = message.expires_at
        && message.deleted_at.is_none()
    {
        view.set_expiry(c, at, message.seq, true).await?;
    }
    Ok(())
}

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
        view.remove_inbox(c, u, d, InboxEntries::One(seq)).await?;
    } else {
        view.set_cursor(c, u, d, seq).await?;
        let covered = InboxEntries::Through {
            from: previous + 1,
            to: seq,
        };
        view.remove_inbox(c, u, d, covered).await?;
    }
    let moved = seq > marks.delivered;
    if moved {
        view.raise_marks(c, u, Some(seq), None).await?;
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
        view.raise_marks(
            c,
            u,
            delivered_moved.then_some(seq),
            read_moved.then_some(seq),
        )
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
