//! Erasure's reads over fjall (v1.2): the conversations a user ever
//! joined, and the messages of one that name them; and the index of the
//! first, filled once for stores of earlier layouts.

use fjall::{Database, Readable};
use switchboard_protocol::{ConversationId, UserId};

use super::codec::storage;
use super::keys::{BACKFILL_BATCH, Key, Spaces, str_part};
use super::lookup::{Visit, walk_messages};
use crate::erasure::Erasure;
use crate::{ConversationKey, ExpiredScan, StoreResult};

/// Fills `joined` from the current memberships, once: a store of an
/// earlier layout never recorded the conversations its users left, so an
/// erasure there finds those only where the user is still a member.
pub(super) fn record_joined(db: &Database, s: &Spaces) -> StoreResult<()> {
    const DONE: &str = "joined_recorded";
    if s.meta.contains_key(DONE).map_err(storage)? {
        return Ok(());
    }
    let snap = db.snapshot();
    let mut batch = db.batch();
    for g in snap.iter(&s.user_conversations) {
        let (k, _) = g.into_inner().map_err(storage)?;
        batch.insert(&s.joined, k.to_vec(), []);
        if batch.len() >= BACKFILL_BATCH {
            batch.commit().map_err(storage)?;
            batch = db.batch();
        }
    }
    batch.insert(&s.meta, DONE, []);
    batch.commit().map_err(storage)?;
    db.persist(fjall::PersistMode::SyncAll).map_err(storage)
}

pub(super) fn joined<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &str,
    user: &str,
    after: Option<&ConversationId>,
    limit: usize,
) -> StoreResult<Vec<ConversationId>> {
    let prefix = Key::new().s(tenant).s(user).bytes();
    let start = match after {
        // Just past `after`: its key with one more byte.
        Some(c) => {
            let mut k = Key::new().s(tenant).s(user).s(c.as_str()).bytes();
            k.push(0);
            k
        }
        None => prefix.clone(),
    };
    let mut out = Vec::new();
    for g in r.range(&s.joined, start..) {
        let (k, _) = g.into_inner().map_err(storage)?;
        if !k.starts_with(&prefix) || out.len() == limit {
            break;
        }
        let id = str_part(&k, 2)?;
        out.push(ConversationId::new(id).map_err(|e| {
            crate::StoreError::Corrupt(format!("a joined row holds a bad conversation id: {e}"))
        })?);
    }
    Ok(out)
}

pub(super) fn naming<R: Readable>(
    r: &R,
    s: &Spaces,
    key: &ConversationKey,
    user: &UserId,
    after_seq: u64,
    limit: usize,
) -> StoreResult<ExpiredScan> {
    let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
    let e = Erasure {
        user,
        pseudonym: user,
    };
    walk_messages(r, s, key, after_seq, limit, |m| {
        let reacted = || {
            let prefix = Key::new().s(t).s(c).n(m.seq).s(user.as_str()).bytes();
            r.prefix(&s.reactions, prefix).next().is_some()
        };
        if e.names(m) || reacted() {
            Visit::Take
        } else {
            Visit::Pass
        }
    })
}
