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

use switchboard_protocol::{Content, Message, MessageVersion, Timestamp, UserId};

use crate::erasure::Erasure;
use crate::{
    BucketKey, ConversationKey, ConversationRecord, Mutation, StoreError, StoreResult,
    UnsolicitedAdds,
};

mod channels;
mod commit;
mod consent;
mod delete;
mod erasure;
mod marks;
mod polls;
mod previews;
mod reactions;
mod safety;
mod steps;
mod threads;
pub mod unread;

use commit::conflict;
pub use commit::{BucketSpan, Commit, InboxEntries, MarkReads, Marks, Placement, Write};
use delete::delete;
pub use marks::{ack_delivered, ack_read};
use steps::{add_member, check_not_archived_here, store_update};
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
                view.write(Write::Member {
                    c: key,
                    user: u,
                    joined: None,
                })
                .await?;
                for d in view.devices(&key.tenant, u).await? {
                    view.write(Write::InboxGone {
                        c: key,
                        user: u,
                        device: &d,
                        which: InboxEntries::All,
                    })
                    .await?;
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
            custom,
        } => {
            let change = Change {
                content,
                custom: custom.as_ref(),
                editor,
                at: *at,
            };
            edit(view, key, *seq, change, *inbox).await
        }
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
        Mutation::Vote {
            key,
            seq,
            user,
            options,
            at,
            inbox,
        } => polls::vote(view, key, *seq, user, options, *at, *inbox).await,
        Mutation::ClosePoll {
            key,
            seq,
            at,
            inbox,
        } => polls::close(view, key, *seq, *at, *inbox).await,
        Mutation::SetPreviews {
            key,
            seq,
            previews,
            at,
            inbox,
        } => previews::set(view, key, *seq, previews, *at, *inbox).await,
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
            view.write(Write::MemberState {
                c: key,
                user: user.as_str(),
                state,
            })
            .await
        }
        Mutation::SetPolicy {
            key,
            policy,
            custom,
            channel,
            mutes,
        } => {
            let settings = crate::ConversationSettings {
                policy: *policy,
                custom: custom.clone(),
                channel: channel.clone(),
                mutes: mutes.clone(),
            };
            safety::set_policy(view, key, &settings).await
        }
        Mutation::Join {
            key,
            user,
            at,
            read_to,
            history_from,
            invite,
        } => {
            let joining = channels::Joining {
                user: user.as_str(),
                at: *at,
                read_to: *read_to,
                history_from: *history_from,
                invite: invite.as_ref(),
            };
            channels::join(view, key, joining).await
        }
        Mutation::SetInvite { key, code, invite } => {
            channels::set_invite(view, key, code, invite.as_ref()).await
        }
        Mutation::Ban { key, ban } => safety::ban(view, key, ban).await,
        Mutation::Unban { key, user } => safety::unban(view, key, user).await,
        Mutation::SetBlock {
            tenant,
            user,
            target,
            at,
        } => safety::set_block(view, tenant, user, target, *at).await,
        Mutation::PutProfile { tenant, profile } => {
            view.write(Write::Profile { tenant, profile }).await
        }
        Mutation::PutReport { tenant, report } => {
            view.write(Write::Report { tenant, report }).await
        }
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
    view.write(Write::Conversation { record }).await?;
    for u in members {
        add_member(view, &key, u.as_str(), record.created_at).await?;
    }
    consent::record(view, &key, unsolicited).await
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
    // that sent the message (it has it already); a shadow-banned sender's
    // message, their own devices alone (v1.3).
    let recipients = if inbox {
        view.recipients(c).await?
    } else {
        Vec::new()
    };
    // Per sender: the highest seq they sent here.
    let mut senders: HashMap<&str, u64> = HashMap::new();
    for m in messages {
        view.write(Write::Message {
            c,
            m,
            placement: Placement::New,
        })
        .await?;
        view.write(Write::Sent { c, m }).await?;
        if let Some(at) = m.expires_at {
            view.write(Write::Expiry {
                c,
                at,
                seq: m.seq,
                present: true,
            })
            .await?;
        }
        if let Some(media) = m.content.as_ref().and_then(Content::media) {
            view.write(Write::MediaRef {
                c,
                seq: m.seq,
                blob_ref: &media.blob_ref,
                present: true,
            })
            .await?;
        }
        threads::mentions(view, c, m, !inbox).await?;
        unread::count(view, c, m).await?;
        for (user, devices) in &recipients {
            if !m.shadow_reaches(user) {
                continue;
            }
            for device in devices {
                if user == m.sender_id.as_str() && device == m.sender_device.as_str() {
                    continue;
                }
                view.write(Write::Inbox {
                    c,
                    user,
                    device,
                    seq: m.seq,
                    at: m.created_at,
                })
                .await?;
            }
        }
        senders.insert(m.sender_id.as_str(), m.seq);
    }
    // Sending implies having received and read everything before it, and
    // speaking to the conversation's members.
    for (sender, seq) in senders {
        if view.is_member(c, sender).await? {
            view.write(Write::Marks {
                c,
                user: sender,
                delivered: Some(seq),
                read: Some(seq),
            })
            .await?;
            view.write(Write::Speaker { c, user: sender }).await?;
        }
    }
    view.write(Write::Position { c, last }).await
}

