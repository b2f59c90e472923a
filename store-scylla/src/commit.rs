//! Commits: checks first, then every row in one batch.
//!
//! A commit reads what its checks need (the conversation row for
//! `expected_last_seq`, idempotency keys, members, the stored message of an
//! edit), refuses with nothing written when a check fails, and otherwise
//! writes every resulting row in one LOGGED batch: all of it or none of it
//! lands, across partitions.
//!
//! The read-then-write is safe because every conversation has exactly one
//! writer, the worker's sequencer holding the conversation's lease, whose
//! fencing keeps a stale writer from committing (its `expected_last_seq`
//! no longer matches). Scylla does not serialise the check with the write:
//! two writers racing on one conversation could both pass their checks.
//! That is also why there is no lightweight transaction (`IF ...`) here.
//!
//! Mutations later in a commit see the effects of earlier ones (a create
//! then an append, several appends, an append then its edits): the `Tx`
//! keeps every row it read or wrote in memory for the commit's duration.
//! Statements get increasing write timestamps in mutation order, so in the
//! batch a later write of a row wins over an earlier one, also a delete
//! followed by an insert (see `cql::Clock`).
//!
//! Batch size: the inbox fan-out grows with members times devices, and an
//! archive mark names every idempotency key of its day. When a commit's
//! rows add up to more than `max_batch_bytes`, it is split in three, in
//! this order: the fan-out in UNLOGGED batches, then everything else in
//! the one LOGGED batch, then an archive mark's clean-up (idempotency keys
//! and inbox entries of the archived seqs) in UNLOGGED batches. If the
//! commit fails after the first part, inbox entries may exist for messages
//! that were never stored: reads skip an entry whose message row is
//! missing, an entry for a seq stored later points at that message, and
//! the TTL removes them in any case. If it fails in the last part, some
//! idempotency keys of archived messages stay: `find_sent` finds no live
//! row behind them (so answers `None`), and reusing such an old
//! `client_msg_id` is refused as a duplicate, as it would have been
//! before the archive.

use std::collections::{BTreeSet, HashMap, HashSet};

use futures::StreamExt;
use scylla::serialize::row::SerializeRow;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use switchboard_protocol::{Content, Message, MessageVersion, Timestamp, UserId};
use switchboard_store::{
    BucketKey, ConversationKey, ConversationRecord, MarkChange, Mutation, StoreError, StoreResult,
    day_bucket,
};

use crate::cql::{Args, Size, Write, unavailable};
use crate::rows::{
    Bucket, Conv, DELIVERED, READ, bucket_last, day_db, decode, encode, id_db, marks, seq_db,
    seq_of, user_id,
};
use crate::store::ScyllaStore;

/// A conversation: tenant and conversation id.
type Ck = (String, String);

fn ck(key: &ConversationKey) -> Ck {
    (
        key.tenant.as_str().to_owned(),
        key.conversation_id.as_str().to_owned(),
    )
}

fn refuse(why: impl Into<String>) -> StoreError {
    StoreError::Conflict(why.into())
}

/// Most statements in one batch of a split commit's side parts.
const MAX_SIDE_STATEMENTS: usize = 1000;

/// Where a statement goes when a commit is too large for one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Inbox entries of appends, edits and deletes: written ahead of the
    /// commit's batch (harmless if the commit then fails).
    Before,
    /// The commit proper: one LOGGED batch.
    Core,
    /// Clean-up of an archive mark (idempotency keys and inbox entries of
    /// the archived seqs): written after the commit's batch, since their
    /// loss before it could let a retried send store a duplicate.
    After,
}

/// One statement with its values, waiting for the batch.
struct Pending {
    ps: PreparedStatement,
    values: Box<dyn SerializeRow + Send + Sync>,
    bytes: usize,
    phase: Phase,
}

/// One commit (or one ack) in progress.
pub(crate) struct Tx<'a> {
    store: &'a ScyllaStore,
    /// The first write timestamp; the n-th write gets `base + n`.
    base: i64,
    convs: HashMap<Ck, Option<Conv>>,
    members: HashMap<Ck, BTreeSet<String>>,
    devices: HashMap<Ck, Vec<String>>,
    /// Newest day first.
    buckets: HashMap<Ck, Vec<Bucket>>,
    /// Live message rows read or written, with their bucket day.
    messages: HashMap<(Ck, u64), Option<(u32, Message)>>,
    versions: HashMap<(Ck, u64), Vec<MessageVersion>>,
    /// Idempotency keys written: conversation, sender, client_msg_id.
    sent: HashSet<(Ck, String, String)>,
    /// Conversations with message rows written in this commit.
    touched: HashSet<Ck>,
    /// Conversations with a bucket archived in this commit.
    archived: HashSet<Ck>,
    writes: Vec<Pending>,
}

