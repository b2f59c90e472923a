//! The reads of v1.3's open channels: the tenant's directory, member
//! counts, invites, and where a newcomer's history starts.

use fjall::Readable;
use switchboard_protocol::channels::Invite;
use switchboard_protocol::{ConversationId, TenantId};

use super::codec::{decode, storage};
use super::keys::{Key, Spaces, str_part};
use super::lookup::scan;
use super::states::member_state;
use crate::{ConversationKey, Listing, StoreError, StoreResult};

pub(super) fn directory<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    after: Option<&ConversationId>,
    limit: usize,
) -> StoreResult<Vec<(ConversationId, Listing)>> {
    let start = match after {
        // Just past `after`'s key: its terminator, then anything.
        Some(c) => Key::new().s(t).s(c.as_str()).bytes(),
        None => Key::new().s(t).bytes(),
    };
    let end = {
        let mut k = Key::new().s(t).bytes();
        // The tenant's part ends in 0x00; 0x01 is just past every key of it.
        if let Some(last) = k.last_mut() {
            *last = 1;
        }
        k
    };
    let mut rows = Vec::new();
    for g in r.range(&s.directory, start.clone()..end) {
        let (k, v) = g.into_inner().map_err(storage)?;
        if after.is_some() && k.as_ref() == start.as_slice() {
            continue;
        }
        if rows.len() == limit {
            break;
        }
        let id = ConversationId::new(str_part(&k, 1)?).map_err(StoreError::from)?;
        rows.push((id, decode(&v)?));
    }
    Ok(rows)
}

pub(super) fn member_counts<R: Readable>(
    r: &R,
    s: &Spaces,
    keys: &[ConversationKey],
) -> StoreResult<Vec<u64>> {
    keys.iter()
        .map(|k| {
            let prefix = Key::new()
                .s(k.tenant.as_str())
                .s(k.conversation_id.as_str())
                .bytes();
            Ok(scan(r, &s.members, prefix).count() as u64)
        })
        .collect()
}

pub(super) fn invites<R: Readable>(
    r: &R,
    s: &Spaces,
    key: &ConversationKey,
) -> StoreResult<Vec<Invite>> {
    let prefix = Key::new()
        .s(key.tenant.as_str())
        .s(key.conversation_id.as_str())
        .bytes();
    let mut all = scan(r, &s.invites, prefix)
        .map(|kv| kv.and_then(|(_, v)| decode::<Invite>(&v)))
        .collect::<StoreResult<Vec<_>>>()?;
    all.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.code.cmp(&a.code)));
    Ok(all)
}

pub(super) fn invite_by_code<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &TenantId,
    code: &str,
) -> StoreResult<Option<Invite>> {
    let Some(c) = r
        .get(&s.invite_codes, Key::new().s(t.as_str()).s(code).bytes())
        .map_err(storage)?
    else {
        return Ok(None);
    };
    let c = std::str::from_utf8(&c).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    r.get(&s.invites, Key::new().s(t.as_str()).s(c).s(code).bytes())
        .map_err(storage)?
        .map(|v| decode(&v))
        .transpose()
}

pub(super) fn history_floors<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    u: &str,
    conversations: &[ConversationId],
) -> StoreResult<Vec<u64>> {
    conversations
        .iter()
        .map(|c| {
            Ok(member_state(r, s, t, c.as_str(), u)?
                .history_from
                .unwrap_or(0))
        })
        .collect()
}