/// What an edit changes: the content, and (v1.3) the `custom` fields
/// when given (an empty object removes them).
struct Change<'a> {
    content: &'a Content,
    custom: Option<&'a serde_json::Map<String, serde_json::Value>>,
    editor: &'a UserId,
    at: Timestamp,
}

async fn edit<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    seq: u64,
    change: Change<'_>,
    inbox: bool,
) -> StoreResult<()> {
    let Change {
        content,
        custom,
        editor,
        at,
    } = change;
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
        view.write(Write::Version {
            c,
            seq,
            v: &original,
        })
        .await?;
        newest = Some(1);
    }
    let version = MessageVersion {
        version: newest.map_or(1, |v| v + 1),
        content: content.clone(),
        at,
        editor: editor.clone(),
    };
    view.write(Write::Version {
        c,
        seq,
        v: &version,
    })
    .await?;
    if let Some(media) = content.media() {
        view.write(Write::MediaRef {
            c,
            seq,
            blob_ref: &media.blob_ref,
            present: true,
        })
        .await?;
    }
    message.content = Some(content.clone());
    // A card whose link the edit took away goes (v1.3).
    for blob_ref in message.keep_linked_previews() {
        view.write(Write::MediaRef {
            c,
            seq,
            blob_ref: &blob_ref,
            present: false,
        })
        .await?;
    }
    if let Some(custom) = custom {
        message.custom = (!custom.is_empty()).then(|| custom.clone());
    }
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
        view.write(Write::Expiry {
            c,
            at: when,
            seq,
            present: false,
        })
        .await?;
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
                view.write(Write::InboxGone {
                    c,
                    user: &user,
                    device: &device,
                    which: InboxEntries::Through { from, to },
                })
                .await?;
            } else {
                for &seq in seqs {
                    view.write(Write::InboxGone {
                        c,
                        user: &user,
                        device: &device,
                        which: InboxEntries::One(seq),
                    })
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
        view.write(Write::MessageReactionsGone { c, seq: m.seq })
            .await?;
        threads::unmention(view, c, m).await?;
        unread::uncount(view, c, m.seq).await?;
    }
    for (seq, blob_ref) in blobs {
        view.write(Write::MediaRef {
            c,
            seq: *seq,
            blob_ref,
            present: false,
        })
        .await?;
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
    view.write(Write::Archived {
        b,
        span: &span,
        newest,
        object,
    })
    .await?;
    let which = InboxEntries::Through {
        from: span.first,
        to: span.last,
    };
    for (user, devices) in view.recipients(&c).await? {
        for device in devices {
            view.write(Write::InboxGone {
                c: &c,
                user: &user,
                device: &device,
                which,
            })
            .await?;
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
    view.write(Write::Message {
        c,
        m: message,
        placement: Placement::Restored,
    })
    .await?;
    for v in versions {
        view.write(Write::Version {
            c,
            seq: message.seq,
            v,
        })
        .await?;
    }
    // Back among the live rows, it expires from there (v1.2); an entry
    // still in the index is written again, which changes nothing.
    if let Some(at) = message.expires_at
        && message.deleted_at.is_none()
    {
        view.write(Write::Expiry {
            c,
            at,
            seq: message.seq,
            present: true,
        })
        .await?;
    }
    Ok(())
}
