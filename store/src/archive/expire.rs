//! Expiry in the archive (v1.2): an archived bucket whose messages are
//! past their time is rewritten under its own name with them deleted as
//! a deletion leaves them (the row, its `seq` and `deleted_at`; no
//! content, versions, reactions or mentions). Rewritten, not tombstoned
//! beside, for the reason erasure rewrites (`erase.rs`): the old bytes
//! must not stay readable.
//!
//! The live rows they leave (reaction rows, mentions, media references)
//! go first, in one commit of `Mutation::ExpiredFromArchive`, then the
//! object is written: a process killed between the two finds the
//! messages still in the object and does both again (the first is
//! idempotent), so no media reference is ever left behind.

use switchboard_protocol::{Content, Timestamp};

use super::format::{decode, encode};
use super::objects::ArchiveObjects;
use crate::{ArchivedBucket, ConversationKey, Mutation, Store, StoreResult};

/// Messages per commit of the live rows they leave.
const PART: usize = 500;

/// Rewrites the bucket's object without its messages `seqs` and, with
/// `cutoff`, those created at or before it. How many messages went.
pub(super) async fn expire_bucket(
    store: &dyn Store,
    objects: &dyn ArchiveObjects,
    key: &ConversationKey,
    bucket: &ArchivedBucket,
    seqs: &[u64],
    cutoff: Option<Timestamp>,
    at: Timestamp,
) -> StoreResult<usize> {
    let bytes = objects.get(&bucket.object).await?;
    let mut contents = decode(&bucket.object, &bytes)?;
    let due = |m: &switchboard_protocol::Message| {
        m.deleted_at.is_none()
            && (seqs.contains(&m.seq) || cutoff.is_some_and(|c| m.created_at <= c))
    };
    let mut gone = Vec::new();
    let mut blobs = Vec::new();
    for m in contents.messages.iter().filter(|m| due(m)) {
        let versions = contents
            .versions
            .iter()
            .filter(|(seq, _)| *seq == m.seq)
            .flat_map(|(_, vs)| vs.iter().map(|v| &v.content));
        let mut refs: Vec<String> = m
            .content
            .iter()
            .chain(versions)
            .filter_map(Content::media)
            .map(|media| media.blob_ref.clone())
            .chain(m.blob_refs().into_iter().map(str::to_owned))
            .collect();
        refs.sort_unstable();
        refs.dedup();
        blobs.extend(refs.into_iter().map(|r| (m.seq, r)));
        // What the live rows need of it: its seq and whom it mentions;
        // no content crosses the store's transport.
        let mut slim = m.clone();
        slim.content = None;
        slim.thread = None;
        slim.reactions.clear();
        gone.push(slim);
    }
    if gone.is_empty() {
        return Ok(0);
    }
    let n = gone.len();
    let expired: Vec<u64> = gone.iter().map(|m| m.seq).collect();
    // In parts, so that a full day fits the store's transport.
    let mut blobs = blobs.as_slice();
    for part in gone.chunks(PART) {
        let last = part.last().map_or(0, |m| m.seq);
        let here = blobs.partition_point(|(seq, _)| *seq <= last);
        store
            .commit(vec![Mutation::ExpiredFromArchive {
                key: key.clone(),
                gone: part.to_vec(),
                blobs: blobs[..here].to_vec(),
            }])
            .await?;
        blobs = &blobs[here..];
    }
    for m in &mut contents.messages {
        if expired.contains(&m.seq) {
            m.mark_deleted(at);
        }
    }
    contents.versions.retain(|(seq, _)| !expired.contains(seq));
    objects.put(&bucket.object, encode(&contents)?).await?;
    Ok(n)
}
