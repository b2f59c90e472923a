//! Tiered storage (F14): old day buckets move to an object store, and
//! reads find them there.
//!
//! Moving a bucket ([`archive_bucket`]) reads its rows, writes them to one
//! compressed object, and commits [`Mutation::Archive`], which marks the
//! bucket and removes its rows. It must be ordered with the conversation's
//! other writes: an edit between the read and the mark would otherwise be
//! lost with the removed rows. So the worker's writer for the
//! conversation's partition asks for it, between two batches, by
//! committing [`Mutation::MoveToArchive`]; [`Tiered`] does the move where
//! the store is (the process holding the embedded store, reached over
//! NATS, or the writer itself with Scylla), so the object goes to the
//! blob store that the same `Tiered` reads. The backends also refuse a
//! mark whose bucket range moved.
//!
//! [`Tiered`] wraps a backend and makes the archive invisible: history,
//! replay, message lookups and versions merge archived rows in, live rows
//! winning. An edit or delete of an archived message first puts it back
//! among the live rows ([`Mutation::Restore`]) in the same commit, so the
//! backends never edit what they do not hold.
//!
//! This module knows objects only by name through [`ArchiveObjects`]; the
//! blob crate's stores implement it at the binary's edge.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use switchboard_protocol::{
    ConversationId, DeviceId, Message, MessageId, MessageVersion, TenantId, Timestamp, UserId,
};

use crate::{
    Answer, ArchivedBucket, BucketContents, BucketKey, ConversationKey, HistoryQuery, InboxSweep,
    MarkChange, MessageKey, Mutation, Read, Store, StoreError, StoreResult, WriterClaim,
};

mod commits;
mod erase;
mod expire;
mod format;
mod moving;
mod objects;
mod senders;
pub use format::{MAX_OBJECT_BYTES, decode, encode, object_name};
pub use moving::{archive_bucket, prepare_archive};
pub use objects::{ArchiveObjects, MemoryObjects};

/// Decoded buckets [`Tiered`] keeps, so that paging through archived
/// history does not fetch the same object for every page.
const CACHED_BUCKETS: usize = 32;
/// How long a decoded bucket is used: an object another process rewrote
/// (expiry, erasure) is read afresh after this.
const CACHED_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// A [`Store`] whose old buckets may be in the archive.
pub struct Tiered {
    inner: Arc<dyn Store>,
    objects: Arc<dyn ArchiveObjects>,
    /// Object name, when it was read, its contents.
    cache: Mutex<VecDeque<(String, Instant, Arc<BucketContents>)>>,
}

impl Tiered {
    pub fn new(inner: Arc<dyn Store>, objects: Arc<dyn ArchiveObjects>) -> Self {
        Self {
            inner,
            objects,
            cache: Mutex::new(VecDeque::new()),
        }
    }

    /// Rewrites one archived bucket without the messages that expired,
    /// and drops the cached copy. A bucket not archived (any more) is
    /// left alone.
    async fn expire_archived(
        &self,
        bucket: &BucketKey,
        seqs: &[u64],
        cutoff: Option<Timestamp>,
        at: Timestamp,
    ) -> StoreResult<()> {
        let key = bucket.conversation();
        let Some(b) = self.archived_day(bucket).await? else {
            return Ok(());
        };
        let (store, objects) = (self.inner.as_ref(), self.objects.as_ref());
        if expire::expire_bucket(store, objects, &key, &b, seqs, cutoff, at).await? > 0 {
            self.forget_cached(&b.object);
        }
        Ok(())
    }

    /// The bucket as archived, if it is.
    async fn archived_day(&self, bucket: &BucketKey) -> StoreResult<Option<ArchivedBucket>> {
        let archived = self
            .inner
            .archived_buckets(&bucket.conversation(), 0, u64::MAX)
            .await?;
        Ok(archived.into_iter().find(|b| b.day == bucket.day))
    }

    fn forget_cached(&self, object: &str) {
        if let Ok(mut cache) = self.cache.lock() {
            cache.retain(|(o, _, _)| o != object);
        }
    }