impl<'a> Tx<'a> {
    pub(crate) fn new(store: &'a ScyllaStore) -> Self {
        Self {
            store,
            base: store.clock.next(),
            convs: HashMap::new(),
            members: HashMap::new(),
            devices: HashMap::new(),
            buckets: HashMap::new(),
            messages: HashMap::new(),
            versions: HashMap::new(),
            sent: HashSet::new(),
            touched: HashSet::new(),
            archived: HashSet::new(),
            writes: Vec::new(),
        }
    }

    /// The next write timestamp.
    fn ts(&self) -> i64 {
        self.base + i64::try_from(self.writes.len()).unwrap_or(i64::MAX / 4)
    }

    fn push<B, A>(&mut self, w: &Write<B>, args: A)
    where
        A: Args<B> + Size + 'static,
    {
        self.push_as(w, args, Phase::Core);
    }

    fn push_as<B, A>(&mut self, w: &Write<B>, args: A, phase: Phase)
    where
        A: Args<B> + Size + 'static,
    {
        self.writes.push(Pending {
            ps: w.ps.clone(),
            bytes: args.size() + 16,
            values: Box::new(args),
            phase,
        });
    }

    // --- reads through the commit's view

    async fn conv(&mut self, k: &Ck) -> StoreResult<Option<Conv>> {
        if let Some(c) = self.convs.get(k) {
            return Ok(c.clone());
        }
        let c = self.store.conv_row(&k.0, &k.1).await?;
        self.convs.insert(k.clone(), c.clone());
        Ok(c)
    }

    async fn members(&mut self, k: &Ck) -> StoreResult<&mut BTreeSet<String>> {
        if !self.members.contains_key(k) {
            let list = self.store.member_ids(&k.0, &k.1).await?;
            self.members.insert(k.clone(), list.into_iter().collect());
        }
        self.members
            .get_mut(k)
            .ok_or_else(|| StoreError::Corrupt("member view".into()))
    }

    async fn devices(&mut self, tenant: &str, user: &str) -> StoreResult<Vec<String>> {
        let key = (tenant.to_owned(), user.to_owned());
        if let Some(d) = self.devices.get(&key) {
            return Ok(d.clone());
        }
        let list = self.store.device_ids(tenant, user).await?;
        self.devices.insert(key, list.clone());
        Ok(list)
    }

    async fn buckets(&mut self, k: &Ck) -> StoreResult<&mut Vec<Bucket>> {
        if !self.buckets.contains_key(k) {
            let list = self.store.bucket_rows(&k.0, &k.1).await?;
            self.buckets.insert(k.clone(), list);
        }
        self.buckets
            .get_mut(k)
            .ok_or_else(|| StoreError::Corrupt("bucket view".into()))
    }

    /// The bucket that holds `seq`: the newest whose first seq is at most
    /// `seq`.
    async fn bucket_of(&mut self, k: &Ck, seq: u64) -> StoreResult<Option<Bucket>> {
        Ok(self
            .buckets(k)
            .await?
            .iter()
            .find(|b| b.first <= seq)
            .cloned())
    }

    /// The live row of message `seq` and its bucket day.
    async fn live_message(&mut self, k: &Ck, seq: u64) -> StoreResult<Option<(u32, Message)>> {
        let key = (k.clone(), seq);
        if let Some(m) = self.messages.get(&key) {
            return Ok(m.clone());
        }
        let found = match self.bucket_of(k, seq).await? {
            Some(b) => self
                .store
                .message_at(&k.0, &k.1, b.day, seq)
                .await?
                .map(|m| (b.day, m)),
            None => None,
        };
        self.messages.insert(key, found.clone());
        Ok(found)
    }

    async fn versions_of(
        &mut self,
        k: &Ck,
        day: u32,
        seq: u64,
    ) -> StoreResult<Vec<MessageVersion>> {
        let key = (k.clone(), seq);
        if let Some(v) = self.versions.get(&key) {
            return Ok(v.clone());
        }
        let v = self.store.versions_at(&k.0, &k.1, day, seq).await?;
        self.versions.insert(key, v.clone());
        Ok(v)
    }

