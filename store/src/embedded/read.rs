//! Reads. Each function takes any fjall `Readable`: a read snapshot for
//! the store's read methods, or the commit thread's transaction (which sees its
//! own writes) for the checks writes make.

use std::collections::BTreeSet;

use fjall::Readable;
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, MessageId, MessageVersion, TenantId,
    UserId,
};

use super::codec::{decode, storage};
use super::keys::{Key, Spaces, str_part, trailing_day, trailing_u64};
use super::lookup::{check_membership, scan, user_id};
use super::rows::{BucketRow, ConversationMeta, MemberRow, StateRow};
use super::safety;
use super::states::{member_states, roles};
use crate::{
    ArchivedBucket, BucketContents, BucketKey, ConversationDetail, ConversationKey,
    ConversationRecord, HistoryQuery, InboxCursor, MemberRecord, MessageKey, SentKey,
    SequencerState, StoreError, StoreResult,
};

/// The conversation's newest message, found by seeking to the end of its
/// partition of `messages`.
fn last_message<R: Readable>(r: &R, s: &Spaces, t: &str, c: &str) -> StoreResult<Option<Message>> {
    match r
        .prefix(&s.messages, Key::new().s(t).s(c).bytes())
        .next_back()
    {
        Some(g) => {
            let (_, v) = g.into_inner().map_err(storage)?;
            decode(&v).map(Some)
        }
        None => Ok(None),
    }
}

/// Last seq and last activity, derived from the newest message (or the
/// creation time when there is none); `None` if the conversation does not
/// exist. Nothing stores them separately, so an append writes one row less.
pub(super) fn state<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
) -> StoreResult<Option<StateRow>> {
    let Some(meta) = r
        .get(&s.conversations, Key::new().s(t).s(c).bytes())
        .map_err(storage)?
    else {
        return Ok(None);
    };
    let last = last_message(r, s, t, c)?;
    // The metadata is only decoded for a conversation without messages.
    let created_at = match &last {
        Some(m) => m.created_at,
        None => decode::<ConversationMeta>(&meta)?.created_at,
    };
    Ok(Some(StateRow::derive(last.as_ref(), created_at)))
}

/// The user ids of a conversation's members, in order.
pub(super) fn member_ids<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
) -> StoreResult<Vec<String>> {
    scan(r, &s.members, Key::new().s(t).s(c).bytes())
        .map(|kv| kv.and_then(|(k, _)| str_part(&k, 2).map(str::to_owned)))
        .collect()
}

/// The device ids of a user.
pub(super) fn device_ids<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    u: &str,
) -> StoreResult<Vec<String>> {
    scan(r, &s.devices, Key::new().s(t).s(u).bytes())
        .map(|kv| kv.and_then(|(k, _)| str_part(&k, 2).map(str::to_owned)))
        .collect()
}

fn members<R: Readable>(r: &R, s: &Spaces, t: &str, c: &str) -> StoreResult<Vec<MemberRecord>> {
    scan(r, &s.members, Key::new().s(t).s(c).bytes())
        .map(|kv| {
            let (k, joined) = kv?;
            let marks = r.get(&s.member_marks, &k).map_err(storage)?;
            Ok(MemberRow::decode(&joined, marks.as_deref())?.record(user_id(str_part(&k, 2)?)?))
        })
        .collect()
}

pub(super) fn message<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    seq: u64,
) -> StoreResult<Option<Message>> {
    r.get(&s.messages, Key::new().s(t).s(c).n(seq).bytes())
        .map_err(storage)?
        .map(|v| decode(&v))
        .transpose()
}

pub(super) fn conversation_record<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
) -> StoreResult<Option<ConversationRecord>> {
    let Some(meta) = r
        .get(&s.conversations, Key::new().s(t).s(c).bytes())
        .map_err(storage)?
    else {
        return Ok(None);
    };
    let meta: ConversationMeta = decode(&meta)?;
    let last_message = last_message(r, s, t, c)?;
    let state = StateRow::derive(last_message.as_ref(), meta.created_at);
    let key = ConversationKey {
        tenant: TenantId::new(t).map_err(StoreError::from)?,
        conversation_id: ConversationId::new(c).map_err(StoreError::from)?,
    };
    let record = meta.record(&key, state, last_message);
    Ok(Some(record.with_settings(safety::settings(r, s, t, c)?)))
}