    /// Rewrites one archived bucket without the erased user, and drops
    /// the cached copy. A bucket not archived (any more) is left alone.
    async fn erase_archived(
        &self,
        bucket: &BucketKey,
        user: &UserId,
        pseudonym: &UserId,
        at: Timestamp,
    ) -> StoreResult<()> {
        let key = bucket.conversation();
        let Some(b) = self.archived_day(bucket).await? else {
            return Ok(());
        };
        let (store, objects) = (self.inner.as_ref(), self.objects.as_ref());
        if erase::erase_bucket(store, objects, &key, &b, user, pseudonym, at).await? {
            self.forget_cached(&b.object);
        }
        Ok(())
    }

    async fn load(&self, b: &ArchivedBucket) -> StoreResult<Arc<BucketContents>> {
        if let Ok(cache) = self.cache.lock()
            && let Some((_, _, c)) = cache
                .iter()
                .find(|(o, read, _)| *o == b.object && read.elapsed() < CACHED_FOR)
        {
            return Ok(c.clone());
        }
        let bytes = self.objects.get(&b.object).await?;
        let contents = Arc::new(decode(&b.object, &bytes)?);
        if (contents.first_seq, contents.last_seq) != (b.first_seq, b.last_seq) {
            return Err(StoreError::ArchiveUnreadable {
                object: b.object.clone(),
                reason: "it holds another bucket".into(),
            });
        }
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHED_BUCKETS {
                cache.pop_front();
            }
            cache.retain(|(o, _, _)| *o != b.object);
            cache.push_back((b.object.clone(), Instant::now(), contents.clone()));
        }
        Ok(contents)
    }

    /// The archived copy of message `seq` with its versions.
    async fn archived_message(
        &self,
        key: &ConversationKey,
        seq: u64,
    ) -> StoreResult<Option<(Message, Vec<MessageVersion>)>> {
        let buckets = self
            .inner
            .archived_buckets(key, seq.saturating_sub(1), seq.saturating_add(1))
            .await?;
        for b in buckets {
            let contents = self.load(&b).await?;
            if let Some(m) = contents.messages.iter().find(|m| m.seq == seq) {
                let versions = contents
                    .versions
                    .iter()
                    .find(|(s, _)| *s == seq)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                return Ok(Some((m.clone(), versions)));
            }
        }
        Ok(None)
    }

    /// Archived messages with `after < seq < before`: the `want` newest
    /// (or oldest, with `oldest_first`) from the archived buckets.
    async fn archived_range(
        &self,
        key: &ConversationKey,
        after: u64,
        before: u64,
        want: usize,
        oldest_first: bool,
    ) -> StoreResult<Vec<Message>> {
        if want == 0 || after.saturating_add(1) >= before {
            return Ok(Vec::new());
        }
        let mut buckets = self.inner.archived_buckets(key, after, before).await?;
        if oldest_first {
            buckets.reverse();
        }
        let mut out = Vec::new();
        for b in buckets {
            if out.len() >= want {
                break;
            }
            let contents = self.load(&b).await?;
            out.extend(
                contents
                    .messages
                    .iter()
                    .filter(|m| m.seq > after && m.seq < before)
                    .cloned(),
            );
        }
        Ok(out)
    }
}

/// Live rows and archived rows as one, live winning, `limit` of them from
/// the newest (or the oldest).
fn merge(
    live: Vec<Message>,
    archived: Vec<Message>,
    limit: usize,
    newest_first: bool,
) -> Vec<Message> {
    let mut all: BTreeMap<u64, Message> = archived.into_iter().map(|m| (m.seq, m)).collect();
    all.extend(live.into_iter().map(|m| (m.seq, m)));
    if newest_first {
        all.into_values().rev().take(limit).collect()
    } else {
        all.into_values().take(limit).collect()
    }
}

