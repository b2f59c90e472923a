//! Write operations. The writer thread applies a group of jobs to one
//! write batch, committed at once. Reads go to the cache first (which has
//! every write of the group, see `cache.rs`), then to the snapshot of the
//! last commit.

use std::collections::HashMap;

use fjall::{OwnedWriteBatch, Readable, Snapshot};
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, TenantId, Timestamp, UserId,
};

use super::cache::{Pending, WriterCache};
use super::codec::{encode, storage};
use super::keys::{Key, Spaces, read_words, words};
use super::read::{bucket_span, device_ids, member_ids, member_row, scan, sent_seq, state};
use super::rows::{BucketRow, ConversationMeta, MemberRow, StateRow};
use crate::{BucketKey, ConversationKey, MarkChange, Mutation, StoreError, day_bucket};
use switchboard_protocol::{Content, MessageVersion};

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
    /// Entries removed, and the key the sweep goes on from.
    Expired(usize, Option<Vec<u8>>),
}

/// Why an operation did not apply.
pub(super) enum ApplyError {
    /// Refused before anything was written: the group can go on.
    Clean(StoreError),
    /// Refused or failed after some writes: the batch must be thrown away.
    Dirty(StoreError),
}

impl From<StoreError> for ApplyError {
    fn from(e: StoreError) -> Self {
        ApplyError::Dirty(e)
    }
}

fn refuse(e: StoreError) -> ApplyError {
    ApplyError::Clean(e)
}

/// Above this many newly acknowledged messages, an ack scans the inbox
/// instead of deleting entry by entry.
const MAX_POINT_DELETES: u64 = 1024;

/// The writer's view of one group.
pub(super) struct Writer<'a> {
    pub snap: &'a Snapshot,
    pub batch: &'a mut OwnedWriteBatch,
    pub s: &'a Spaces,
    pub cache: &'a mut WriterCache,
    pub pending: &'a mut Pending,
}