pub(super) fn sequencer_states<R: Readable>(
    r: &R,
    s: &Spaces,
    keys: &[ConversationKey],
) -> StoreResult<Vec<Option<SequencerState>>> {
    keys.iter()
        .map(|k| {
            let (t, c) = (k.tenant.as_str(), k.conversation_id.as_str());
            let (Some(meta), Some(state)) = (
                r.get(&s.conversations, Key::new().s(t).s(c).bytes())
                    .map_err(storage)?,
                state(r, s, t, c)?,
            ) else {
                return Ok(None);
            };
            let meta: ConversationMeta = decode(&meta)?;
            let states = member_states(r, s, t, c)?;
            let roles = roles(r, s, t, c, meta.kind, &meta.created_by, &states)?;
            let members: BTreeSet<UserId> = roles.keys().cloned().collect();
            let states = states
                .into_iter()
                .map(|(u, state)| Ok((user_id(&u)?, state)))
                .collect::<StoreResult<_>>()?;
            let mut blocked_by = BTreeSet::new();
            if meta.kind == ConversationKind::Direct {
                for (user, other) in members.iter().zip(members.iter().rev()) {
                    if user != other && safety::blocks_user(r, s, t, user.as_str(), other.as_str())?
                    {
                        blocked_by.insert(user.clone());
                    }
                }
            }
            let settings = safety::settings(r, s, t, c)?;
            Ok(Some(SequencerState {
                kind: meta.kind,
                title: meta.title,
                created_by: meta.created_by,
                last_seq: state.last_seq,
                members,
                roles,
                states,
                policy: settings.policy,
                custom: settings.custom,
                channel: settings.channel,
                blocked_by,
                mutes: settings.mutes,
            }))
        })
        .collect()
}

pub(super) fn sent_seq<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    sender: &str,
    client_msg_id: &str,
) -> StoreResult<Option<u64>> {
    r.get(
        &s.sent,
        Key::new().s(t).s(c).s(sender).s(client_msg_id).bytes(),
    )
    .map_err(storage)?
    .map(|v| super::keys::read_words::<1>(&v).map(|[seq]| seq))
    .transpose()
}

pub(super) fn find_sent<R: Readable>(
    r: &R,
    s: &Spaces,
    keys: &[SentKey],
) -> StoreResult<Vec<Option<Message>>> {
    keys.iter()
        .map(|k| {
            let (t, c) = (k.tenant.as_str(), k.conversation_id.as_str());
            match sent_seq(r, s, t, c, k.sender.as_str(), k.client_msg_id.as_str())? {
                Some(seq) => message(r, s, t, c, seq),
                None => Ok(None),
            }
        })
        .collect()
}

fn seq_of<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    id: MessageId,
) -> StoreResult<Option<u64>> {
    r.get(
        &s.message_index,
        Key::new().s(t).s(c).n(id.as_u64()).bytes(),
    )
    .map_err(storage)?
    .map(|v| super::keys::read_words::<1>(&v).map(|[seq]| seq))
    .transpose()
}

pub(super) fn find_messages<R: Readable>(
    r: &R,
    s: &Spaces,
    keys: &[MessageKey],
) -> StoreResult<Vec<Option<Message>>> {
    keys.iter()
        .map(|k| {
            let (t, c) = (k.tenant.as_str(), k.conversation_id.as_str());
            match seq_of(r, s, t, c, k.message_id)? {
                Some(seq) => message(r, s, t, c, seq),
                None => Ok(None),
            }
        })
        .collect()
}

pub(super) fn versions<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    conversation: &ConversationId,
    reader: &UserId,
    id: MessageId,
) -> StoreResult<Vec<MessageVersion>> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    check_membership(r, s, t, c, reader.as_str())?;
    let seq = seq_of(r, s, t, c, id)?.ok_or(StoreError::NotFound)?;
    versions_at(r, s, t, c, seq)
}

