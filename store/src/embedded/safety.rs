//! The v1.2 safety rows in fjall: a conversation's policy and bans, a
//! user's blocks. Reads here; the commit group writes them blindly
//! (`apply/view.rs`), since no rule reads them back within a commit.

use fjall::Readable;
use std::collections::BTreeMap;
use switchboard_protocol::safety::{Ban, Block, ConversationPolicy};

use switchboard_protocol::reports::{Report, ReportStatus};
use switchboard_protocol::{MessageId, TenantId, Timestamp, UserId};

use super::codec::{decode, storage};
use super::keys::{Key, Spaces, read_words, str_after, str_part};
use super::lookup::scan;
use crate::{StoreError, StoreResult};

pub(super) fn policy<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
) -> StoreResult<ConversationPolicy> {
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

pub(super) fn blocks<R: Readable>(r: &R, s: &Spaces, t: &str, u: &str) -> StoreResult<Vec<Block>> {
    let prefix = Key::new().s(t).s(u).bytes();
    let mut blocks = scan(r, &s.blocks, prefix.clone())
        .map(|kv| {
            let (k, v) = kv?;
            let user_id = UserId::new(str_after(&k, &prefix)?)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
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
        .map(|(t, n)| {
            TenantId::new(t)
                .map(|t| (t, n))
                .map_err(|e| StoreError::Corrupt(e.to_string()))
        })
        .collect()
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