    /// Every member with their devices (the device lists read together).
    async fn recipients(&mut self, k: &Ck) -> StoreResult<Vec<(String, Vec<String>)>> {
        let users: Vec<String> = self.members(k).await?.iter().cloned().collect();
        let tenant = k.0.clone();
        let missing: Vec<String> = users
            .iter()
            .filter(|u| !self.devices.contains_key(&(tenant.clone(), (*u).clone())))
            .cloned()
            .collect();
        let store = self.store;
        let fetched = store
            .each(missing.clone(), |u| {
                let t = tenant.clone();
                async move { store.device_ids(&t, &u).await }
            })
            .await?;
        for (u, devices) in missing.into_iter().zip(fetched) {
            self.devices.insert((tenant.clone(), u), devices);
        }
        Ok(users
            .into_iter()
            .map(|u| {
                let devices = self
                    .devices
                    .get(&(tenant.clone(), u.clone()))
                    .cloned()
                    .unwrap_or_default();
                (u, devices)
            })
            .collect())
    }

    // --- writes

    /// Sets a grow-only mark: the new row, and a delete of every row below
    /// it. Whatever order concurrent writers' rows land in, the highest
    /// survives.
    pub(crate) fn set_mark(&mut self, k: &Ck, user: &str, mark: i8, seq: u64) {
        let st = &self.store.st;
        let (t, c, u, s) = (k.0.clone(), k.1.clone(), user.to_owned(), seq_db(seq));
        let ts = self.ts();
        self.push(
            &st.insert_mark,
            (t.clone(), c.clone(), u.clone(), mark, s, ts),
        );
        let ts = self.ts();
        self.push(&st.delete_marks_below, (ts, t, c, u, mark, s));
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_inbox(
        &mut self,
        k: &Ck,
        user: &str,
        device: &str,
        seq: u64,
        day: u32,
        written_at: Timestamp,
    ) {
        let ts = self.ts();
        let ttl = self.store.inbox_ttl;
        self.push_as(
            &self.store.st.insert_inbox,
            (
                k.0.clone(),
                user.to_owned(),
                device.to_owned(),
                k.1.clone(),
                seq_db(seq),
                day_db(day),
                written_at.unix_ms(),
                ttl,
                ts,
            ),
            Phase::Before,
        );
    }

    fn insert_message(&mut self, k: &Ck, day: u32, m: &Message) -> StoreResult<()> {
        let ts = self.ts();
        self.push(
            &self.store.st.insert_message,
            (
                k.0.clone(),
                k.1.clone(),
                day_db(day),
                seq_db(m.seq),
                encode(m)?,
                ts,
            ),
        );
        self.messages
            .insert((k.clone(), m.seq), Some((day, m.clone())));
        self.touched.insert(k.clone());
        Ok(())
    }

    fn insert_version(
        &mut self,
        k: &Ck,
        day: u32,
        seq: u64,
        v: &MessageVersion,
    ) -> StoreResult<()> {
        let ts = self.ts();
        self.push(
            &self.store.st.insert_version,
            (
                k.0.clone(),
                k.1.clone(),
                day_db(day),
                seq_db(seq),
                i32::try_from(v.version).unwrap_or(i32::MAX),
                encode(v)?,
                ts,
            ),
        );
        Ok(())
    }

    /// Members of `k` may download `blob_ref` from now on. A reference
    /// outlives the message's deletion, as in the embedded store.
    fn reference_media(&mut self, k: &Ck, blob_ref: &str) {
        let ts = self.ts();
        self.push(
            &self.store.st.insert_media_ref,
            (k.0.clone(), blob_ref.to_owned(), k.1.clone(), ts),
        );
    }

    async fn add_member(&mut self, k: &Ck, user: &str, at: Timestamp) -> StoreResult<()> {
        if self.members(k).await?.contains(user) {
            return Ok(());
        }
        let st = &self.store.st;
        let ts = self.ts();
        self.push(
            &st.insert_member,
            (k.0.clone(), k.1.clone(), user.to_owned(), at.unix_ms(), ts),
        );
        let ts = self.ts();
        self.push(
            &st.insert_user_conversation,
            (k.0.clone(), user.to_owned(), k.1.clone(), ts),
        );
        self.members(k).await?.insert(user.to_owned());
        Ok(())
    }

    fn check_not_archived_here(&self, k: &Ck) -> StoreResult<()> {
        if self.archived.contains(k) {
            return Err(refuse(
                "a bucket of the conversation was archived in this commit",
            ));
        }
        Ok(())
    }

    pub(crate) async fn apply(&mut self, m: &Mutation) -> StoreResult<()> {
        match m {
            Mutation::CreateConversation { record, members } => self.create(record, members).await,
            Mutation::AddMembers { key, users, at } => {
                let k = ck(key);
                if self.conv(&k).await?.is_none() {
                    return Err(StoreError::NotFound);
                }
                for u in users {
                    self.add_member(&k, u.as_str(), *at).await?;
                }
                Ok(())
            }
            Mutation::RemoveMembers { key, users } => {
                let k = ck(key);
                if self.conv(&k).await?.is_none() {
                    return Err(StoreError::NotFound);
                }
                for u in users {
                    self.remove_member(&k, u.as_str()).await?;
                }
                Ok(())
            }
            Mutation::Append {
                key,
                expected_last_seq,
                messages,
                inbox,
            } => self.append(key, *expected_last_seq, messages, *inbox).await,
            Mutation::Edit {
                key,
                seq,
                content,
                editor,
                at,
                inbox,
            } => self.edit(key, *seq, content, editor, *at, *inbox).await,
            Mutation::Delete {
                key,
                seq,
                at,
                inbox,
            } => self.delete(key, *seq, *at, *inbox).await,
            Mutation::Archive {
                bucket,
                first_seq,
                last_seq,
                object,
            } => self.archive(bucket, *first_seq, *last_seq, object).await,
            Mutation::Restore {
                key,
                message,
                versions,
            } => self.restore(key, message, versions).await,
            Mutation::MoveToArchive { .. } => Err(StoreError::Unavailable(
                "no archive store is configured".into(),
            )),
        }
    }

    async fn create(&mut self, record: &ConversationRecord, members: &[UserId]) -> StoreResult<()> {
        let k = (
            record.tenant.as_str().to_owned(),
            record.conversation_id.as_str().to_owned(),
        );
        if self.conv(&k).await?.is_some() {
            return Err(refuse("conversation exists"));
        }
        let last_message = record.last_message.as_ref().map(encode).transpose()?;
        let ts = self.ts();
        self.push(
            &self.store.st.insert_conversation,
            (
                k.0.clone(),
                k.1.clone(),
                record.kind.as_str().to_owned(),
                record.title.clone(),
                record.created_at.unix_ms(),
                record.created_by.as_str().to_owned(),
                seq_db(record.last_seq),
                last_message,
                record.last_activity.unix_ms(),
                ts,
            ),
        );
        self.convs.insert(k.clone(), Some(Conv::of_record(record)));
        // A new conversation has no members yet: nothing to read.
        self.members.insert(k.clone(), BTreeSet::new());
        for u in members {
            self.add_member(&k, u.as_str(), record.created_at).await?;
        }
        Ok(())
    }

    async fn remove_member(&mut self, k: &Ck, user: &str) -> StoreResult<()> {
        let st = &self.store.st;
        let (t, c, u) = (k.0.clone(), k.1.clone(), user.to_owned());
        let ts = self.ts();
        self.push(&st.delete_member, (ts, t.clone(), c.clone(), u.clone()));
        let ts = self.ts();
        self.push(
            &st.delete_user_conversation,
            (ts, t.clone(), u.clone(), c.clone()),
        );
        let ts = self.ts();
        self.push(&st.delete_marks_of, (ts, t.clone(), c.clone(), u.clone()));
        self.members(k).await?.remove(user);
        for d in self.devices(&t, &u).await? {
            let ts = self.ts();
            self.push(
                &self.store.st.delete_inbox_conversation,
                (ts, t.clone(), u.clone(), d, c.clone()),
            );
        }
        Ok(())
    }

    /// The bucket day of a new message, opening a bucket when its UTC day
    /// is newer than the newest bucket. A message whose day is not newer
    /// (a clock that went back) joins the newest bucket, so that buckets
    /// always hold consecutive seq ranges in day order; should that bucket
    /// be archived already, the message opens the day after it.
    async fn assign_day(&mut self, k: &Ck, m: &Message) -> StoreResult<u32> {
        let day = day_bucket(m.created_at);
        let newest = self.buckets(k).await?.first().cloned();
        let open = match newest {
            None => day,
            Some(b) if day > b.day => day,
            Some(b) if b.archived.is_some() => b.day.saturating_add(1),
            Some(b) => return Ok(b.day),
        };
        self.buckets(k).await?.insert(
            0,
            Bucket {
                day: open,
                first: m.seq,
                archived: None,
            },
        );
        let ts = self.ts();
        self.push(
            &self.store.st.insert_bucket,
            (k.0.clone(), k.1.clone(), day_db(open), seq_db(m.seq), ts),
        );
        Ok(open)
    }

    async fn append(
        &mut self,
        key: &ConversationKey,
        expected_last_seq: u64,
        messages: &[Message],
        inbox: bool,
    ) -> StoreResult<()> {
        let k = ck(key);
        let Some(mut conv) = self.conv(&k).await? else {
            return Err(StoreError::NotFound);
        };
        if conv.last_seq != expected_last_seq {
            return Err(refuse(format!(
                "append expected last_seq {expected_last_seq}, store has {}",
                conv.last_seq
            )));
        }
        for (i, m) in messages.iter().enumerate() {
            let wanted = expected_last_seq + 1 + i as u64;
            if m.seq != wanted || m.conversation_id != key.conversation_id {
                return Err(refuse(format!(
                    "message seq {} does not continue {expected_last_seq}",
                    m.seq
                )));
            }
        }
        // Idempotency keys: this commit's, then the stored ones (read
        // together).
        let mut fresh = HashSet::new();
        for m in messages {
            let id = (
                k.clone(),
                m.sender_id.as_str().to_owned(),
                m.client_msg_id.as_str().to_owned(),
            );
            if self.sent.contains(&id) || !fresh.insert(id) {
                return Err(refuse(format!(
                    "client_msg_id {} already stored",
                    m.client_msg_id
                )));
            }
        }
        let store = self.store;
        let keys: Vec<(String, String)> = messages
            .iter()
            .map(|m| {
                (
                    m.sender_id.as_str().to_owned(),
                    m.client_msg_id.as_str().to_owned(),
                )
            })
            .collect();
        let (t, c) = (k.0.as_str(), k.1.as_str());
        let stored = store
            .each(keys, |(sender, id)| async move {
                store.sent_row(t, c, &sender, &id).await
            })
            .await?;
        if let Some((m, _)) = messages.iter().zip(&stored).find(|(_, s)| s.is_some()) {
            return Err(refuse(format!(
                "client_msg_id {} already stored",
                m.client_msg_id
            )));
        }
        let Some(last) = messages.last() else {
            return Ok(());
        };
        // Every device of every member gets an inbox entry, except the
        // device that sent the message (it has it already).
        let recipients = if inbox {
            self.recipients(&k).await?
        } else {
            Vec::new()
        };
        let mut senders: HashMap<String, u64> = HashMap::new();
        for m in messages {
            let day = self.assign_day(&k, m).await?;
            self.insert_message(&k, day, m)?;
            let (sender, client_msg_id) = (
                m.sender_id.as_str().to_owned(),
                m.client_msg_id.as_str().to_owned(),
            );
            let ts = self.ts();
            self.push(
                &self.store.st.insert_sent,
                (
                    k.0.clone(),
                    k.1.clone(),
                    sender.clone(),
                    client_msg_id.clone(),
                    seq_db(m.seq),
                    day_db(day),
                    ts,
                ),
            );
            self.sent.insert((k.clone(), sender.clone(), client_msg_id));
            let ts = self.ts();
            self.push(
                &self.store.st.insert_index,
                (
                    k.0.clone(),
                    k.1.clone(),
                    id_db(m.message_id),
                    seq_db(m.seq),
                    day_db(day),
                    ts,
                ),
            );
            if let Some(media) = m.content.as_ref().and_then(Content::media) {
                self.reference_media(&k, &media.blob_ref);
            }
            for (user, devices) in &recipients {
                for device in devices {
                    if *user == sender && device == m.sender_device.as_str() {
                        continue;
                    }
                    self.insert_inbox(&k, user, device, m.seq, day, m.created_at);
                }
            }
            senders.insert(sender, m.seq);
        }
        // Sending implies having received and read everything before it.
        for (sender, seq) in senders {
            if self.members(&k).await?.contains(&sender) {
                self.set_mark(&k, &sender, DELIVERED, seq);
                self.set_mark(&k, &sender, READ, seq);
            }
        }
        conv.last_seq = last.seq;
        conv.last_message = Some(last.clone());
        conv.last_activity = last.created_at.unix_ms();
        let ts = self.ts();
        self.push(
            &self.store.st.set_position,
            (
                ts,
                seq_db(last.seq),
                encode(last)?,
                last.created_at.unix_ms(),
                k.0.clone(),
                k.1.clone(),
            ),
        );
        self.convs.insert(k, Some(conv));
        Ok(())
    }

    /// Writes a changed message back, into every member device's inbox,
    /// and into the conversation's preview when it is the newest.
    async fn store_update(
        &mut self,
        k: &Ck,
        day: u32,
        m: &Message,
        inbox: bool,
    ) -> StoreResult<()> {
        self.insert_message(k, day, m)?;
        if inbox {
            // The entry is as fresh as the change, for expiry.
            let at = m.deleted_at.or(m.edited_at).unwrap_or(m.created_at);
            for (user, devices) in self.recipients(k).await? {
                for device in devices {
                    self.insert_inbox(k, &user, &device, m.seq, day, at);
                }
            }
        }
        if let Some(mut conv) = self.conv(k).await?
            && conv.last_seq == m.seq
        {
            let ts = self.ts();
            self.push(
                &self.store.st.set_last_message,
                (ts, encode(m)?, k.0.clone(), k.1.clone()),
            );
            conv.last_message = Some(m.clone());
            self.convs.insert(k.clone(), Some(conv));
        }
        Ok(())
    }

    async fn edit(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        content: &Content,
        editor: &UserId,
        at: Timestamp,
        inbox: bool,
    ) -> StoreResult<()> {
        let k = ck(key);
        self.check_not_archived_here(&k)?;
        let Some((day, mut message)) = self.live_message(&k, seq).await? else {
            return Err(StoreError::NotFound);
        };
        if message.deleted_at.is_some() {
            return Err(refuse("the message is deleted"));
        }
        let mut versions = self.versions_of(&k, day, seq).await?;
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
            self.insert_version(&k, day, seq, &original)?;
            versions.push(original);
        }
        let next = versions.last().map_or(1, |v| v.version) + 1;
        let version = MessageVersion {
            version: next,
            content: content.clone(),
            at,
            editor: editor.clone(),
        };
        self.insert_version(&k, day, seq, &version)?;
        versions.push(version);
        self.versions.insert((k.clone(), seq), versions);
        if let Some(media) = content.media() {
            self.reference_media(&k, &media.blob_ref);
        }
        message.content = Some(content.clone());
        message.edited_at = Some(at);
        self.store_update(&k, day, &message, inbox).await
    }