pub(super) fn conversation<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    conversation: &ConversationId,
    reader: &UserId,
) -> StoreResult<ConversationDetail> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    check_membership(r, s, t, c, reader.as_str())?;
    let record = conversation_record(r, s, t, c)?.ok_or(StoreError::NotFound)?;
    let mut members = members(r, s, t, c)?;
    let states = member_states(r, s, t, c)?;
    crate::roles::fill_in(record.kind, &record.created_by, &mut members, &states);
    let read = members
        .iter()
        .find(|m| &m.user_id == reader)
        .map_or(0, |m| m.read_seq);
    let reader_mention_count = super::extras::mention_count(r, s, t, reader.as_str(), c, read)?;
    let blocked = super::unread::blocked_set(r, s, t, reader.as_str())?;
    let reader_unread_count =
        super::unread::unread_count(r, s, t, reader.as_str(), c, read, record.last_seq, &blocked)?;
    Ok(ConversationDetail {
        record,
        members,
        reader_mention_count,
        reader_unread_count,
    })
}

pub(super) fn members_of<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    conversation: &ConversationId,
    reader: &UserId,
) -> StoreResult<(ConversationKind, Vec<UserId>)> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    check_membership(r, s, t, c, reader.as_str())?;
    let meta = r
        .get(&s.conversations, Key::new().s(t).s(c).bytes())
        .map_err(storage)?
        .ok_or(StoreError::NotFound)?;
    let kind = decode::<ConversationMeta>(&meta)?.kind;
    let members = member_ids(r, s, t, c)?
        .iter()
        .map(|m| user_id(m))
        .collect::<StoreResult<Vec<_>>>()?;
    Ok((kind, members))
}

pub(super) fn media_readable<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    blob_ref: &str,
    reader: &UserId,
) -> StoreResult<bool> {
    let (t, u) = (tenant.as_str(), reader.as_str());
    // One row per referencing message: each conversation is asked once.
    let mut asked: Option<String> = None;
    for kv in scan(r, &s.media_refs, Key::new().s(t).s(blob_ref).bytes()) {
        let (k, _) = kv?;
        let c = str_part(&k, 2)?;
        if asked.as_deref() == Some(c) {
            continue;
        }
        let member = Key::new().s(t).s(c).s(u).bytes();
        if r.get(&s.members, member).map_err(storage)?.is_some() {
            return Ok(true);
        }
        asked = Some(c.to_owned());
    }
    Ok(false)
}

pub(super) fn media_referenced<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    blob_ref: &str,
) -> StoreResult<bool> {
    let prefix = Key::new().s(tenant.as_str()).s(blob_ref).bytes();
    match scan(r, &s.media_refs, prefix).next() {
        Some(kv) => kv.map(|_| true),
        None => Ok(false),
    }
}

pub(super) fn memberships<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    user: &UserId,
) -> StoreResult<Vec<(ConversationId, ConversationKind, usize)>> {
    let (t, u) = (tenant.as_str(), user.as_str());
    let mut out = Vec::new();
    for kv in scan(r, &s.user_conversations, Key::new().s(t).s(u).bytes()) {
        let (k, _) = kv?;
        let c = str_part(&k, 2)?;
        let Some(meta) = r
            .get(&s.conversations, Key::new().s(t).s(c).bytes())
            .map_err(storage)?
        else {
            continue;
        };
        let kind = decode::<ConversationMeta>(&meta)?.kind;
        let count = scan(r, &s.members, Key::new().s(t).s(c).bytes()).count();
        let id = ConversationId::new(c).map_err(StoreError::from)?;
        out.push((id, kind, count));
    }
    Ok(out)
}

