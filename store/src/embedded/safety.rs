//! The v1.2 safety rows in fjall: a conversation's policy and bans, a
//! user's blocks; and the profiles of v1.3, which are also kept per user. Reads here; the commit group writes them blindly
//! (`apply/view.rs`), since no rule reads them back within a commit.

use fjall::Readable;
use std::collections::BTreeMap;
use switchboard_protocol::safety::{Ban, Block, ConversationPolicy};

use switchboard_protocol::profile::Profile;
use switchboard_protocol::reports::{Report, ReportStatus};
use switchboard_protocol::{ConversationId, MessageId, TenantId, Timestamp, UserId};

use super::codec::{decode, storage};
use super::keys::{Key, Spaces, read_words, str_after, str_part, trailing_u64};
use super::lookup::{Visit, scan, walk_messages};
use crate::{ConversationKey, ConversationSettings, ExpiredScan, StoreError, StoreResult};

pub(super) fn settings<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
) -> StoreResult<ConversationSettings> {
    r.get(&s.policies, Key::new().s(t).s(c).bytes())
        .map_err(storage)?
        .map(|v| decode(&v))
        .transpose()
        .map(Option::unwrap_or_default)
}

pub(super) fn bans<R: Readable>(r: &R, s: &Spaces, t: &str, c: &str) -> StoreResult<Vec<Ban>> {
    let mut bans = scan(r, &s.bans, Key::new().s(t).s(c).bytes())
        .map(|kv| kv.and_then(|(_, v)| decode::<Ban>(&v)))
        .collect::<StoreResult<Vec<_>>>()?;
    bans.sort_by(|a, b| {
        b.banned_at
            .cmp(&a.banned_at)
            .then(a.user_id.cmp(&b.user_id))
    });
    Ok(bans)
}

/// Each user's profile, in the order asked (v1.3).
pub(super) fn profiles<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    users: &[UserId],
) -> StoreResult<Vec<Option<Profile>>> {
    users
        .iter()
        .map(|u| {
            r.get(&s.profiles, Key::new().s(t).s(u.as_str()).bytes())
                .map_err(storage)?
                .map(|v| decode(&v))
                .transpose()
        })
        .collect()
}

