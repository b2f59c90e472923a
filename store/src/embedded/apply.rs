//! The store's rules (`crate::rules`) over fjall. The writer thread
//! applies a group of jobs to one write batch, committed at once: this
//! file is the [`Commit`] view those jobs write through. Reads go to the
//! cache first (which has every write of the group, see `cache.rs`), then
//! to the snapshot of the last commit. Key layout and day buckets are
//! decided here; what a mutation means is decided in `rules.rs`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use fjall::{OwnedWriteBatch, Readable, Snapshot};
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, MessageVersion, TenantId, Timestamp,
    UserId,
};

use super::cache::{Pending, WriterCache};
use super::codec::{decode, encode, storage};
use super::keys::{Key, Spaces, read_words, words};
use super::read::{bucket_span, device_ids, member_ids, member_row, scan, sent_seq, state};
use super::rows::{BucketRow, ConversationMeta, MemberRow, StateRow};
use crate::rules::{self, AckReads, BucketSpan, Commit, InboxEntries, Marks, Placement};
use crate::{
    BucketKey, ConversationKey, ConversationRecord, MarkChange, Mutation, StoreError, StoreResult,
    day_bucket,
};

/// One job for the writer thread.
#[derive(Debug)]
pub(super) enum WriteOp {
    Commit(Vec<Mutation>),
    AckDelivered {
        tenant: TenantId,
        user: UserId,
        device: DeviceId,
        conversation: ConversationId,
        seq: u64,
    },
    AckRead {
        tenant: TenantId,
        user: UserId,
        conversation: ConversationId,
        seq: u64,
    },
    RegisterDevice {
        tenant: TenantId,
        user: UserId,
        device: DeviceId,
        at: Timestamp,
    },
    /// One step of the inbox expiry sweep, from key `from`.
    ExpireInbox {
        before: Timestamp,
        from: Vec<u8>,
        budget: usize,
    },
}

/// What a job produced, handed to its caller once the group is committed.
#[derive(Debug)]
pub(super) enum Applied {
    Done,
    Mark(MarkChange),
    /// Entries looked at, entries removed, and the key the sweep goes on
    /// from.
    Expired(usize, usize, Option<Vec<u8>>),
}

/// Why an operation did not apply.
pub(super) enum ApplyError {
    /// Refused before anything was written: the group can go on.
    Clean(StoreError),
    /// Refused or failed after some writes: the batch must be thrown away.
    Dirty(StoreError),
}

/// Above this many inbox entries, a removal scans the inbox instead of
/// deleting entry by entry.
const MAX_POINT_DELETES: u64 = 1024;

/// Runs a future of the rules over this view to its end. Every read and
/// write of the view is synchronous (fjall on the writer thread), so the
/// future is ready at its first poll; if it ever were not, the job fails
/// instead of blocking the writer.
fn finish_now<T>(f: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => Err(StoreError::Unavailable(
            "a store write waited on something: the embedded writer never should".into(),
        )),
    }
}

/// The writer's view of one group.
pub(super) struct Writer<'a> {
    pub snap: &'a Snapshot,
    pub batch: &'a mut OwnedWriteBatch,
    pub s: &'a Spaces,
    pub cache: &'a mut WriterCache,
    pub pending: &'a mut Pending,
}

/// The two parts of a conversation key as they appear in row keys.
fn parts(c: &ConversationKey) -> (&str, &str) {
    (c.tenant.as_str(), c.conversation_id.as_str())
}

