//! Who has spoken to whom: the reads behind consent to groups and the
//! scope of presence, and the one-time record of past speakers.
//!
//! A user knows someone when they share a conversation that the user
//! created or has sent in (`speakers`). Merely being put into a
//! conversation, or opened a direct conversation with, is not knowing.

use std::collections::BTreeSet;

use fjall::{Database, Readable};
use switchboard_protocol::{ConversationKind, TenantId, UserId};

use super::codec::{decode, storage};
use super::keys::{BACKFILL_BATCH, Key, Spaces, str_part, trailing_u64};
use super::lookup::{member_row, scan, user_id};
use super::read::member_ids;
use super::rows::ConversationMeta;
use crate::{Consent, ConsentQuery, StoreResult};

/// The unsolicited adds recorded for one user (`prefix`: tenant, user):
/// each row's key and when it was made (Unix ms).
pub(super) fn unsolicited_times<R: Readable>(
    r: &R,
    s: &Spaces,
    prefix: Vec<u8>,
) -> StoreResult<Vec<(Vec<u8>, i64)>> {
    scan(r, &s.unsolicited, prefix)
        .map(|kv| {
            let (k, _) = kv?;
            let at = trailing_u64(&k)? as i64;
            Ok((k.to_vec(), at))
        })
        .collect()
}

fn is_speaker<R: Readable>(r: &R, s: &Spaces, t: &str, c: &str, u: &str) -> StoreResult<bool> {
    r.contains_key(&s.speakers, Key::new().s(t).s(c).s(u).bytes())
        .map_err(storage)
}

/// The conversation's metadata, if it exists.
fn meta<R: Readable>(r: &R, s: &Spaces, t: &str, c: &str) -> StoreResult<Option<ConversationMeta>> {
    r.get(&s.conversations, Key::new().s(t).s(c).bytes())
        .map_err(storage)?
        .map(|m| decode(&m))
        .transpose()
}

/// Whether `u` created conversation `c` or has sent in it.
fn has_spoken<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    u: &str,
    meta: &ConversationMeta,
) -> StoreResult<bool> {
    Ok(meta.created_by.as_str() == u || is_speaker(r, s, t, c, u)?)
}

pub(super) fn contacts<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    user: &UserId,
) -> StoreResult<Vec<UserId>> {
    let (t, u) = (tenant.as_str(), user.as_str());
    let mut out = BTreeSet::new();
    for kv in scan(r, &s.user_conversations, Key::new().s(t).s(u).bytes()) {
        let (k, _) = kv?;
        let c = str_part(&k, 2)?;
        let Some(meta) = meta(r, s, t, c)? else {
            continue;
        };
        if meta.kind != ConversationKind::Direct || !has_spoken(r, s, t, c, u, &meta)? {
            continue;
        }
        for m in member_ids(r, s, t, c)? {
            if m != u {
                out.insert(user_id(&m)?);
            }
        }
    }
    Ok(out.into_iter().collect())
}

fn knows<R: Readable>(r: &R, s: &Spaces, t: &str, u: &str, actor: &str) -> StoreResult<bool> {
    for kv in scan(r, &s.user_conversations, Key::new().s(t).s(u).bytes()) {
        let (k, _) = kv?;
        let c = str_part(&k, 2)?;
        // Most of a user's conversations are not the actor's: that read
        // comes first.
        if member_row(r, s, t, c, actor)?.is_none() {
            continue;
        }
        if let Some(meta) = meta(r, s, t, c)?
            && has_spoken(r, s, t, c, u, &meta)?
        {
            return Ok(true);
        }
    }
    Ok(false)
}

pub(super) fn consent<R: Readable>(
    r: &R,
    s: &Spaces,
    queries: &[ConsentQuery],
) -> StoreResult<Vec<Consent>> {
    queries
        .iter()
        .map(|q| {
            let (t, u) = (q.tenant.as_str(), q.user.as_str());
            let knows_actor = knows(r, s, t, u, q.actor.as_str())?;
            let recent = unsolicited_times(r, s, Key::new().s(t).s(u).bytes())?
                .into_iter()
                .filter(|(_, at)| *at >= q.since.unix_ms())
                .count();
            Ok(Consent {
                knows_actor,
                unsolicited: u32::try_from(recent).unwrap_or(u32::MAX),
            })
        })
        .collect()
}

/// Stores made before speakers were recorded: every member with an
/// idempotency key in a conversation has sent there. Runs once per store
/// (a `meta` flag says it ran). Keys of archived buckets are gone, so a
/// member whose only messages are archived stays unknown until they send
/// again.
pub(super) fn record_past_speakers(db: &Database, s: &Spaces) -> StoreResult<()> {
    const DONE: &str = "speakers_recorded";
    if s.meta.contains_key(DONE).map_err(storage)? {
        return Ok(());
    }
    let snap = db.snapshot();
    let mut batch = db.batch();
    // Keys are in (tenant, conversation, sender) order: one sender's keys
    // follow each other.
    let mut last = Vec::new();
    for g in snap.iter(&s.sent) {
        let (k, _) = g.into_inner().map_err(storage)?;
        let (t, c, u) = (str_part(&k, 0)?, str_part(&k, 1)?, str_part(&k, 2)?);
        let speaker = Key::new().s(t).s(c).s(u).bytes();
        if speaker == last {
            continue;
        }
        last.clone_from(&speaker);
        if member_row(&snap, s, t, c, u)?.is_none() {
            continue;
        }
        batch.insert(&s.speakers, speaker, []);
        if batch.len() >= BACKFILL_BATCH {
            batch.commit().map_err(storage)?;
            batch = db.batch();
        }
    }
    batch.insert(&s.meta, DONE, []);
    batch.commit().map_err(storage)?;
    db.persist(fjall::PersistMode::SyncAll).map_err(storage)
}
