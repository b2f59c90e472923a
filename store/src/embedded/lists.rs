//! A user's conversation list, a page at a time.
//!
//! Nothing indexes a user's conversations by activity (the position is
//! derived from each conversation's newest message, so that an append
//! writes one row less): a page reads the position of every conversation
//! of the user, then whole rows (preview, members, marks) only for the
//! entries it returns. The cost of a page is one seek per conversation of
//! the user plus its own entries, whatever the previews weigh.

use fjall::Readable;
use serde::Deserialize;
use switchboard_protocol::{ConversationId, TenantId, Timestamp, UserId};

use super::codec::{decode, storage};
use super::keys::{Key, Spaces, str_part};
use super::lookup::{member_row, scan, user_id};
use super::read::{conversation_record, member_ids};
use super::rows::ConversationMeta;
use super::states::member_state;
use crate::{ConversationSummary, ListQuery, StoreError, StoreResult};

/// The one field of a stored message a position needs; serde skips the
/// rest of the row without building it.
#[derive(Deserialize)]
struct CreatedAt {
    created_at: Timestamp,
}

/// When the conversation last saw activity: its newest message's time, or
/// its creation while it has none. `None` if it does not exist.
fn last_activity<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
) -> StoreResult<Option<Timestamp>> {
    let newest = r
        .prefix(&s.messages, Key::new().s(t).s(c).bytes())
        .next_back();
    if let Some(g) = newest {
        let (_, v) = g.into_inner().map_err(storage)?;
        return decode::<CreatedAt>(&v).map(|m| Some(m.created_at));
    }
    match r
        .get(&s.conversations, Key::new().s(t).s(c).bytes())
        .map_err(storage)?
    {
        Some(meta) => decode::<ConversationMeta>(&meta).map(|m| Some(m.created_at)),
        None => Ok(None),
    }
}

pub(super) fn conversation_page<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    user: &UserId,
    query: &ListQuery,
) -> StoreResult<Vec<ConversationSummary>> {
    let (t, u) = (tenant.as_str(), user.as_str());
    if query.limit == 0 {
        return Ok(Vec::new());
    }
    let mut positions: Vec<(Timestamp, ConversationId)> = Vec::new();
    for kv in scan(r, &s.user_conversations, Key::new().s(t).s(u).bytes()) {
        let (k, _) = kv?;
        let c = str_part(&k, 2)?;
        let Some(at) = last_activity(r, s, t, c)? else {
            continue;
        };
        let id = ConversationId::new(c).map_err(StoreError::from)?;
        if query.after.as_ref().is_none_or(|a| a.is_before(at, &id)) {
            positions.push((at, id));
        }
    }
    // `list_order`: most recent activity first, then id.
    positions.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut out = Vec::with_capacity(query.limit.min(positions.len()));
    let blocked = super::unread::blocked_set(r, s, t, u)?;
    for (_, id) in positions {
        let c = id.as_str();
        let Some(me) = member_row(r, s, t, c, u)? else {
            continue;
        };
        let Some(record) = conversation_record(r, s, t, c)? else {
            continue;
        };
        let member_ids = member_ids(r, s, t, c)?
            .iter()
            .map(|m| user_id(m))
            .collect::<StoreResult<Vec<_>>>()?;
        let mut me = me.record(user.clone());
        me.settings = member_state(r, s, t, c, u)?.settings;
        let mention_count = super::extras::mention_count(r, s, t, u, c, me.read_seq)?;
        let unread_count =
            super::unread::unread_count(r, s, t, u, c, me.read_seq, record.last_seq, &blocked)?;
        out.push(ConversationSummary {
            record,
            member_ids,
            me,
            mention_count,
            unread_count,
        });
        if out.len() == query.limit {
            break;
        }
    }
    Ok(out)
}