pub(super) fn history<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    conversation: &ConversationId,
    reader: &UserId,
    query: HistoryQuery,
) -> StoreResult<Vec<Message>> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    check_membership(r, s, t, c, reader.as_str())?;
    let low = query.after_seq.map_or(1, |a| a.saturating_add(1));
    let high = query.before_seq.unwrap_or(u64::MAX);
    if low >= high || query.limit == 0 {
        return Ok(Vec::new());
    }
    if let Some(root) = query.thread_root {
        return super::extras::thread_history(r, s, t, c, root, low, high, query.limit);
    }
    let range = Key::new().s(t).s(c).n(low).bytes()..Key::new().s(t).s(c).n(high).bytes();
    let mut out = Vec::with_capacity(query.limit.min(256));
    for g in r.range(&s.messages, range).rev() {
        let (_, v) = g.into_inner().map_err(storage)?;
        out.push(decode(&v)?);
        if out.len() == query.limit {
            break;
        }
    }
    Ok(out)
}

pub(super) fn replay<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    conversation: &ConversationId,
    reader: &UserId,
    after_seq: u64,
    limit: usize,
) -> StoreResult<Vec<Message>> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    check_membership(r, s, t, c, reader.as_str())?;
    let from = Key::new().s(t).s(c).n(after_seq.saturating_add(1)).bytes();
    let to = Key::new().s(t).s(c).n(u64::MAX).bytes();
    let mut out = Vec::with_capacity(limit.min(256));
    for g in r.range(&s.messages, from..=to) {
        if out.len() == limit {
            break;
        }
        let (_, v) = g.into_inner().map_err(storage)?;
        out.push(decode(&v)?);
    }
    Ok(out)
}

pub(super) fn inbox<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    user: &UserId,
    device: &DeviceId,
    after: Option<&InboxCursor>,
    limit: usize,
) -> StoreResult<Vec<Message>> {
    use std::ops::Bound;
    let (t, u, d) = (tenant.as_str(), user.as_str(), device.as_str());
    let prefix = Key::new().s(t).s(u).s(d).bytes();
    let entries: Box<dyn Iterator<Item = StoreResult<(fjall::Slice, fjall::Slice)>>> = match after {
        None => Box::new(scan(r, &s.inbox, prefix.clone())),
        Some(cursor) => {
            let from = Key::new()
                .s(t)
                .s(u)
                .s(d)
                .s(cursor.conversation_id.as_str())
                .n(cursor.seq)
                .bytes();
            Box::new(
                r.range(&s.inbox, (Bound::Excluded(from), Bound::Unbounded))
                    .map(|g| g.into_inner().map_err(storage))
                    .take_while(|kv| kv.as_ref().map_or(true, |(k, _)| k.starts_with(&prefix))),
            )
        }
    };
    let mut out = Vec::with_capacity(limit.min(256));
    for kv in entries {
        if out.len() == limit {
            break;
        }
        let (k, _) = kv?;
        let c = str_part(&k, 3)?;
        if let Some(m) = message(r, s, t, c, trailing_u64(&k)?)? {
            out.push(m);
        }
    }
    Ok(out)
}

pub(super) fn device_known<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    user: &UserId,
    device: &DeviceId,
) -> StoreResult<bool> {
    r.contains_key(
        &s.devices,
        Key::new()
            .s(tenant.as_str())
            .s(user.as_str())
            .s(device.as_str())
            .bytes(),
    )
    .map_err(storage)
}

pub(super) fn message_seqs<R: Readable>(
    r: &R,
    s: &Spaces,
    keys: &[MessageKey],
) -> StoreResult<Vec<Option<u64>>> {
    keys.iter()
        .map(|k| {
            seq_of(
                r,
                s,
                k.tenant.as_str(),
                k.conversation_id.as_str(),
                k.message_id,
            )
        })
        .collect()
}

/// Where one bucket is: its first and last seq, and its archive object
/// once archived. A live bucket ends where the next day's begins, or at
/// the conversation's last message.
pub(super) fn bucket_span<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    day: u32,
) -> StoreResult<Option<(u64, u64, Option<String>)>> {
    let key = Key::new().s(t).s(c).day(day).bytes();
    let Some(v) = r.get(&s.buckets, &key).map_err(storage)? else {
        return Ok(None);
    };
    let row = BucketRow::decode(&v)?;
    if let Some((last, object)) = row.archived {
        return Ok(Some((row.first, last, Some(object))));
    }
    let next = Key::new().s(t).s(c).day(day.saturating_add(1)).bytes();
    let prefix = Key::new().s(t).s(c).bytes();
    let following = r
        .range(&s.buckets, next..)
        .map(|g| g.into_inner().map_err(storage))
        .take_while(|kv| kv.as_ref().map_or(true, |(k, _)| k.starts_with(&prefix)))
        .next()
        .transpose()?;
    let last = match following {
        Some((_, v)) if day != u32::MAX => BucketRow::decode(&v)?.first.saturating_sub(1),
        _ => state(r, s, t, c)?.map_or(0, |st| st.last_seq),
    };
    Ok(Some((row.first, last, None)))
}