/// The reads the archive changes.
impl Tiered {
    async fn find_messages_merged(
        &self,
        keys: Vec<MessageKey>,
    ) -> StoreResult<Vec<Option<Message>>> {
        let mut found = self.inner.find_messages(keys.clone()).await?;
        let missing: Vec<usize> = (0..found.len()).filter(|i| found[*i].is_none()).collect();
        if missing.is_empty() {
            return Ok(found);
        }
        let seqs = self
            .inner
            .message_seqs(missing.iter().map(|i| keys[*i].clone()).collect())
            .await?;
        for (i, seq) in missing.into_iter().zip(seqs) {
            let Some(seq) = seq else { continue };
            let key = ConversationKey {
                tenant: keys[i].tenant.clone(),
                conversation_id: keys[i].conversation_id.clone(),
            };
            found[i] = self.archived_message(&key, seq).await?.map(|(m, _)| m);
        }
        Ok(found)
    }

    async fn versions_merged(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        message_id: MessageId,
    ) -> StoreResult<Vec<MessageVersion>> {
        // Checks membership and that the message exists.
        let live = self
            .inner
            .versions(tenant, conversation, reader, message_id)
            .await?;
        if !live.is_empty() {
            return Ok(live);
        }
        let key = MessageKey {
            tenant: tenant.clone(),
            conversation_id: conversation.clone(),
            message_id,
        };
        // A live row (restored and edited or deleted since) is the truth.
        if let [Some(_)] = self
            .inner
            .find_messages(vec![key.clone()])
            .await?
            .as_slice()
        {
            return Ok(live);
        }
        let Some(Some(seq)) = self.inner.message_seqs(vec![key]).await?.pop() else {
            return Ok(live);
        };
        let ckey = ConversationKey {
            tenant: tenant.clone(),
            conversation_id: conversation.clone(),
        };
        Ok(match self.archived_message(&ckey, seq).await? {
            Some((m, versions)) if m.deleted_at.is_none() => versions,
            _ => Vec::new(),
        })
    }

    async fn history_merged(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        query: HistoryQuery,
    ) -> StoreResult<Vec<Message>> {
        // Reading the live rows checks membership. Of the merged rows the
        // `limit` newest are among the `limit` newest live ones and the
        // `limit` newest archived ones.
        let live = self
            .inner
            .history(tenant, conversation, reader, query)
            .await?;
        // A thread is read from the live rows only: its archived replies
        // (older than the archive age) do not show in the thread's pages.
        if query.thread_root.is_some() {
            return Ok(live);
        }
        let after = query.after_seq.unwrap_or(0);
        let before = query.before_seq.unwrap_or(u64::MAX);
        let key = ConversationKey {
            tenant: tenant.clone(),
            conversation_id: conversation.clone(),
        };
        let archived = self
            .archived_range(&key, after, before, query.limit, false)
            .await?;
        Ok(merge(live, archived, query.limit, true))
    }

    async fn replay_merged(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        let live = self
            .inner
            .replay(tenant, conversation, reader, after_seq, limit)
            .await?;
        let key = ConversationKey {
            tenant: tenant.clone(),
            conversation_id: conversation.clone(),
        };
        let archived = self
            .archived_range(&key, after_seq, u64::MAX, limit, true)
            .await?;
        Ok(merge(live, archived, limit, false))
    }
}

#[async_trait]
impl Store for Tiered {
    async fn ping(&self) -> StoreResult<()> {
        self.inner.ping().await
    }

    async fn commit(&self, mutations: Vec<Mutation>) -> StoreResult<()> {
        self.commit_to(None, mutations).await
    }

    async fn claim_writer(&self, partition: u16) -> StoreResult<WriterClaim> {
        self.inner.claim_writer(partition).await
    }

    async fn commit_as(&self, claim: WriterClaim, mutations: Vec<Mutation>) -> StoreResult<()> {
        self.commit_to(Some(claim), mutations).await
    }