    async fn delete(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        at: Timestamp,
        inbox: bool,
    ) -> StoreResult<()> {
        let k = ck(key);
        self.check_not_archived_here(&k)?;
        let Some((day, mut message)) = self.live_message(&k, seq).await? else {
            return Err(StoreError::NotFound);
        };
        if message.deleted_at.is_some() {
            return Ok(());
        }
        // No content anywhere after a delete, the versions included.
        let ts = self.ts();
        self.push(
            &self.store.st.delete_versions,
            (ts, k.0.clone(), k.1.clone(), day_db(day), seq_db(seq)),
        );
        self.versions.insert((k.clone(), seq), Vec::new());
        message.content = None;
        message.deleted_at = Some(at);
        self.store_update(&k, day, &message, inbox).await
    }

    async fn archive(
        &mut self,
        bucket: &BucketKey,
        first_seq: u64,
        last_seq: u64,
        object: &str,
    ) -> StoreResult<()> {
        let k = (
            bucket.tenant.as_str().to_owned(),
            bucket.conversation_id.as_str().to_owned(),
        );
        self.check_not_archived_here(&k)?;
        let newest = self.conv(&k).await?.map_or(0, |c| c.last_seq);
        let buckets = self.buckets(&k).await?;
        let Some(index) = buckets.iter().position(|b| b.day == bucket.day) else {
            return Err(StoreError::NotFound);
        };
        if buckets[index].archived.is_some() {
            return Err(refuse("the bucket is archived already"));
        }
        let (first, last) = (buckets[index].first, bucket_last(buckets, index, newest));
        if (first, last) != (first_seq, last_seq) || self.touched.contains(&k) {
            return Err(refuse(format!(
                "the bucket holds {first}..={last} now, not {first_seq}..={last_seq}"
            )));
        }
        let day = bucket.day;
        // The rows the archive replaces, for their idempotency keys.
        let rows = self.store.bucket_messages(&k.0, &k.1, day).await?;
        // The newest message keeps its live row, versions and key: the
        // conversation's position and preview derive from it.
        let mut kept = None;
        for m in rows {
            if m.seq == newest {
                let versions = self.versions_of(&k, day, m.seq).await?;
                kept = Some((m, versions));
                continue;
            }
            let ts = self.ts();
            self.push_as(
                &self.store.st.delete_sent,
                (
                    ts,
                    k.0.clone(),
                    k.1.clone(),
                    m.sender_id.as_str().to_owned(),
                    m.client_msg_id.as_str().to_owned(),
                ),
                Phase::After,
            );
        }
        // One partition tombstone each instead of a tombstone per row.
        let ts = self.ts();
        self.push(
            &self.store.st.delete_bucket_messages,
            (ts, k.0.clone(), k.1.clone(), day_db(day)),
        );
        let ts = self.ts();
        self.push(
            &self.store.st.delete_bucket_versions,
            (ts, k.0.clone(), k.1.clone(), day_db(day)),
        );
        if let Some((m, versions)) = kept {
            // Written after the tombstones, so with later timestamps.
            self.insert_message(&k, day, &m)?;
            for v in &versions {
                self.insert_version(&k, day, m.seq, v)?;
            }
        }
        for (user, devices) in self.recipients(&k).await? {
            for device in devices {
                let ts = self.ts();
                self.push_as(
                    &self.store.st.delete_inbox_between,
                    (
                        ts,
                        k.0.clone(),
                        user.clone(),
                        device,
                        k.1.clone(),
                        seq_db(first.saturating_sub(1)),
                        seq_db(last),
                    ),
                    Phase::After,
                );
            }
        }
        let ts = self.ts();
        self.push(
            &self.store.st.archive_bucket,
            (
                ts,
                seq_db(last),
                object.to_owned(),
                k.0.clone(),
                k.1.clone(),
                day_db(day),
            ),
        );
        if let Some(b) = self.buckets(&k).await?.get_mut(index) {
            b.archived = Some((last, object.to_owned()));
        }
        self.archived.insert(k);
        Ok(())
    }

