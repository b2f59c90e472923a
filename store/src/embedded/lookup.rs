//! The row lookups every other read and write builds on: a prefix scan,
//! whether a conversation exists, and one member's row.

use fjall::Readable;
use switchboard_protocol::UserId;

use super::codec::storage;
use super::keys::{Key, Spaces};
use super::rows::MemberRow;
use crate::{StoreError, StoreResult};

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
    UserId::new(raw).map_err(|e| StoreError::Corrupt(e.to_string()))
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
