//! The v1.2 safety rows in fjall: a conversation's policy and bans, a
//! user's blocks. Reads here; the commit group writes them blindly
//! (`apply/view.rs`), since no rule reads them back within a commit.

use fjall::Readable;
use switchboard_protocol::safety::{Ban, Block, ConversationPolicy};
use switchboard_protocol::{Timestamp, UserId};

use super::codec::{decode, storage};
use super::keys::{Key, Spaces, read_words, str_after};
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