    async fn restore(
        &mut self,
        key: &ConversationKey,
        message: &Message,
        versions: &[MessageVersion],
    ) -> StoreResult<()> {
        let k = ck(key);
        self.check_not_archived_here(&k)?;
        if self.live_message(&k, message.seq).await?.is_some() {
            return Ok(());
        }
        let day = match self.bucket_of(&k, message.seq).await? {
            Some(b) => b.day,
            None => day_bucket(message.created_at),
        };
        self.insert_message(&k, day, message)?;
        for v in versions {
            self.insert_version(&k, day, message.seq, v)?;
        }
        self.versions
            .insert((k.clone(), message.seq), versions.to_vec());
        Ok(())
    }

    // --- acks

    pub(crate) async fn ack_delivered(
        &mut self,
        k: &Ck,
        user: &str,
        device: &str,
        seq: u64,
    ) -> StoreResult<MarkChange> {
        let s = self.store;
        let (conv, member, cursor, my_marks) = futures::try_join!(
            s.conv_row(&k.0, &k.1),
            s.st.member.one(&s.session, (&k.0, &k.1, user)),
            s.st.cursor.one(&s.session, (&k.0, user, device, &k.1)),
            s.st.marks_of.all(&s.session, (&k.0, &k.1, user)),
        )?;
        let Some(conv) = conv else {
            return Err(StoreError::NotFound);
        };
        if member.is_none() {
            return Err(StoreError::NotAMember);
        }
        let (mut delivered, read) = marks(my_marks)?;
        // A mark past the end of the conversation would hide future messages.
        let seq = seq.min(conv.last_seq);
        let previous = cursor.map(|(v,)| seq_of(v)).transpose()?.unwrap_or(0);
        let (t, c, u, d) = (k.0.clone(), k.1.clone(), user.to_owned(), device.to_owned());
        if seq <= previous {
            // An ack below the cursor confirms an update (an edit or a
            // delete re-enters the inbox at the message's seq).
            let ts = self.ts();
            self.push(&s.st.delete_inbox, (ts, t, u, d, c, seq_db(seq)));
        } else {
            let ts = self.ts();
            self.push(
                &s.st.set_cursor,
                (t.clone(), u.clone(), d.clone(), c.clone(), seq_db(seq), ts),
            );
            // The entries this ack covers: (previous, seq], one range
            // tombstone.
            let ts = self.ts();
            self.push(
                &s.st.delete_inbox_between,
                (ts, t, u, d, c, seq_db(previous), seq_db(seq)),
            );
        }
        let moved = seq > delivered;
        if moved {
            self.set_mark(k, user, DELIVERED, seq);
            delivered = seq;
        }
        self.finish().await?;
        Ok(MarkChange {
            kind: conv.kind,
            members: self.member_list(k).await?,
            delivered_seq: delivered,
            read_seq: read,
            delivered_moved: moved,
            read_moved: false,
        })
    }

