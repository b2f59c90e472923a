//! The store's rules (`switchboard_store::rules`) over Scylla: checks
//! first, then every row in one batch.
//!
//! What each mutation checks and which rows it changes is decided in the
//! rules, shared with the embedded store. This file and `commit/view.rs`
//! are the [`Commit`] view they run against: the reads (through a
//! per-commit cache), the CQL rows each write becomes, the day bucket a
//! message lands in, and how the commit is sent. A refused commit writes nothing; otherwise every
//! resulting row goes in one LOGGED batch: all of it or none of it lands,
//! across partitions. A partition writer's commit is decided first
//! (`fence.rs`), and its decision serves as the batch log: its batch goes
//! UNLOGGED, and is written whole again by the next claim if need be.
//!
//! The read-then-write is safe because every conversation has exactly one
//! writer, the worker's sequencer holding the partition's lease. Scylla
//! does not serialise the check with the write, so a writer that lost its
//! lease while a commit was on its way could still land it after its
//! successor's: a writer's commits (`Store::commit_as`) are therefore
//! decided by the writer fence (`fence.rs`) before their batch is sent.
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
//! the one LOGGED batch, then the clean-up (inbox entries removed, and an
//! archive mark's idempotency keys) in UNLOGGED batches. If the
//! commit fails after the first part, inbox entries may exist for messages
//! that were never stored: reads skip an entry whose message row is
//! missing, an entry for a seq stored later points at that message, and
//! the TTL removes them in any case. If it fails in the last part, some
//! inbox entries stay (an ack is answered with the error and repeated;
//! the TTL removes them in any case), and some idempotency keys of
//! archived messages stay: `find_sent` finds no live
//! row behind them (so answers `None`), and reusing such an old
//! `client_msg_id` is refused as a duplicate, as it would have been
//! before the archive.

use std::collections::{BTreeSet, HashMap, HashSet};

use scylla::serialize::row::SerializeRow;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use switchboard_protocol::safety::Ban;
use switchboard_protocol::{
    ConversationKind, Message, MessageId, MessageVersion, TenantId, Timestamp,
};
use switchboard_store::rules::{BucketSpan, Commit, InboxEntries, MarkReads, Marks, Placement};
use switchboard_store::{
    BucketKey, ConversationKey, ConversationRecord, MemberState, PinRow, StoreError, StoreResult,
    UNSOLICITED_WINDOW_MS, WriterClaim, day_bucket,
};

use crate::client::ScyllaStore;
use crate::cql::{Args, Size, Write, outcome_unknown, unavailable};
use crate::fence;
use crate::metrics::{self, Request};
use crate::rows::{
    Bucket, Conv, DELIVERED, READ, bucket_last, day_db, encode, id_db, marks, seq_db, seq_of,
};

mod archive;
mod erasure;
mod extras;
mod safety;
mod view;
mod writes;

/// A conversation: tenant and conversation id.
type Ck = (String, String);

fn ck(key: &ConversationKey) -> Ck {
    (
        key.tenant.as_str().to_owned(),
        key.conversation_id.as_str().to_owned(),
    )
}

/// Most statements in one batch of a split commit's side parts.
const MAX_SIDE_STATEMENTS: usize = 1000;

/// Where a statement goes when a commit is too large for one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Inbox entries of appends, edits and deletes, and an erasure's
    /// removals of the rows its lists lead to: written ahead of the
    /// commit's batch (harmless if the commit then fails).
    Before,
    /// The commit proper: one LOGGED batch.
    Core,
    /// Clean-up: inbox entries removed, and an archive mark's idempotency
    /// keys. Written after the commit's batch, since the loss of those
    /// keys before it could let a retried send store a duplicate.
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
    /// Unsolicited adds recorded in this commit, per tenant and user.
    unsolicited: HashMap<(String, String), Vec<i64>>,
    /// Member states written in this commit (`None`: removed).
    states: HashMap<(Ck, String), Option<MemberState>>,
    /// A user's emoji on a message, as read and changed in this commit.
    reactions: HashMap<(Ck, u64, String), BTreeSet<String>>,
    /// The conversation's pins, as read and changed in this commit.
    pins: HashMap<Ck, Vec<PinRow>>,
    /// Bans written in this commit, by conversation and user (`None`:
    /// lifted), for an erasure that reads them back.
    bans: HashMap<(Ck, String), Option<Ban>>,
    /// Thread read marks read or written in this commit: conversation,
    /// user, root seq.
    thread_marks: HashMap<(Ck, String, u64), Option<u64>>,
    writes: Vec<Pending>,
    /// How long a batch of unknown outcome is sent again (see
    /// [`Tx::run`]); `None`: until it lands.
    resend_for: Option<std::time::Duration>,
}

