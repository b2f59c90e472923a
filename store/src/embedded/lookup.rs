//! The row lookups every other read and write builds on: a prefix scan,
//! a bounded walk over a conversation's messages, whether a conversation
//! exists, and one member's row.

use fjall::Readable;
use switchboard_protocol::{Message, UserId};

use super::codec::{decode, storage};
use super::keys::{Key, Spaces};
use super::rows::MemberRow;
use crate::{ConversationKey, ExpiredScan, StoreError, StoreResult};

/// What a walk over messages does with one.
pub(super) enum Visit {
    /// Takes its seq, and goes on.
    Take,
    /// Passes it over, and goes on.
    Pass,
    /// Ends the walk before it: nothing from here on is wanted.
    Stop,
}

/// One step of a walk over the conversation's live message rows after
/// `after_seq`, in seq order, looking at no more than `limit` of them:
/// the seqs `visit` takes, the last seq looked at, and whether the walk
/// reached its end (the last row, or a `Stop`).
pub(super) fn walk_messages<R: Readable>(
    r: &R,
    s: &Spaces,
    key: &ConversationKey,
    after_seq: u64,
    limit: usize,
    mut visit: impl FnMut(&Message) -> Visit,
) -> StoreResult<ExpiredScan> {
    let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
    let range = Key::new().s(t).s(c).n(after_seq.saturating_add(1)).bytes()
        ..=Key::new().s(t).s(c).n(u64::MAX).bytes();
    let mut scan = ExpiredScan {
        last_seen: after_seq,
        ..Default::default()
    };
    for (seen, g) in r.range(&s.messages, range).enumerate() {
        if seen == limit {
            return Ok(scan);
        }
        let (_, v) = g.into_inner().map_err(storage)?;
        let m: Message = decode(&v)?;
        match visit(&m) {
            Visit::Stop => break,
            Visit::Take => scan.seqs.push(m.seq),
            Visit::Pass => {}
        }
        scan.last_seen = m.seq;
    }
    scan.done = true;
    Ok(scan)
}

/// Every key of a keyspace that starts with `prefix`, with its value.
pub(super) fn scan<R: Readable>(
    r: &R,
    space: &fjall::Keyspace,
    prefix: Vec<u8>,
) -> impl Iterator<Item = StoreResult<(fjall::Slice, fjall::Slice)>> {
    r.prefix(space, prefix)
        .map(|g| g.into_inner().map_err(storage))
}

/// Whether the conversation exists (its metadata row does).
pub(super) fn exists<R: Readable>(r: &R, s: &Spaces, t: &str, c: &str) -> StoreResult<bool> {
    r.contains_key(&s.conversations, Key::new().s(t).s(c).bytes())
        .map_err(storage)
}

pub(super) fn member_row<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    u: &str,
) -> StoreResult<Option<MemberRow>> {
    let key = Key::new().s(t).s(c).s(u).bytes();
    let Some(joined) = r.get(&s.members, &key).map_err(storage)? else {
        return Ok(None);
    };
    let marks = r.get(&s.member_marks, &key).map_err(storage)?;
    MemberRow::decode(&joined, marks.as_deref()).map(Some)
}

pub(super) fn user_id(raw: &str) -> StoreResult<UserId> {
    UserId::new(raw).map_err(StoreError::from)
}

/// Membership of `reader`, telling a missing conversation (`NotFound`)
/// from a foreign one (`NotAMember`); conversation ids are not secret
/// within a tenant.
pub(super) fn check_membership<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    reader: &str,
) -> StoreResult<MemberRow> {
    if let Some(row) = member_row(r, s, t, c, reader)? {
        return Ok(row);
    }
    if exists(r, s, t, c)? {
        Err(StoreError::NotAMember)
    } else {
        Err(StoreError::NotFound)
    }
}