impl Writer<'_> {
    fn state(&mut self, t: &str, c: &str) -> Result<Option<StateRow>, ApplyError> {
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

    fn member(&mut self, t: &str, c: &str, u: &str) -> Result<Option<MemberRow>, ApplyError> {
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
    fn members(&mut self, t: &str, c: &str) -> Result<&mut Vec<String>, ApplyError> {
        let key = Key::new().s(t).s(c).bytes();
        if !self.cache.members.contains_key(&key) {
            let list = member_ids(self.snap, self.s, t, c)?;
            self.cache.members.insert(key.clone(), list);
        }
        self.cache
            .members
            .get_mut(&key)
            .ok_or_else(|| ApplyError::Dirty(StoreError::Corrupt("member cache".into())))
    }

    /// The conversation's kind (it never changes).
    fn kind(&mut self, t: &str, c: &str) -> Result<ConversationKind, ApplyError> {
        let key = Key::new().s(t).s(c).bytes();
        if let Some(kind) = self.cache.kinds.get(&key) {
            return Ok(*kind);
        }
        let meta = self
            .snap
            .get(&self.s.conversations, &key)
            .map_err(storage)?
            .ok_or(ApplyError::Clean(StoreError::NotFound))?;
        let kind = super::codec::decode::<ConversationMeta>(&meta)?.kind;
        self.cache.kinds.insert(key, kind);
        Ok(kind)
    }

    /// What the caller needs to broadcast a mark that moved.
    fn mark_change(
        &mut self,
        t: &str,
        c: &str,
        row: MemberRow,
        delivered_moved: bool,
        read_moved: bool,
    ) -> Result<MarkChange, ApplyError> {
        let kind = self.kind(t, c)?;
        let members = self
            .members(t, c)?
            .iter()
            .map(|m| {
                UserId::new(m.as_str())
                    .map_err(|e| ApplyError::Dirty(StoreError::Corrupt(e.to_string())))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MarkChange {
            kind,
            members,
            delivered_seq: row.delivered,
            read_seq: row.read,
            delivered_moved,
            read_moved,
        })
    }

    /// The user's device list, loaded into the cache.
    fn devices(&mut self, t: &str, u: &str) -> Result<&mut Vec<String>, ApplyError> {
        let key = Key::new().s(t).s(u).bytes();
        if !self.cache.devices.contains_key(&key) {
            let list = device_ids(self.snap, self.s, t, u)?;
            self.cache.devices.insert(key.clone(), list);
        }
        self.cache
            .devices
            .get_mut(&key)
            .ok_or_else(|| ApplyError::Dirty(StoreError::Corrupt("device cache".into())))
    }

    /// Members of conversation `c` may download blob `blob_ref` from now
    /// on. A reference outlives the message's deletion: what a member
    /// could download stays downloadable (versions of edited media too).
    fn reference_media(&mut self, t: &str, c: &str, blob_ref: &str) {
        self.batch.insert(
            &self.s.media_refs,
            Key::new().s(t).s(blob_ref).s(c).bytes(),
            [],
        );
    }

    /// An inbox entry, valued with when it was written (for expiry).
    fn insert_inbox(&mut self, key: Vec<u8>, at: Timestamp) {
        self.batch
            .insert(&self.s.inbox, key.clone(), words([at.unix_ms() as u64]));
        self.pending.inbox.insert(key);
    }

    fn remove_inbox(&mut self, key: Vec<u8>) {
        self.pending.inbox.remove(&key);
        self.batch.remove(&self.s.inbox, key);
    }

    /// Removes the inbox entries that start with `prefix`, up to `until`
    /// (inclusive) if given: committed ones and this group's.
    fn remove_inbox_prefix(
        &mut self,
        prefix: Vec<u8>,
        until: Option<Vec<u8>>,
    ) -> Result<(), ApplyError> {
        let within =
            |k: &[u8]| k.starts_with(&prefix) && until.as_ref().is_none_or(|u| k <= u.as_slice());
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        for kv in scan(self.snap, &self.s.inbox, prefix.clone()) {
            let (k, _) = kv?;
            if !within(&k) {
                break;
            }
            doomed.push(k.to_vec());
        }
        doomed.extend(
            self.pending
                .inbox
                .range(prefix.clone()..)
                .take_while(|k| within(k))
                .cloned(),
        );
        for k in doomed {
            self.remove_inbox(k);
        }
        Ok(())
    }

    pub fn apply(&mut self, op: &WriteOp) -> Result<Applied, ApplyError> {
        match op {
            WriteOp::Commit(mutations) => {
                for (i, m) in mutations.iter().enumerate() {
                    self.apply_mutation(m).map_err(|e| match e {
                        // A later mutation's refusal leaves the earlier ones
                        // written: the whole batch must be undone.
                        ApplyError::Clean(e) if i > 0 => ApplyError::Dirty(e),
                        other => other,
                    })?;
                }
                Ok(Applied::Done)
            }
            WriteOp::AckRead {
                tenant,
                user,
                conversation,
                seq,
            } => self
                .ack_read(tenant.as_str(), user.as_str(), conversation.as_str(), *seq)
                .map(Applied::Mark),
            WriteOp::AckDelivered {
                tenant,
                user,
                device,
                conversation,
                seq,
            } => self
                .ack_delivered(
                    tenant.as_str(),
                    user.as_str(),
                    device.as_str(),
                    conversation.as_str(),
                    *seq,
                )
                .map(Applied::Mark),
            WriteOp::RegisterDevice {
                tenant,
                user,
                device,
                at,
            } => {
                let (t, u, d) = (tenant.as_str(), user.as_str(), device.as_str());
                let devices = self.devices(t, u)?;
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

    /// Removes the inbox entries older than `before` among the next
    /// `budget` from `from`. It runs on the writer thread so that an entry
    /// refreshed by an edit in the same group is seen as fresh.
    fn expire_inbox(
        &mut self,
        before: Timestamp,
        from: Vec<u8>,
        budget: usize,
    ) -> Result<Applied, ApplyError> {
        let before = before.unix_ms() as u64;
        let mut doomed = Vec::new();
        let mut next = None;
        for (seen, g) in self.snap.range(&self.s.inbox, from..).enumerate() {
            let (k, v) = g.into_inner().map_err(storage)?;
            if seen == budget {
                next = Some(k.to_vec());
                break;
            }
            // An entry without a time predates expiry: it is old.
            let written = read_words::<1>(&v).map(|[ms]| ms).unwrap_or(0);
            if written < before && !self.pending.inbox.contains(k.as_ref()) {
                doomed.push(k.to_vec());
            }
        }
        let removed = doomed.len();
        for k in doomed {
            self.remove_inbox(k);
        }
        Ok(Applied::Expired(removed, next))
    }

    fn add_member(
        &mut self,
        t: &str,
        c: &str,
        user: &str,
        at: Timestamp,
    ) -> Result<(), ApplyError> {
        if self.member(t, c, user)?.is_some() {
            return Ok(());
        }
        let row = MemberRow {
            joined: at.unix_ms(),
            delivered: 0,
            read: 0,
        };
        let key = Key::new().s(t).s(c).s(user).bytes();
        self.batch
            .insert(&self.s.members, key.clone(), row.encode_joined());
        self.batch
            .insert(&self.s.member_marks, key.clone(), row.encode_marks());
        self.batch.insert(
            &self.s.user_conversations,
            Key::new().s(t).s(user).s(c).bytes(),
            [],
        );
        self.cache.member_rows.insert(key, Some(row));
        self.members(t, c)?.push(user.to_owned());
        Ok(())
    }

    fn apply_mutation(&mut self, m: &Mutation) -> Result<(), ApplyError> {
        match m {
            Mutation::CreateConversation { record, members } => {
                let (t, c) = (record.tenant.as_str(), record.conversation_id.as_str());
                if self.state(t, c)?.is_some() {
                    return Err(refuse(StoreError::Conflict("conversation exists".into())));
                }
                let meta = encode(&ConversationMeta::of(record))?;
                self.batch
                    .insert(&self.s.conversations, Key::new().s(t).s(c).bytes(), meta);
                let row = StateRow {
                    last_seq: record.last_seq,
                    last_activity: record.last_activity.unix_ms(),
                };
                self.set_state(t, c, row);
                for user in members {
                    self.add_member(t, c, user.as_str(), record.created_at)?;
                }
                Ok(())
            }
            Mutation::AddMembers { key, users, at } => {
                let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
                if self.state(t, c)?.is_none() {
                    return Err(refuse(StoreError::NotFound));
                }
                for user in users {
                    self.add_member(t, c, user.as_str(), *at)?;
                }
                Ok(())
            }
            Mutation::RemoveMembers { key, users } => {
                let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
                if self.state(t, c)?.is_none() {
                    return Err(refuse(StoreError::NotFound));
                }
                for user in users {
                    let u = user.as_str();
                    let member_key = Key::new().s(t).s(c).s(u).bytes();
                    self.batch.remove(&self.s.members, member_key.clone());
                    self.batch.remove(&self.s.member_marks, member_key.clone());
                    self.batch.remove(
                        &self.s.user_conversations,
                        Key::new().s(t).s(u).s(c).bytes(),
                    );
                    self.cache.member_rows.insert(member_key, None);
                    self.members(t, c)?.retain(|m| m != u);
                    for d in self.devices(t, u)?.clone() {
                        self.remove_inbox_prefix(Key::new().s(t).s(u).s(&d).s(c).bytes(), None)?;
                    }
                }
                Ok(())
            }
            Mutation::Append {
                key,
                expected_last_seq,
                messages,
                inbox,
            } => self.append(key, *expected_last_seq, messages, *inbox),
            Mutation::Edit {
                key,
                seq,
                content,
                editor,
                at,
                inbox,
            } => self.edit(key, *seq, content, editor, *at, *inbox),
            Mutation::Delete {
                key,
                seq,
                at,
                inbox,
            } => self.delete(key, *seq, *at, *inbox),
            Mutation::Archive {
                bucket,
                first_seq,
                last_seq,
                object,
            } => self.archive(bucket, *first_seq, *last_seq, object),
            Mutation::Restore {
                key,
                message,
                versions,
            } => self.restore(key, message, versions),
            Mutation::MoveToArchive { .. } => Err(refuse(StoreError::Unavailable(
                "no archive store is configured".into(),
            ))),
        }
    }

    /// Refuses a write to a conversation whose rows this group removed.
    fn check_not_archived_here(&self, t: &str, c: &str) -> Result<(), ApplyError> {
        if self
            .pending
            .archived
            .contains(&Key::new().s(t).s(c).bytes())
        {
            return Err(refuse(StoreError::Conflict(
                "a bucket of the conversation was archived in this group".into(),
            )));
        }
        Ok(())
    }

    fn archive(
        &mut self,
        bucket: &BucketKey,
        first_seq: u64,
        last_seq: u64,
        object: &str,
    ) -> Result<(), ApplyError> {
        let (t, c) = (bucket.tenant.as_str(), bucket.conversation_id.as_str());
        self.check_not_archived_here(t, c)?;
        let Some((first, last, archived)) = bucket_span(self.snap, self.s, t, c, bucket.day)?
        else {
            return Err(refuse(StoreError::NotFound));
        };
        if archived.is_some() {
            return Err(refuse(StoreError::Conflict(
                "the bucket is archived already".into(),
            )));
        }
        let touched = self
            .pending
            .messages
            .keys()
            .any(|k| k.starts_with(&Key::new().s(t).s(c).bytes()));
        if (first, last) != (first_seq, last_seq) || touched {
            return Err(refuse(StoreError::Conflict(format!(
                "the bucket holds {first}..={last} now, not {first_seq}..={last_seq}"
            ))));
        }
        let newest = self.state(t, c)?.map_or(0, |st| st.last_seq);
        let range = Key::new().s(t).s(c).n(first).bytes()..=Key::new().s(t).s(c).n(last).bytes();
        let mut doomed = Vec::new();
        for g in self.snap.range(&self.s.messages, range) {
            let (k, v) = g.into_inner().map_err(storage)?;
            doomed.push((k.to_vec(), super::codec::decode::<Message>(&v)?));
        }
        for (k, m) in doomed {
            // The newest message stays live with its versions and key: the
            // conversation's position and preview derive from it.
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
            for (vk, _) in self.versions_of(t, c, m.seq)? {
                self.batch.remove(&self.s.versions, vk);
            }
        }
        for (user, devices) in self.recipients(t, c)? {
            for device in devices {
                let prefix = Key::new().s(t).s(&user).s(&device).s(c);
                self.remove_inbox_range(prefix, first, last)?;
            }
        }
        let row = BucketRow {
            first,
            archived: Some((last, object.to_owned())),
        };
        self.batch.insert(
            &self.s.buckets,
            Key::new().s(t).s(c).day(bucket.day).bytes(),
            row.encode(),
        );
        self.pending.archived.insert(Key::new().s(t).s(c).bytes());
        Ok(())
    }

    fn restore(
        &mut self,
        key: &ConversationKey,
        message: &Message,
        versions: &[MessageVersion],
    ) -> Result<(), ApplyError> {
        let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
        self.check_not_archived_here(t, c)?;
        let message_key = Key::new().s(t).s(c).n(message.seq).bytes();
        if self.pending.messages.contains_key(&message_key)
            || self
                .snap
                .contains_key(&self.s.messages, &message_key)
                .map_err(storage)?
        {
            return Ok(());
        }
        self.batch
            .insert(&self.s.messages, message_key.clone(), encode(message)?);
        self.pending.messages.insert(message_key, message.clone());
        let mut restored = Vec::with_capacity(versions.len());
        for v in versions {
            let k = Key::new()
                .s(t)
                .s(c)
                .n(message.seq)
                .n(u64::from(v.version))
                .bytes();
            self.batch.insert(&self.s.versions, k.clone(), encode(v)?);
            restored.push((k, v.clone()));
        }
        self.pending
            .versions
            .insert(Key::new().s(t).s(c).n(message.seq).bytes(), restored);
        Ok(())
    }

    /// Removes the inbox entries under `prefix` (a device's entries of one
    /// conversation) with `from <= seq <= to`.
    fn remove_inbox_range(&mut self, prefix: Key, from: u64, to: u64) -> Result<(), ApplyError> {
        let prefix = prefix.bytes();
        let mut low = prefix.clone();
        low.extend_from_slice(&from.to_be_bytes());
        let mut high = prefix;
        high.extend_from_slice(&to.to_be_bytes());
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        for g in self.snap.range(&self.s.inbox, low.clone()..=high.clone()) {
            let (k, _) = g.into_inner().map_err(storage)?;
            doomed.push(k.to_vec());
        }
        doomed.extend(self.pending.inbox.range(low..=high).cloned());
        for k in doomed {
            self.remove_inbox(k);
        }
        Ok(())
    }

    fn append(
        &mut self,
        key: &ConversationKey,
        expected_last_seq: u64,
        messages: &[Message],
        inbox: bool,
    ) -> Result<(), ApplyError> {
        let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
        let Some(current) = self.state(t, c)? else {
            return Err(refuse(StoreError::NotFound));
        };
        if current.last_seq != expected_last_seq {
            return Err(refuse(StoreError::Conflict(format!(
                "append expected last_seq {expected_last_seq}, store has {}",
                current.last_seq
            ))));
        }
        let mut sent_keys = Vec::with_capacity(messages.len());
        for (i, m) in messages.iter().enumerate() {
            if m.seq != expected_last_seq + 1 + i as u64 || m.conversation_id != key.conversation_id
            {
                return Err(refuse(StoreError::Conflict(format!(
                    "message seq {} does not continue {expected_last_seq}",
                    m.seq
                ))));
            }
            let (sender, id) = (m.sender_id.as_str(), m.client_msg_id.as_str());
            let sent_key = Key::new().s(t).s(c).s(sender).s(id).bytes();
            if self.pending.sent.contains(&sent_key)
                || sent_seq(self.snap, self.s, t, c, sender, id)?.is_some()
            {
                return Err(refuse(StoreError::Conflict(format!(
                    "client_msg_id {} already stored",
                    m.client_msg_id
                ))));
            }
            sent_keys.push(sent_key);
        }
        let Some(last) = messages.last() else {
            return Ok(());
        };

        // Every device of every member gets an inbox entry, except the
        // device that sent the message (it has it already).
        let recipients = if inbox {
            self.recipients(t, c)?
        } else {
            Vec::new()
        };
        // Per UTC day: the first seq this append adds.
        let mut days: HashMap<u32, u64> = HashMap::new();
        // Per sender: the highest seq they sent here.
        let mut senders: HashMap<&str, u64> = HashMap::new();
        for (m, sent_key) in messages.iter().zip(sent_keys) {
            let message_key = Key::new().s(t).s(c).n(m.seq).bytes();
            self.batch
                .insert(&self.s.messages, message_key.clone(), encode(m)?);
            self.pending.messages.insert(message_key, m.clone());
            self.batch
                .insert(&self.s.sent, sent_key.clone(), words([m.seq]));
            self.batch.insert(
                &self.s.message_index,
                Key::new().s(t).s(c).n(m.message_id.as_u64()).bytes(),
                words([m.seq]),
            );
            self.pending.sent.insert(sent_key);
            if let Some(media) = m.content.as_ref().and_then(Content::media) {
                self.reference_media(t, c, &media.blob_ref);
            }
            for (user, devices) in &recipients {
                for device in devices {
                    if *user == m.sender_id.as_str() && *device == m.sender_device.as_str() {
                        continue;
                    }
                    self.insert_inbox(
                        Key::new().s(t).s(user).s(device).s(c).n(m.seq).bytes(),
                        m.created_at,
                    );
                }
            }
            days.entry(day_bucket(m.created_at)).or_insert(m.seq);
            senders.insert(m.sender_id.as_str(), m.seq);
        }
        // A day's bucket records the first seq stored that day; the last is
        // the next bucket's first minus one (or the conversation's last).
        for (day, first) in days {
            let k = Key::new().s(t).s(c).day(day).bytes();
            if self.cache.days.contains(&k) {
                continue;
            }
            if !self
                .snap
                .contains_key(&self.s.buckets, &k)
                .map_err(storage)?
            {
                self.batch
                    .insert(&self.s.buckets, k.clone(), words([first]));
            }
            self.cache.days.insert(k);
        }
        // Sending implies having read and received everything before it.
        for (sender, seq) in senders {
            if let Some(mut row) = self.member(t, c, sender)? {
                row.delivered = row.delivered.max(seq);
                row.read = row.read.max(seq);
                self.set_marks(t, c, sender, row);
            }
        }
        let row = StateRow {
            last_seq: last.seq,
            last_activity: last.created_at.unix_ms(),
        };
        self.set_state(t, c, row);
        Ok(())
    }

    /// Every member with their devices.
    fn recipients(&mut self, t: &str, c: &str) -> Result<Vec<(String, Vec<String>)>, ApplyError> {
        let mut out = Vec::new();
        for user in self.members(t, c)?.clone() {
            let devices = self.devices(t, &user)?.clone();
            out.push((user, devices));
        }
        Ok(out)
    }

    /// The stored message `seq` (an edit or delete only follows the
    /// sequencer's checks, so it exists).
    fn stored_message(&mut self, t: &str, c: &str, seq: u64) -> Result<Message, ApplyError> {
        let key = Key::new().s(t).s(c).n(seq).bytes();
        if let Some(m) = self.pending.messages.get(&key) {
            return Ok(m.clone());
        }
        let bytes = self
            .snap
            .get(&self.s.messages, &key)
            .map_err(storage)?
            .ok_or(ApplyError::Clean(StoreError::NotFound))?;
        Ok(super::codec::decode(&bytes)?)
    }

    /// Puts an updated message back, and into every member device's inbox.
    fn store_update(
        &mut self,
        t: &str,
        c: &str,
        m: &Message,
        inbox: bool,
    ) -> Result<(), ApplyError> {
        let key = Key::new().s(t).s(c).n(m.seq).bytes();
        self.batch.insert(&self.s.messages, key.clone(), encode(m)?);
        self.pending.messages.insert(key, m.clone());
        if inbox {
            // The entry is as fresh as the change, for expiry.
            let at = m.deleted_at.or(m.edited_at).unwrap_or(m.created_at);
            for (user, devices) in self.recipients(t, c)? {
                for device in devices {
                    self.insert_inbox(
                        Key::new().s(t).s(&user).s(&device).s(c).n(m.seq).bytes(),
                        at,
                    );
                }
            }
        }
        Ok(())
    }

    /// The stored versions of message `seq`, oldest first.
    fn versions_of(
        &mut self,
        t: &str,
        c: &str,
        seq: u64,
    ) -> Result<Vec<(Vec<u8>, MessageVersion)>, ApplyError> {
        if let Some(v) = self
            .pending
            .versions
            .get(&Key::new().s(t).s(c).n(seq).bytes())
        {
            return Ok(v.clone());
        }
        scan(
            self.snap,
            &self.s.versions,
            Key::new().s(t).s(c).n(seq).bytes(),
        )
        .map(|kv| {
            let (k, v) = kv?;
            Ok((k.to_vec(), super::codec::decode(&v)?))
        })
        .collect::<Result<Vec<_>, StoreError>>()
        .map_err(ApplyError::Dirty)
    }

    fn edit(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        content: &Content,
        editor: &UserId,
        at: Timestamp,
        inbox: bool,
    ) -> Result<(), ApplyError> {
        let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
        self.check_not_archived_here(t, c)?;
        let mut message = self.stored_message(t, c, seq)?;
        if message.deleted_at.is_some() {
            return Err(refuse(StoreError::Conflict(
                "the message is deleted".into(),
            )));
        }
        let mut versions = self.versions_of(t, c, seq)?;
        if versions.is_empty() {
            // The first edit keeps the original as version 1.
            let original = MessageVersion {
                version: 1,
                content: message.content.clone().unwrap_or(Content::Text {
                    text: String::new(),
                }),
                at: message.created_at,
                editor: message.sender_id.clone(),
            };
            let k = Key::new().s(t).s(c).n(seq).n(1).bytes();
            self.batch
                .insert(&self.s.versions, k.clone(), encode(&original)?);
            versions.push((k, original));
        }
        let next = versions.last().map_or(1, |(_, v)| v.version) + 1;
        let version = MessageVersion {
            version: next,
            content: content.clone(),
            at,
            editor: editor.clone(),
        };
        let k = Key::new().s(t).s(c).n(seq).n(u64::from(next)).bytes();
        self.batch
            .insert(&self.s.versions, k.clone(), encode(&version)?);
        versions.push((k, version));
        self.pending
            .versions
            .insert(Key::new().s(t).s(c).n(seq).bytes(), versions);
        if let Some(media) = content.media() {
            self.reference_media(t, c, &media.blob_ref);
        }
        message.content = Some(content.clone());
        message.edited_at = Some(at);
        self.store_update(t, c, &message, inbox)
    }

    fn delete(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        at: Timestamp,
        inbox: bool,
    ) -> Result<(), ApplyError> {
        let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
        self.check_not_archived_here(t, c)?;
        let mut message = self.stored_message(t, c, seq)?;
        if message.deleted_at.is_some() {
            return Ok(());
        }
        // No content anywhere after a delete, the versions included.
        for (k, _) in self.versions_of(t, c, seq)? {
            self.batch.remove(&self.s.versions, k);
        }
        self.pending
            .versions
            .insert(Key::new().s(t).s(c).n(seq).bytes(), Vec::new());
        message.content = None;
        message.deleted_at = Some(at);
        self.store_update(t, c, &message, inbox)
    }

    fn cursor(&mut self, key: &[u8]) -> Result<u64, ApplyError> {
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

    fn ack_delivered(
        &mut self,
        t: &str,
        u: &str,
        d: &str,
        c: &str,
        seq: u64,
    ) -> Result<MarkChange, ApplyError> {
        let Some(current) = self.state(t, c)? else {
            return Err(refuse(StoreError::NotFound));
        };
        let Some(mut member) = self.member(t, c, u)? else {
            return Err(refuse(StoreError::NotAMember));
        };
        // A mark past the end of the conversation would hide future messages.
        let seq = seq.min(current.last_seq);
        let cursor_key = Key::new().s(t).s(u).s(d).s(c).bytes();
        let previous = self.cursor(&cursor_key)?;
        if seq <= previous {
            // An ack below the cursor confirms an update (an edit or a
            // delete re-enters the inbox at the message's seq).
            self.remove_inbox(Key::new().s(t).s(u).s(d).s(c).n(seq).bytes());
        } else {
            self.batch
                .insert(&self.s.device_cursors, cursor_key.clone(), words([seq]));
            self.cache.cursors.insert(cursor_key, seq);
            // The entries this ack covers are exactly those in (previous,
            // seq]: delete them by key. Scanning instead would also walk
            // every tombstone earlier acks left in the memtable, a cost that
            // grows with the conversation. A device that catches up on a
            // long backlog at once is rare enough to scan for.
            if seq - previous <= MAX_POINT_DELETES {
                for n in previous + 1..=seq {
                    self.remove_inbox(Key::new().s(t).s(u).s(d).s(c).n(n).bytes());
                }
            } else {
                let prefix = Key::new().s(t).s(u).s(d).s(c).bytes();
                let until = Key::new().s(t).s(u).s(d).s(c).n(seq).bytes();
                self.remove_inbox_prefix(prefix, Some(until))?;
            }
        }
        let moved = seq > member.delivered;
        if moved {
            member.delivered = seq;
            self.set_marks(t, c, u, member);
        }
        self.mark_change(t, c, member, moved, false)
    }

    fn ack_read(&mut self, t: &str, u: &str, c: &str, seq: u64) -> Result<MarkChange, ApplyError> {
        let Some(current) = self.state(t, c)? else {
            return Err(refuse(StoreError::NotFound));
        };
        let Some(mut member) = self.member(t, c, u)? else {
            return Err(refuse(StoreError::NotAMember));
        };
        let seq = seq.min(current.last_seq);
        let read_moved = seq > member.read;
        // What was read was delivered.
        let delivered_moved = seq > member.delivered;
        if read_moved || delivered_moved {
            member.read = member.read.max(seq);
            member.delivered = member.delivered.max(seq);
            self.set_marks(t, c, u, member);
        }
        self.mark_change(t, c, member, delivered_moved, read_moved)
    }
}