impl<'a> Tx<'a> {
    pub(crate) fn new(store: &'a ScyllaStore) -> Self {
        Self {
            store,
            base: store.clock.next(),
            convs: HashMap::new(),
            members: HashMap::new(),
            devices: HashMap::new(),
            states: HashMap::new(),
            reactions: HashMap::new(),
            pins: HashMap::new(),
            bans: HashMap::new(),
            thread_marks: HashMap::new(),
            buckets: HashMap::new(),
            messages: HashMap::new(),
            versions: HashMap::new(),
            sent: HashSet::new(),
            touched: HashSet::new(),
            archived: HashSet::new(),
            unsolicited: HashMap::new(),
            writes: Vec::new(),
            resend_for: Some(BOUNDED_RESEND_FOR),
        }
    }

    /// A commit of `Store::commit`: the writers' (and their maintenance
    /// passes'), whose batches are sent again until they land (see
    /// [`Tx::run`]). Marks and device records (`new`), which a gateway
    /// writes while a client waits, are idempotent however they land and
    /// give up after [`BOUNDED_RESEND_FOR`] with `Unavailable`.
    pub(crate) fn for_commit(store: &'a ScyllaStore) -> Self {
        Self {
            resend_for: None,
            ..Self::new(store)
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

    async fn member_set(&mut self, k: &Ck) -> StoreResult<&mut BTreeSet<String>> {
        if !self.members.contains_key(k) {
            let list = self.store.member_ids(&k.0, &k.1).await?;
            self.members.insert(k.clone(), list.into_iter().collect());
        }
        self.members
            .get_mut(k)
            .ok_or_else(|| StoreError::Corrupt("member view".into()))
    }

    async fn device_list(&mut self, tenant: &str, user: &str) -> StoreResult<Vec<String>> {
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
    async fn recipient_list(&mut self, k: &Ck) -> StoreResult<Vec<(String, Vec<String>)>> {
        let users: Vec<String> = self.member_set(k).await?.iter().cloned().collect();
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

    /// The bucket day of a message this commit read or wrote.
    /// A user's emoji on message `seq`, loaded once per commit.
    async fn my_reactions(
        &mut self,
        k: &Ck,
        seq: u64,
        user: &str,
    ) -> StoreResult<&mut BTreeSet<String>> {
        let key = (k.clone(), seq, user.to_owned());
        if !self.reactions.contains_key(&key) {
            let day = self.bucket_of(k, seq).await?.map(|b| b.day);
            let found = match day {
                Some(day) => self.store.reactions_at(&k.0, &k.1, day, seq, user).await?,
                None => Vec::new(),
            };
            self.reactions
                .insert(key.clone(), found.into_iter().collect());
        }
        self.reactions
            .get_mut(&key)
            .ok_or_else(|| StoreError::Corrupt("reaction cache".into()))
    }

    /// The conversation's pins, loaded once per commit.
    async fn pin_list(&mut self, k: &Ck) -> StoreResult<&mut Vec<PinRow>> {
        if !self.pins.contains_key(k) {
            let pins = self.store.pin_rows(&k.0, &k.1).await?;
            self.pins.insert(k.clone(), pins);
        }
        self.pins
            .get_mut(k)
            .ok_or_else(|| StoreError::Corrupt("pin cache".into()))
    }

    fn day_of(&self, k: &Ck, seq: u64) -> StoreResult<u32> {
        match self.messages.get(&(k.clone(), seq)) {
            Some(Some((day, _))) => Ok(*day),
            _ => Err(StoreError::Corrupt(format!(
                "message {seq} was not read before a write that needs its bucket"
            ))),
        }
    }

    /// Sets a grow-only mark: the new row, and a delete of every row below
    /// it. Whatever order concurrent writers' rows land in, the highest
    /// survives.
    fn set_mark(&mut self, k: &Ck, user: &str, mark: i8, seq: u64) {
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

    #[allow(clippy::too_many_arguments)]
    fn inbox_row(
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

    /// Writes everything: one LOGGED batch, or, when the whole is too
    /// large, the side parts in UNLOGGED batches before and after it (see
    /// the module documentation). A writer's decided commit goes UNLOGGED
    /// (see [`Tx::finish_as`]).
    pub(crate) async fn finish(&mut self) -> StoreResult<()> {
        self.finish_as(None).await
    }

    /// [`Tx::finish`] by a partition's writer: the batch that makes the
    /// commit (the whole, or its core) is decided first (`fence.rs`).
    pub(crate) async fn finish_as(&mut self, claim: Option<WriterClaim>) -> StoreResult<()> {
        let writes = std::mem::take(&mut self.writes);
        if writes.is_empty() {
            return Ok(());
        }
        let n = i64::try_from(writes.len()).unwrap_or(i64::MAX / 4);
        let last_ts = self.base + n;
        self.store.clock.observe(last_ts);
        let total: usize = writes.iter().map(|w| w.bytes).sum();
        let max = self.store.max_batch_bytes;
        // A decided commit needs no batch log: its decision (`pending`)
        // is one, sent again here until it lands and by the partition's
        // next claim if this writer stops. Cassandra's batch log would
        // first write to two other nodes, and with one of them gone but
        // not yet convicted by gossip (about 10 s), every commit waits.
        let kind = if claim.is_some() {
            BatchType::Unlogged
        } else {
            BatchType::Logged
        };
        if total <= max {
            self.decide(claim, &writes, last_ts).await?;
            return self.run(kind, &writes).await;
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
        self.decide(claim, &core, last_ts).await?;
        self.run(kind, &core).await?;
        self.run_chunked(after).await
    }

    /// Decides the commit and writes nothing: a writer stopped between
    /// the two steps, for the fence's tests.
    #[cfg(test)]
    pub(crate) async fn decide_only(&mut self, claim: WriterClaim) -> StoreResult<()> {
        let writes = std::mem::take(&mut self.writes);
        let last_ts = self.base + i64::try_from(writes.len()).unwrap_or(0);
        self.decide(Some(claim), &writes, last_ts).await
    }

    /// Records `writes` as the decided commit of `claim`'s partition;
    /// `Fenced` when the partition was claimed again since.
    async fn decide(
        &self,
        claim: Option<WriterClaim>,
        writes: &[Pending],
        last_ts: i64,
    ) -> StoreResult<()> {
        let Some(claim) = claim else {
            return Ok(());
        };
        let recorded = writes
            .iter()
            .map(|w| fence::Recorded::of(&w.ps, w.values.as_ref()))
            .collect::<StoreResult<Vec<_>>>()?;
        let pending = fence::encode(&recorded)?;
        fence::decide(
            &self.store.session,
            &self.store.fence,
            claim,
            pending,
            last_ts,
        )
        .await
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

    /// Sends one batch. When its outcome is unknown (a client timeout, a
    /// lost connection, a coordinator short of replicas), the same batch
    /// is sent again, for a commit until it lands: the same rows with the
    /// same timestamps, so a first copy that lands late changes nothing.
    /// Only a refusal returns an error. Returning `Unavailable` on an unknown
    /// outcome (after any finite wait) hands the writer a commit it cannot
    /// know the fate of: it plans the same commands again, with new
    /// message ids, while the first batch may still land (late, or from
    /// the batch log); the later timestamps win every cell, and a gateway
    /// that answered the client from the first copy in between acked a
    /// message id the store then lost (found by the CQL fault test, first
    /// with no resend, then with resends bounded at 8 s). A writer whose
    /// store stays away stalls here, as it would retrying; stopping it
    /// (its lease lost, a hand-over, shutdown) drops this future.
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
        let started = std::time::Instant::now();
        let mut backoff = RESEND_FIRST_BACKOFF;
        loop {
            let values: Vec<&(dyn SerializeRow + Send + Sync)> =
                writes.iter().map(|w| w.values.as_ref()).collect();
            let sent_at = std::time::Instant::now();
            let sent = self.store.session.batch(&batch, values).await;
            metrics::observe(Request::Batch, sent_at, &sent);
            match sent {
                Ok(_) => return Ok(()),
                Err(e)
                    if outcome_unknown(&e)
                        && self
                            .resend_for
                            .is_none_or(|limit| started.elapsed() < limit) =>
                {
                    let waited = started.elapsed();
                    if waited < RESEND_ALERT_AFTER {
                        tracing::warn!(error = %e, statements = writes.len(), ?waited,
                            "a commit's batch may or may not have landed; sending it again");
                    } else {
                        tracing::error!(error = %e, statements = writes.len(), ?waited,
                            "a commit's batch has not landed for a while: the cluster is unreachable or overloaded; sending it again");
                    }
                    metrics::resent(Request::Batch);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(RESEND_MAX_BACKOFF);
                }
                Err(e) => return Err(unavailable(e)),
            }
        }
    }
}

/// How long the batch of a mark or a device record is sent again.
const BOUNDED_RESEND_FOR: std::time::Duration = std::time::Duration::from_secs(5);
/// When the resends of one batch (see [`Tx::run`]) are logged as errors.
const RESEND_ALERT_AFTER: std::time::Duration = std::time::Duration::from_secs(30);
const RESEND_FIRST_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);
const RESEND_MAX_BACKOFF: std::time::Duration = std::time::Duration::from_secs(1);