    pub(crate) async fn ack_read(
        &mut self,
        k: &Ck,
        user: &str,
        seq: u64,
    ) -> StoreResult<MarkChange> {
        let s = self.store;
        let (conv, member, my_marks) = futures::try_join!(
            s.conv_row(&k.0, &k.1),
            s.st.member.one(&s.session, (&k.0, &k.1, user)),
            s.st.marks_of.all(&s.session, (&k.0, &k.1, user)),
        )?;
        let Some(conv) = conv else {
            return Err(StoreError::NotFound);
        };
        if member.is_none() {
            return Err(StoreError::NotAMember);
        }
        let (mut delivered, mut read) = marks(my_marks)?;
        let seq = seq.min(conv.last_seq);
        let read_moved = seq > read;
        // What was read was delivered.
        let delivered_moved = seq > delivered;
        if read_moved {
            self.set_mark(k, user, READ, seq);
            read = seq;
        }
        if delivered_moved {
            self.set_mark(k, user, DELIVERED, seq);
            delivered = seq;
        }
        self.finish().await?;
        Ok(MarkChange {
            kind: conv.kind,
            members: self.member_list(k).await?,
            delivered_seq: delivered,
            read_seq: read,
            delivered_moved,
            read_moved,
        })
    }

    async fn member_list(&mut self, k: &Ck) -> StoreResult<Vec<UserId>> {
        self.members(k)
            .await?
            .iter()
            .map(|u| user_id(u.clone()))
            .collect()
    }

