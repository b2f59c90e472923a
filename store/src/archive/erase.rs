//! Erasure in the archive (v1.2): an archived bucket whose messages name
//! the erased user is rewritten under its own name, as
//! `Erasure::bucket` has it. Rewritten rather than tombstoned beside:
//! the old bytes must not stay readable anywhere, and a whole-object
//! write replaces them at once (S3 and a local file rename alike), so a
//! reader sees the old object or the new one, never a part. The seq
//! range and the bucket row stay as they are.

use switchboard_protocol::{Timestamp, UserId, reaction};

use super::format::{decode, encode};
use super::objects::ArchiveObjects;
use crate::erasure::Erasure;
use crate::{ArchivedBucket, ConversationKey, Store, StoreResult};

/// Rewrites the bucket's object if it names `user`; whether it did.
/// The user's reactions and votes still have rows in the store (the erasure takes
/// them after the archive): the counts they made in the object go down
/// by them. Safe to repeat but for one window: an object rewritten
/// already names nobody erased, and counts no reaction whose row is
/// gone; a process killed after the rewrite and before the rows go
/// (`Mutation::EraseMember`, the conversation's next step) has the
/// counts go down once more on the next request (to no less than 0: a
/// count shown one short, the erasure whole).
pub(super) async fn erase_bucket(
    store: &dyn Store,
    objects: &dyn ArchiveObjects,
    key: &ConversationKey,
    bucket: &ArchivedBucket,
    user: &UserId,
    pseudonym: &UserId,
    at: Timestamp,
) -> StoreResult<bool> {
    let bytes = objects.get(&bucket.object).await?;
    let mut contents = decode(&bucket.object, &bytes)?;
    let seqs: Vec<u64> = contents.messages.iter().map(|m| m.seq).collect();
    let reacted = store.user_reactions(key, user, seqs).await?;
    let mut changed = false;
    for (m, marks) in contents.messages.iter_mut().zip(reacted) {
        changed |= reaction::forget_marks(m, user, &marks);
    }
    let e = Erasure { user, pseudonym };
    if !(e.bucket(&mut contents, at) || changed) {
        return Ok(false);
    }
    objects.put(&bucket.object, encode(&contents)?).await?;
    Ok(true)
}