    /// The archive changes the reads of messages: those of old buckets
    /// are read from their objects and merged with the live rows. Every
    /// other read passes on: idempotency keys go with their bucket (a
    /// retry older than the archive age is a new message), media
    /// references, reactions and thread rows are kept when buckets move,
    /// archiving removes the inbox entries of what it moves, and a thread
    /// whose root moved to the archive is not listed.
    async fn read(&self, read: Read) -> StoreResult<Answer> {
        match read {
            Read::FindMessages { keys } => self
                .find_messages_merged(keys)
                .await
                .map(Answer::FindMessages),
            Read::Versions {
                tenant,
                conversation,
                reader,
                message_id,
            } => self
                .versions_merged(&tenant, &conversation, &reader, message_id)
                .await
                .map(Answer::Versions),
            Read::History {
                tenant,
                conversation,
                reader,
                query,
            } => self
                .history_merged(&tenant, &conversation, &reader, query)
                .await
                .map(Answer::History),
            Read::Replay {
                tenant,
                conversation,
                reader,
                after_seq,
                limit,
            } => self
                .replay_merged(&tenant, &conversation, &reader, after_seq, limit)
                .await
                .map(Answer::Replay),
            Read::SentBy {
                key,
                sender,
                before_seq,
                limit,
            } => self
                .sent_by_merged(&key, &sender, before_seq, limit)
                .await
                .map(Answer::SentBy),
            other => self.inner.read(other).await,
        }
    }

    async fn ack_delivered(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        conversation: &ConversationId,
        seq: u64,
    ) -> StoreResult<MarkChange> {
        self.inner
            .ack_delivered(tenant, user, device, conversation, seq)
            .await
    }

    async fn ack_read(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversation: &ConversationId,
        seq: u64,
    ) -> StoreResult<MarkChange> {
        self.inner.ack_read(tenant, user, conversation, seq).await
    }

    async fn expire_inbox(
        &self,
        before: Timestamp,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<InboxSweep> {
        self.inner.expire_inbox(before, cursor, budget).await
    }

    async fn ack_thread_read(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversation: &ConversationId,
        root: MessageId,
        seq: u64,
    ) -> StoreResult<()> {
        self.inner
            .ack_thread_read(tenant, user, conversation, root, seq)
            .await
    }

    async fn register_device(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
    ) -> StoreResult<()> {
        self.inner.register_device(tenant, user, device).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::golden;
    use std::io::Read;
    use switchboard_protocol::{ConversationId, TenantId};

    fn golden_contents() -> BucketContents {
        BucketContents {
            bucket: BucketKey {
                tenant: TenantId::new(golden::TENANT).unwrap(),
                conversation_id: ConversationId::new(golden::CONVERSATION).unwrap(),
                day: 20_601,
            },
            first_seq: 7,
            last_seq: 7,
            messages: vec![golden::message()],
            versions: vec![(7, vec![golden::original_version()])],
        }
    }

    /// Archive objects outlive the code that wrote them: the JSON inside
    /// the LZ4 frame is pinned, and an object framed from it reads back.
    #[test]
    fn archive_objects_keep_their_format() {
        let object = encode(&golden_contents()).unwrap();
        let mut json = String::new();
        lz4_flex::frame::FrameDecoder::new(object.as_slice())
            .read_to_string(&mut json)
            .unwrap();
        assert_eq!(json, golden::ARCHIVE_JSON);

        let mut framed = lz4_flex::frame::FrameEncoder::new(Vec::new());
        std::io::Write::write_all(&mut framed, golden::ARCHIVE_JSON.as_bytes()).unwrap();
        let framed = framed.finish().unwrap();
        assert_eq!(decode("golden", &framed).unwrap(), golden_contents());
        // An object written before v1.1 (its messages without the v1.1
        // fields) reads as the same contents.
        let v1 = golden::ARCHIVE_JSON.replace(
            &golden::MESSAGE_JSON[..golden::MESSAGE_JSON.len() - 1],
            &golden::MESSAGE_JSON_V1[..golden::MESSAGE_JSON_V1.len() - 1],
        );
        assert_ne!(v1, golden::ARCHIVE_JSON);
        let mut framed = lz4_flex::frame::FrameEncoder::new(Vec::new());
        std::io::Write::write_all(&mut framed, v1.as_bytes()).unwrap();
        let framed = framed.finish().unwrap();
        assert_eq!(decode("golden v1", &framed).unwrap(), golden_contents());
        assert_eq!(
            object_name(&golden_contents().bucket),
            "archive/acme/general/20601.json.lz4"
        );
    }
}