    pub(crate) fn register_device(&mut self, tenant: &str, user: &str, device: &str) {
        let ts = self.ts();
        self.push(
            &self.store.st.insert_device,
            (
                tenant.to_owned(),
                user.to_owned(),
                device.to_owned(),
                Timestamp::now().unix_ms(),
                ts,
            ),
        );
    }

    /// Writes everything: one LOGGED batch, or, when the whole is too
    /// large, the side parts in UNLOGGED batches before and after it (see
    /// the module documentation).
    pub(crate) async fn finish(&mut self) -> StoreResult<()> {
        let writes = std::mem::take(&mut self.writes);
        if writes.is_empty() {
            return Ok(());
        }
        let n = i64::try_from(writes.len()).unwrap_or(i64::MAX / 4);
        self.store.clock.observe(self.base + n);
        let total: usize = writes.iter().map(|w| w.bytes).sum();
        let max = self.store.max_batch_bytes;
        if total <= max {
            return self.run(BatchType::Logged, &writes).await;
        }
        let mut before = Vec::new();
        let mut core = Vec::new();
        let mut after = Vec::new();
        for w in writes {
            match w.phase {
                Phase::Before => before.push(w),
                Phase::Core => core.push(w),
                Phase::After => after.push(w),
            }
        }
        self.run_chunked(before).await?;
        let core_bytes: usize = core.iter().map(|w| w.bytes).sum();
        if core_bytes > max {
            tracing::warn!(
                bytes = core_bytes,
                statements = core.len(),
                "a commit's batch is larger than max_batch_bytes; Scylla refuses batches \
                 past batch_size_fail_threshold_in_kb"
            );
        }
        self.run(BatchType::Logged, &core).await?;
        self.run_chunked(after).await
    }