impl Writer<'_> {
    /// Applies one job. A refusal is clean (the group goes on without the
    /// job) when the job wrote nothing to the batch; the rules refuse
    /// before they write, so only a failure midway leaves the batch dirty.
    pub fn apply(&mut self, op: &WriteOp) -> Result<Applied, ApplyError> {
        let before = self.batch.len();
        self.run(op).map_err(|e| {
            if self.batch.len() == before {
                ApplyError::Clean(e)
            } else {
                ApplyError::Dirty(e)
            }
        })
    }

    fn run(&mut self, op: &WriteOp) -> StoreResult<Applied> {
        match op {
            WriteOp::Commit(mutations) => finish_now(async {
                for m in mutations {
                    rules::apply(self, m).await?;
                }
                Ok(Applied::Done)
            }),
            WriteOp::AckRead {
                tenant,
                user,
                conversation,
                seq,
            } => {
                let c = ConversationKey::new(tenant.clone(), conversation.clone());
                finish_now(rules::ack_read(self, &c, user, *seq)).map(Applied::Mark)
            }
            WriteOp::AckDelivered {
                tenant,
                user,
                device,
                conversation,
                seq,
            } => {
                let c = ConversationKey::new(tenant.clone(), conversation.clone());
                finish_now(rules::ack_delivered(self, &c, user, device, *seq)).map(Applied::Mark)
            }
            WriteOp::RegisterDevice {
                tenant,
                user,
                device,
                at,
            } => {
                let (t, u, d) = (tenant.as_str(), user.as_str(), device.as_str());
                let devices = self.device_list(t, u)?;
                if !devices.iter().any(|known| known == d) {
                    devices.push(d.to_owned());
                    self.batch.insert(
                        &self.s.devices,
                        Key::new().s(t).s(u).s(d).bytes(),
                        words([at.unix_ms() as u64]),
                    );
                }
                Ok(Applied::Done)
            }
            WriteOp::ExpireInbox {
                before,
                from,
                budget,
            } => self.expire_inbox(*before, from.clone(), *budget),
        }
    }

    fn state(&mut self, t: &str, c: &str) -> StoreResult<Option<StateRow>> {
        let key = Key::new().s(t).s(c).bytes();
        if let Some(row) = self.cache.states.get(&key) {
            return Ok(*row);
        }
        let row = state(self.snap, self.s, t, c)?;
        self.cache.states.insert(key, row);
        Ok(row)
    }

    /// Records the conversation's new position. The store derives it from
    /// the messages themselves; the cache remembers it for the rest of the
    /// group and after.
    fn set_state(&mut self, t: &str, c: &str, row: StateRow) {
        self.cache
            .states
            .insert(Key::new().s(t).s(c).bytes(), Some(row));
    }

    fn member(&mut self, t: &str, c: &str, u: &str) -> StoreResult<Option<MemberRow>> {
        let key = Key::new().s(t).s(c).s(u).bytes();
        if let Some(row) = self.cache.member_rows.get(&key) {
            return Ok(*row);
        }
        let row = member_row(self.snap, self.s, t, c, u)?;
        self.cache.member_rows.insert(key, row);
        Ok(row)
    }

    fn set_marks(&mut self, t: &str, c: &str, u: &str, row: MemberRow) {
        let key = Key::new().s(t).s(c).s(u).bytes();
        self.batch
            .insert(&self.s.member_marks, key.clone(), row.encode_marks());
        self.cache.member_rows.insert(key, Some(row));
    }

    /// The conversation's member list, loaded into the cache.
    fn member_list(&mut self, t: &str, c: &str) -> StoreResult<&mut Vec<String>> {
        let key = Key::new().s(t).s(c).bytes();
        if !self.cache.members.contains_key(&key) {
            let list = member_ids(self.snap, self.s, t, c)?;
            self.cache.members.insert(key.clone(), list);
        }
        self.cache
            .members
            .get_mut(&key)
            .ok_or_else(|| StoreError::Corrupt("member cache".into()))
    }

    /// The user's device list, loaded into the cache.
    fn device_list(&mut self, t: &str, u: &str) -> StoreResult<&mut Vec<String>> {
        let key = Key::new().s(t).s(u).bytes();
        if !self.cache.devices.contains_key(&key) {
            let list = device_ids(self.snap, self.s, t, u)?;
            self.cache.devices.insert(key.clone(), list);
        }
        self.cache
            .devices
            .get_mut(&key)
            .ok_or_else(|| StoreError::Corrupt("device cache".into()))
    }

    fn cursor(&mut self, key: &[u8]) -> StoreResult<u64> {
        if let Some(seq) = self.cache.cursors.get(key) {
            return Ok(*seq);
        }
        let seq = match self
            .snap
            .get(&self.s.device_cursors, key)
            .map_err(storage)?
        {
            Some(v) => read_words::<1>(&v)?[0],
            None => 0,
        };
        self.cache.cursors.insert(key.to_vec(), seq);
        Ok(seq)
    }

    fn insert_inbox_key(&mut self, key: Vec<u8>, at: Timestamp) {
        self.batch
            .insert(&self.s.inbox, key.clone(), words([at.unix_ms() as u64]));
        self.pending.inbox.insert(key);
    }

    fn remove_inbox_key(&mut self, key: Vec<u8>) {
        self.pending.inbox.remove(&key);
        self.batch.remove(&self.s.inbox, key);
    }

    /// Removes the inbox entries from `low` to `high` (inclusive),
    /// committed ones and this group's.
    fn remove_inbox_between(&mut self, low: Vec<u8>, high: Vec<u8>) -> StoreResult<()> {
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        for g in self.snap.range(&self.s.inbox, low.clone()..=high.clone()) {
            let (k, _) = g.into_inner().map_err(storage)?;
            doomed.push(k.to_vec());
        }
        doomed.extend(self.pending.inbox.range(low..=high).cloned());
        for k in doomed {
            self.remove_inbox_key(k);
        }
        Ok(())
    }

    /// Removes the inbox entries that start with `prefix`: committed ones
    /// and this group's.
    fn remove_inbox_prefix(&mut self, prefix: Vec<u8>) -> StoreResult<()> {
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        for kv in scan(self.snap, &self.s.inbox, prefix.clone()) {
            doomed.push(kv?.0.to_vec());
        }
        doomed.extend(
            self.pending
                .inbox
                .range(prefix.clone()..)
                .take_while(|k| k.starts_with(&prefix))
                .cloned(),
        );
        for k in doomed {
            self.remove_inbox_key(k);
        }
        Ok(())
    }

    /// Removes the inbox entries older than `before` among the next
    /// `budget` from `from`. It runs on the writer thread so that an entry
    /// refreshed by an edit in the same group is seen as fresh.
    fn expire_inbox(
        &mut self,
        before: Timestamp,
        from: Vec<u8>,
        budget: usize,
    ) -> StoreResult<Applied> {
        let before = before.unix_ms() as u64;
        let mut doomed = Vec::new();
        let mut next = None;
        let mut seen = 0;
        for g in self.snap.range(&self.s.inbox, from..) {
            let (k, v) = g.into_inner().map_err(storage)?;
            if seen == budget {
                next = Some(k.to_vec());
                break;
            }
            seen += 1;
            // An entry without a time predates expiry: it is old.
            let written = read_words::<1>(&v).map(|[ms]| ms).unwrap_or(0);
            if written < before && !self.pending.inbox.contains(k.as_ref()) {
                doomed.push(k.to_vec());
            }
        }
        let removed = doomed.len();
        for k in doomed {
            self.remove_inbox_key(k);
        }
        Ok(Applied::Expired(seen, removed, next))
    }

    /// The versions of message `seq` with their keys: this group's, or the
    /// committed ones (then remembered for the group).
    fn versions_with_keys(
        &mut self,
        t: &str,
        c: &str,
        seq: u64,
    ) -> StoreResult<&mut Vec<(Vec<u8>, MessageVersion)>> {
        let message_key = Key::new().s(t).s(c).n(seq).bytes();
        if !self.pending.versions.contains_key(&message_key) {
            let stored = scan(self.snap, &self.s.versions, message_key.clone())
                .map(|kv| {
                    let (k, v) = kv?;
                    Ok((k.to_vec(), decode(&v)?))
                })
                .collect::<StoreResult<Vec<_>>>()?;
            self.pending.versions.insert(message_key.clone(), stored);
        }
        self.pending
            .versions
            .get_mut(&message_key)
            .ok_or_else(|| StoreError::Corrupt("version cache".into()))
    }
}