pub(super) fn archive_candidates<R: Readable>(
    r: &R,
    s: &Spaces,
    before_day: u32,
    from: Vec<u8>,
    budget: usize,
) -> StoreResult<(Vec<BucketKey>, Option<Vec<u8>>)> {
    let mut found = Vec::new();
    for (seen, g) in r.range(&s.buckets, from..).enumerate() {
        let (k, v) = g.into_inner().map_err(storage)?;
        if seen == budget {
            return Ok((found, Some(k.to_vec())));
        }
        let day = trailing_day(&k)?;
        if day >= before_day || BucketRow::decode(&v)?.archived.is_some() {
            continue;
        }
        found.push(BucketKey {
            tenant: TenantId::new(str_part(&k, 0)?).map_err(StoreError::from)?,
            conversation_id: ConversationId::new(str_part(&k, 1)?).map_err(StoreError::from)?,
            day,
        });
    }
    Ok((found, None))
}

/// The stored versions of message `seq`, oldest first.
pub(super) fn versions_at<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    seq: u64,
) -> StoreResult<Vec<MessageVersion>> {
    scan(r, &s.versions, Key::new().s(t).s(c).n(seq).bytes())
        .map(|kv| decode(&kv?.1))
        .collect()
}

pub(super) fn bucket_contents<R: Readable>(
    r: &R,
    s: &Spaces,
    bucket: &BucketKey,
    after_seq: u64,
    limit: usize,
) -> StoreResult<BucketContents> {
    let (t, c) = (bucket.tenant.as_str(), bucket.conversation_id.as_str());
    let (first, last, archived) =
        bucket_span(r, s, t, c, bucket.day)?.ok_or(StoreError::NotFound)?;
    if archived.is_some() {
        return Err(StoreError::Conflict("the bucket is archived".into()));
    }
    let from = Key::new()
        .s(t)
        .s(c)
        .n(first.max(after_seq.saturating_add(1)))
        .bytes();
    let to = Key::new().s(t).s(c).n(last).bytes();
    let mut messages: Vec<Message> = Vec::new();
    let mut versions = Vec::new();
    if from <= to {
        for g in r.range(&s.messages, from..=to).take(limit) {
            let (_, v) = g.into_inner().map_err(storage)?;
            let m: Message = decode(&v)?;
            let vs = versions_at(r, s, t, c, m.seq)?;
            if !vs.is_empty() {
                versions.push((m.seq, vs));
            }
            messages.push(m);
        }
    }
    Ok(BucketContents {
        bucket: bucket.clone(),
        first_seq: first,
        last_seq: last,
        messages,
        versions,
    })
}

pub(super) fn archived_buckets<R: Readable>(
    r: &R,
    s: &Spaces,
    key: &ConversationKey,
    after_seq: u64,
    before_seq: u64,
) -> StoreResult<Vec<ArchivedBucket>> {
    let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
    let mut out = Vec::new();
    for kv in scan(r, &s.buckets, Key::new().s(t).s(c).bytes()) {
        let (k, v) = kv?;
        let row = BucketRow::decode(&v)?;
        let Some((last, object)) = row.archived else {
            continue;
        };
        if row.first < before_seq && last > after_seq {
            out.push(ArchivedBucket {
                day: trailing_day(&k)?,
                first_seq: row.first,
                last_seq: last,
                object,
                // Archived before the per-sender index (`senders.rs`).
                senders_indexed: !r.contains_key(&s.unindexed_buckets, &k).map_err(storage)?,
            });
        }
    }
    out.reverse();
    Ok(out)
}