    /// Side parts of a split commit: UNLOGGED batches of bounded size,
    /// in order.
    async fn run_chunked(&self, writes: Vec<Pending>) -> StoreResult<()> {
        let max = self.store.max_batch_bytes;
        let mut chunk: Vec<Pending> = Vec::new();
        let mut bytes = 0;
        for w in writes {
            if !chunk.is_empty() && (bytes + w.bytes > max || chunk.len() >= MAX_SIDE_STATEMENTS) {
                self.run(BatchType::Unlogged, &chunk).await?;
                chunk.clear();
                bytes = 0;
            }
            bytes += w.bytes;
            chunk.push(w);
        }
        self.run(BatchType::Unlogged, &chunk).await
    }

    async fn run(&self, kind: BatchType, writes: &[Pending]) -> StoreResult<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let mut batch = Batch::new(kind);
        // Every statement states its timestamp: sending it again is harmless.
        batch.set_is_idempotent(true);
        for w in writes {
            batch.append_statement(w.ps.clone());
        }
        let values: Vec<&(dyn SerializeRow + Send + Sync)> =
            writes.iter().map(|w| w.values.as_ref()).collect();
        self.store
            .session
            .batch(&batch, values)
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

/// Reads every message row of one bucket (for an archive mark).
pub(crate) async fn collect_messages(
    rows: impl futures::Stream<Item = StoreResult<(String,)>>,
) -> StoreResult<Vec<Message>> {
    let mut out = Vec::new();
    let mut rows = std::pin::pin!(rows);
    while let Some(row) = rows.next().await {
        out.push(decode(&row?.0)?);
    }
    Ok(out)
}