impl Commit for Writer<'_> {
    async fn last_seq(&mut self, c: &ConversationKey) -> StoreResult<Option<u64>> {
        let (t, c) = parts(c);
        Ok(self.state(t, c)?.map(|row| row.last_seq))
    }

    async fn kind(&mut self, key: &ConversationKey) -> StoreResult<ConversationKind> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).bytes();
        if let Some(kind) = self.cache.kinds.get(&k) {
            return Ok(*kind);
        }
        let meta = self
            .snap
            .get(&self.s.conversations, &k)
            .map_err(storage)?
            .ok_or(StoreError::NotFound)?;
        let kind = decode::<ConversationMeta>(&meta)?.kind;
        self.cache.kinds.insert(k, kind);
        Ok(kind)
    }

    async fn members(&mut self, c: &ConversationKey) -> StoreResult<Vec<String>> {
        let (t, c) = parts(c);
        Ok(self.member_list(t, c)?.clone())
    }

    async fn is_member(&mut self, c: &ConversationKey, user: &str) -> StoreResult<bool> {
        let (t, c) = parts(c);
        Ok(self.member(t, c, user)?.is_some())
    }

    async fn devices(&mut self, tenant: &TenantId, user: &str) -> StoreResult<Vec<String>> {
        Ok(self.device_list(tenant.as_str(), user)?.clone())
    }

    async fn recipients(&mut self, c: &ConversationKey) -> StoreResult<Vec<(String, Vec<String>)>> {
        let mut out = Vec::new();
        for user in self.members(c).await? {
            let devices = self.device_list(c.tenant.as_str(), &user)?.clone();
            out.push((user, devices));
        }
        Ok(out)
    }

    async fn sent_exists(
        &mut self,
        key: &ConversationKey,
        keys: &[(&str, &str)],
    ) -> StoreResult<Vec<bool>> {
        let (t, c) = parts(key);
        keys.iter()
            .map(|(sender, id)| {
                let sent_key = Key::new().s(t).s(c).s(sender).s(id).bytes();
                Ok(self.pending.sent.contains(&sent_key)
                    || sent_seq(self.snap, self.s, t, c, sender, id)?.is_some())
            })
            .collect()
    }

    async fn message(&mut self, key: &ConversationKey, seq: u64) -> StoreResult<Option<Message>> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).n(seq).bytes();
        if let Some(m) = self.pending.messages.get(&k) {
            return Ok(Some(m.clone()));
        }
        match self.snap.get(&self.s.messages, &k).map_err(storage)? {
            Some(bytes) => Ok(Some(decode(&bytes)?)),
            None => Ok(None),
        }
    }

    async fn versions(
        &mut self,
        key: &ConversationKey,
        seq: u64,
    ) -> StoreResult<Vec<MessageVersion>> {
        let (t, c) = parts(key);
        Ok(self
            .versions_with_keys(t, c, seq)?
            .iter()
            .map(|(_, v)| v.clone())
            .collect())
    }

    async fn bucket(&mut self, b: &BucketKey) -> StoreResult<Option<BucketSpan>> {
        let (t, c) = (b.tenant.as_str(), b.conversation_id.as_str());
        Ok(
            bucket_span(self.snap, self.s, t, c, b.day)?.map(|(first, last, archived)| {
                BucketSpan {
                    first,
                    last,
                    archived: archived.is_some(),
                }
            }),
        )
    }

    fn touched(&self, key: &ConversationKey) -> bool {
        let (t, c) = parts(key);
        let prefix = Key::new().s(t).s(c).bytes();
        self.pending.messages.keys().any(|k| k.starts_with(&prefix))
    }

    fn archived_here(&self, key: &ConversationKey) -> bool {
        let (t, c) = parts(key);
        self.pending
            .archived
            .contains(&Key::new().s(t).s(c).bytes())
    }

    async fn ack_reads(
        &mut self,
        key: &ConversationKey,
        user: &str,
        device: Option<&str>,
    ) -> StoreResult<AckReads> {
        let (t, c) = parts(key);
        let last_seq = self.state(t, c)?.map(|row| row.last_seq);
        let marks = self.member(t, c, user)?.map(|row| Marks {
            delivered: row.delivered,
            read: row.read,
        });
        let cursor = match device {
            Some(d) => self.cursor(&Key::new().s(t).s(user).s(d).s(c).bytes())?,
            None => 0,
        };
        Ok(AckReads {
            last_seq,
            marks,
            cursor,
        })
    }

    async fn insert_conversation(&mut self, record: &ConversationRecord) -> StoreResult<()> {
        let (t, c) = (record.tenant.as_str(), record.conversation_id.as_str());
        let meta = encode(&ConversationMeta::of(record))?;
        self.batch
            .insert(&self.s.conversations, Key::new().s(t).s(c).bytes(), meta);
        let row = StateRow {
            last_seq: record.last_seq,
            last_activity: record.last_activity.unix_ms(),
        };
        self.set_state(t, c, row);
        Ok(())
    }

    async fn insert_member(
        &mut self,
        key: &ConversationKey,
        user: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let row = MemberRow {
            joined: at.unix_ms(),
            delivered: 0,
            read: 0,
        };
        let member_key = Key::new().s(t).s(c).s(user).bytes();
        self.batch
            .insert(&self.s.members, member_key.clone(), row.encode_joined());
        self.batch
            .insert(&self.s.member_marks, member_key.clone(), row.encode_marks());
        self.batch.insert(
            &self.s.user_conversations,
            Key::new().s(t).s(user).s(c).bytes(),
            [],
        );
        self.cache.member_rows.insert(member_key, Some(row));
        self.member_list(t, c)?.push(user.to_owned());
        Ok(())
    }

    async fn remove_member(&mut self, key: &ConversationKey, user: &str) -> StoreResult<()> {
        let (t, c) = parts(key);
        let member_key = Key::new().s(t).s(c).s(user).bytes();
        self.batch.remove(&self.s.members, member_key.clone());
        self.batch.remove(&self.s.member_marks, member_key.clone());
        self.batch.remove(
            &self.s.user_conversations,
            Key::new().s(t).s(user).s(c).bytes(),
        );
        self.cache.member_rows.insert(member_key, None);
        self.member_list(t, c)?.retain(|m| m != user);
        Ok(())
    }

    /// Messages are keyed by seq alone. A day's bucket records the first
    /// seq stored that day; the last is the next bucket's first minus one
    /// (or the conversation's last).
    async fn put_message(
        &mut self,
        key: &ConversationKey,
        m: &Message,
        placement: Placement,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let message_key = Key::new().s(t).s(c).n(m.seq).bytes();
        self.batch
            .insert(&self.s.messages, message_key.clone(), encode(m)?);
        self.pending.messages.insert(message_key, m.clone());
        if placement == Placement::New {
            let bucket = Key::new().s(t).s(c).day(day_bucket(m.created_at)).bytes();
            if !self.cache.days.contains(&bucket) {
                if !self
                    .snap
                    .contains_key(&self.s.buckets, &bucket)
                    .map_err(storage)?
                {
                    self.batch
                        .insert(&self.s.buckets, bucket.clone(), BucketRow::live(m.seq));
                }
                self.cache.days.insert(bucket);
            }
        }
        Ok(())
    }

    async fn insert_sent(&mut self, key: &ConversationKey, m: &Message) -> StoreResult<()> {
        let (t, c) = parts(key);
        let sent_key = Key::new()
            .s(t)
            .s(c)
            .s(m.sender_id.as_str())
            .s(m.client_msg_id.as_str())
            .bytes();
        self.batch
            .insert(&self.s.sent, sent_key.clone(), words([m.seq]));
        self.batch.insert(
            &self.s.message_index,
            Key::new().s(t).s(c).n(m.message_id.as_u64()).bytes(),
            words([m.seq]),
        );
        self.pending.sent.insert(sent_key);
        Ok(())
    }

    async fn put_version(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        v: &MessageVersion,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).n(seq).n(u64::from(v.version)).bytes();
        self.batch.insert(&self.s.versions, k.clone(), encode(v)?);
        let versions = self.versions_with_keys(t, c, seq)?;
        versions.retain(|(known, _)| *known != k);
        versions.push((k, v.clone()));
        Ok(())
    }

    async fn remove_versions(&mut self, key: &ConversationKey, seq: u64) -> StoreResult<()> {
        let (t, c) = parts(key);
        let doomed = std::mem::take(self.versions_with_keys(t, c, seq)?);
        for (k, _) in doomed {
            self.batch.remove(&self.s.versions, k);
        }
        Ok(())
    }

    /// One row per referencing message: a blob stays referenced while
    /// any of them (or a version of one) carries it.
    async fn reference_media(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        blob_ref: &str,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.batch.insert(
            &self.s.media_refs,
            Key::new().s(t).s(blob_ref).s(c).n(seq).bytes(),
            [],
        );
        Ok(())
    }

    async fn unreference_media(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        blob_ref: &str,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.batch.remove(
            &self.s.media_refs,
            Key::new().s(t).s(blob_ref).s(c).n(seq).bytes(),
        );
        Ok(())
    }

    async fn insert_inbox(
        &mut self,
        key: &ConversationKey,
        user: &str,
        device: &str,
        seq: u64,
        at: Timestamp,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.insert_inbox_key(Key::new().s(t).s(user).s(device).s(c).n(seq).bytes(), at);
        Ok(())
    }

    /// A span up to `MAX_POINT_DELETES` is deleted key by key: scanning
    /// would also walk every tombstone earlier acks left in the memtable,
    /// a cost that grows with the conversation. A device that catches up
    /// on a long backlog at once is rare enough to scan for.
    async fn remove_inbox(
        &mut self,
        key: &ConversationKey,
        user: &str,
        device: &str,
        which: InboxEntries,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let entry = |seq: u64| Key::new().s(t).s(user).s(device).s(c).n(seq).bytes();
        match which {
            InboxEntries::One(seq) => self.remove_inbox_key(entry(seq)),
            InboxEntries::Through { from, to } if to.saturating_sub(from) < MAX_POINT_DELETES => {
                for seq in from..=to {
                    self.remove_inbox_key(entry(seq));
                }
            }
            InboxEntries::Through { from, to } => {
                self.remove_inbox_between(entry(from), entry(to))?
            }
            InboxEntries::All => {
                self.remove_inbox_prefix(Key::new().s(t).s(user).s(device).s(c).bytes())?
            }
        }
        Ok(())
    }

    async fn raise_marks(
        &mut self,
        key: &ConversationKey,
        user: &str,
        delivered: Option<u64>,
        read: Option<u64>,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        if let Some(mut row) = self.member(t, c, user)? {
            row.delivered = row.delivered.max(delivered.unwrap_or(0));
            row.read = row.read.max(read.unwrap_or(0));
            self.set_marks(t, c, user, row);
        }
        Ok(())
    }

    async fn set_cursor(
        &mut self,
        key: &ConversationKey,
        user: &str,
        device: &str,
        seq: u64,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let cursor_key = Key::new().s(t).s(user).s(device).s(c).bytes();
        self.batch
            .insert(&self.s.device_cursors, cursor_key.clone(), words([seq]));
        self.cache.cursors.insert(cursor_key, seq);
        Ok(())
    }

    /// The position is derived from the newest message on read: only the
    /// cache records it.
    async fn set_position(&mut self, key: &ConversationKey, last: &Message) -> StoreResult<()> {
        let (t, c) = parts(key);
        let row = StateRow {
            last_seq: last.seq,
            last_activity: last.created_at.unix_ms(),
        };
        self.set_state(t, c, row);
        Ok(())
    }

    async fn archive_rows(
        &mut self,
        b: &BucketKey,
        span: &BucketSpan,
        newest: u64,
        object: &str,
    ) -> StoreResult<()> {
        let (t, c) = (b.tenant.as_str(), b.conversation_id.as_str());
        let range =
            Key::new().s(t).s(c).n(span.first).bytes()..=Key::new().s(t).s(c).n(span.last).bytes();
        let mut doomed = Vec::new();
        for g in self.snap.range(&self.s.messages, range) {
            let (k, v) = g.into_inner().map_err(storage)?;
            doomed.push((k.to_vec(), decode::<Message>(&v)?));
        }
        for (k, m) in doomed {
            if m.seq == newest {
                continue;
            }
            self.batch.remove(&self.s.messages, k);
            self.batch.remove(
                &self.s.sent,
                Key::new()
                    .s(t)
                    .s(c)
                    .s(m.sender_id.as_str())
                    .s(m.client_msg_id.as_str())
                    .bytes(),
            );
            for (vk, _) in std::mem::take(self.versions_with_keys(t, c, m.seq)?) {
                self.batch.remove(&self.s.versions, vk);
            }
        }
        let row = BucketRow {
            first: span.first,
            archived: Some((span.last, object.to_owned())),
        };
        self.batch.insert(
            &self.s.buckets,
            Key::new().s(t).s(c).day(b.day).bytes(),
            row.encode(),
        );
        self.pending.archived.insert(Key::new().s(t).s(c).bytes());
        Ok(())
    }
}