pub(super) fn blocks<R: Readable>(r: &R, s: &Spaces, t: &str, u: &str) -> StoreResult<Vec<Block>> {
    let prefix = Key::new().s(t).s(u).bytes();
    let mut blocks = scan(r, &s.blocks, prefix.clone())
        .map(|kv| {
            let (k, v) = kv?;
            let user_id = UserId::new(str_after(&k, &prefix)?).map_err(StoreError::from)?;
            let [at] = read_words::<1>(&v)?;
            Ok(Block {
                user_id,
                blocked_at: Timestamp::from_unix_ms(at as i64),
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    blocks.sort_by(|a, b| {
        b.blocked_at
            .cmp(&a.blocked_at)
            .then(a.user_id.cmp(&b.user_id))
    });
    Ok(blocks)
}

/// A tenant's reports with `status`, newest first, below `before`.
pub(super) fn reports<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    status: ReportStatus,
    before: Option<MessageId>,
    limit: usize,
) -> StoreResult<Vec<Report>> {
    let end = Key::new()
        .s(t)
        .n(before.map_or(u64::MAX, MessageId::as_u64))
        .bytes();
    let range = Key::new().s(t).bytes()..end;
    let mut out = Vec::new();
    let space = match status {
        ReportStatus::Open => &s.open_reports,
        ReportStatus::Resolved => &s.reports,
    };
    for g in r.range(space, range).rev() {
        if out.len() == limit {
            break;
        }
        let (k, v) = g.into_inner().map_err(storage)?;
        let report = match status {
            ReportStatus::Open => match r.get(&s.reports, &k).map_err(storage)? {
                Some(v) => decode::<Report>(&v)?,
                None => continue,
            },
            ReportStatus::Resolved => decode::<Report>(&v)?,
        };
        if report.status == status {
            out.push(report);
        }
    }
    Ok(out)
}

pub(super) fn report<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    id: MessageId,
) -> StoreResult<Option<Report>> {
    r.get(&s.reports, Key::new().s(t).n(id.as_u64()).bytes())
        .map_err(storage)?
        .map(|v| decode(&v))
        .transpose()
}

/// Open reports per tenant.
pub(super) fn open_reports<R: Readable>(r: &R, s: &Spaces) -> StoreResult<Vec<(TenantId, u64)>> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for kv in scan(r, &s.open_reports, Vec::new()) {
        let (k, _) = kv?;
        *counts.entry(str_part(&k, 0)?.to_owned()).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(t, n)| TenantId::new(t).map(|t| (t, n)).map_err(StoreError::from))
        .collect()
}

/// Conversations with a lifetime, from key `from` on; the key to go on
/// from when `budget` rows were looked at.
#[allow(clippy::type_complexity)]
pub(super) fn expiring<R: Readable>(
    r: &R,
    s: &Spaces,
    from: Vec<u8>,
    budget: usize,
) -> StoreResult<(Vec<(ConversationKey, ConversationPolicy)>, Option<Vec<u8>>)> {
    let mut found = Vec::new();
    for (seen, g) in r.range(&s.policies, from..).enumerate() {
        let (k, v) = g.into_inner().map_err(storage)?;
        if seen == budget {
            return Ok((found, Some(k.to_vec())));
        }
        let policy: ConversationPolicy = decode(&v)?;
        if policy.lifetime_ms().is_none() {
            continue;
        }
        let key = ConversationKey::new(
            TenantId::new(str_part(&k, 0)?).map_err(StoreError::from)?,
            ConversationId::new(str_part(&k, 1)?).map_err(StoreError::from)?,
        );
        found.push((key, policy));
    }
    Ok((found, None))
}

/// A tenant's conversations from `from` (a key; empty: the first),
/// looking at `budget` rows; where the next step starts.
pub(super) fn tenant_conversations<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    from: Vec<u8>,
    budget: usize,
) -> StoreResult<(Vec<ConversationId>, Option<Vec<u8>>)> {
    let prefix = Key::new().s(tenant.as_str()).bytes();
    let start = if from.starts_with(&prefix) {
        from
    } else {
        prefix.clone()
    };
    let mut found = Vec::new();
    for (seen, g) in r.range(&s.conversations, start..).enumerate() {
        let (k, _) = g.into_inner().map_err(storage)?;
        if !k.starts_with(&prefix) {
            break;
        }
        if seen == budget {
            return Ok((found, Some(k.to_vec())));
        }
        found.push(ConversationId::new(str_part(&k, 1)?).map_err(StoreError::from)?);
    }
    Ok((found, None))
}

/// Live messages after `after_seq` created at or before `cutoff`.
pub(super) fn expired<R: Readable>(
    r: &R,
    s: &Spaces,
    key: &ConversationKey,
    after_seq: u64,
    cutoff: Timestamp,
    limit: usize,
) -> StoreResult<ExpiredScan> {
    walk_messages(r, s, key, after_seq, limit, |m| {
        if m.created_at > cutoff {
            Visit::Stop
        } else if m.deleted_at.is_none() {
            Visit::Take
        } else {
            Visit::Pass
        }
    })
}

/// Messages whose `expires_at` is at or before `now`.
pub(super) fn due<R: Readable>(
    r: &R,
    s: &Spaces,
    key: &ConversationKey,
    now: Timestamp,
    limit: usize,
) -> StoreResult<Vec<(Timestamp, u64)>> {
    let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
    let prefix = Key::new().s(t).s(c).bytes();
    let end = Key::new()
        .s(t)
        .s(c)
        .n(now.unix_ms().max(0) as u64)
        .n(u64::MAX)
        .bytes();
    let mut out = Vec::new();
    for g in r.range(&s.expiries, prefix.clone()..=end).take(limit) {
        let (k, _) = g.into_inner().map_err(storage)?;
        let at = k
            .get(prefix.len()..prefix.len() + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
            .ok_or_else(|| StoreError::Corrupt("malformed expiry key".into()))?;
        out.push((Timestamp::from_unix_ms(at as i64), trailing_u64(&k)?));
    }
    Ok(out)
}

/// Whether `user` blocks `target`.
pub(super) fn blocks_user<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    user: &str,
    target: &str,
) -> StoreResult<bool> {
    r.contains_key(&s.blocks, Key::new().s(t).s(user).s(target).bytes())
        .map_err(storage)
}
