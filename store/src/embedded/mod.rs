//! The embedded store: fjall, a pure-Rust log-structured (LSM) key-value
//! engine. An LSM suits this workload: every message writes a few small
//! rows under scattered keys (its conversation, each recipient's inbox, its
//! idempotency key), which an LSM appends to one journal, where a B-tree
//! would rewrite a page per key per commit. Writes are group-committed by
//! one commit thread (`group_commit.rs`) with one journal sync per group; reads
//! run on tokio's blocking pool against a snapshot.
//!
//! The database allows one process per directory (it takes a lock file),
//! so the process that opens the store is its only owner. Other processes
//! reach it through the store service on NATS (the backbone crate), which
//! serves any `Store`.

mod apply;
mod cache;
mod channels;
mod codec;
mod consent;
mod erasure;
mod extras;
mod group_commit;
mod keys;
mod lists;
mod lookup;
mod read;
mod rows;
mod safety;
mod senders;
mod states;
mod unread;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use fjall::Database;
use switchboard_protocol::channels::Invite;
use switchboard_protocol::profile::Profile;
use switchboard_protocol::reports::{Report, ReportStatus};
use switchboard_protocol::safety::{Ban, Block};
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, MessageId, MessageVersion, TenantId,
    Timestamp, UserId,
};
use tokio::sync::{mpsc, oneshot};

use self::apply::{Applied, WriteOp};
use self::codec::storage;
use self::group_commit::Job;
use self::keys::{Spaces, check_schema};
use crate::reads::{self, Answer, Read, Reads};
use crate::{
    ArchiveScan, ArchivedBucket, BucketContents, BucketKey, Consent, ConsentQuery,
    ConversationDetail, ConversationKey, ConversationScan, ConversationSummary, ExpiredScan,
    HistoryQuery, InboxCursor, InboxSweep, ListQuery, Listing, MarkChange, MessageKey, Mutation,
    PinRow, PolicyScan, SentBy, SentKey, SequencerState, Store, StoreError, StoreResult,
    ThreadEntry,
};

/// Settings of the embedded store.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    /// The database directory.
    pub path: PathBuf,
    /// The block cache, in bytes.
    pub cache_bytes: u64,
    /// Writes waiting for the commit thread before callers wait too.
    pub queue_depth: usize,
}

impl EmbeddedConfig {
    /// Defaults for a database inside `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            path: dir.join("db"),
            cache_bytes: 64 * 1024 * 1024,
            queue_depth: 16 * 1024,
        }
    }
}

/// The embedded [`Store`].
pub struct EmbeddedStore {
    db: Database,
    spaces: Arc<Spaces>,
    commits: mpsc::Sender<Job>,
}

impl EmbeddedStore {
    /// Opens (or creates) the database and starts the commit thread.
    /// Fails if another process holds it.
    pub fn open(config: &EmbeddedConfig) -> StoreResult<Self> {
        std::fs::create_dir_all(&config.path).map_err(storage)?;
        let db = Database::builder(&config.path)
            .cache_size(config.cache_bytes)
            .open()
            .map_err(storage)?;
        let spaces = Arc::new(Spaces::open(&db)?);
        check_schema(&db, &spaces)?;
        consent::record_past_speakers(&db, &spaces)?;
        erasure::record_joined(&db, &spaces)?;
        senders::index_past_senders(&db, &spaces)?;
        unread::fill_uncounted(&db, &spaces)?;
        let commits =
            group_commit::spawn(db.clone(), spaces.clone(), config.queue_depth).map_err(storage)?;
        Ok(Self {
            db,
            spaces,
            commits,
        })
    }

    async fn write(&self, op: WriteOp) -> StoreResult<Applied> {
        let (done, wait) = oneshot::channel();
        self.commits
            .send(Job { op, done })
            .await
            .map_err(|_| StoreError::Unavailable("store commit thread stopped".into()))?;
        wait.await
            .map_err(|_| StoreError::Unavailable("store commit thread stopped".into()))?
    }

    async fn write_mark(&self, op: WriteOp) -> StoreResult<MarkChange> {
        match self.write(op).await? {
            Applied::Mark(change) => Ok(change),
            _ => Err(StoreError::Corrupt("an ack produced no marks".into())),
        }
    }

    /// Runs `f` on a snapshot, off the async threads.
    async fn on_snapshot<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&fjall::Snapshot, &Spaces) -> StoreResult<T> + Send + 'static,
    {
        let (db, spaces) = (self.db.clone(), self.spaces.clone());
        tokio::task::spawn_blocking(move || f(&db.snapshot(), &spaces))
            .await
            .map_err(|e| StoreError::Unavailable(format!("store read task failed: {e}")))?
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn ping(&self) -> StoreResult<()> {
        self.on_snapshot(|r, s| {
            fjall::Readable::contains_key(r, &s.meta, "schema_version")
                .map(|_| ())
                .map_err(storage)
        })
        .await
    }

    async fn commit(&self, mutations: Vec<Mutation>) -> StoreResult<()> {
        if mutations.is_empty() {
            return Ok(());
        }
        self.write(WriteOp::Commit(mutations)).await.map(|_| ())
    }

    async fn read(&self, read: Read) -> StoreResult<Answer> {
        reads::serve(self, read).await
    }

    async fn ack_delivered(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        conversation: &ConversationId,
        seq: u64,
    ) -> StoreResult<MarkChange> {
        self.write_mark(WriteOp::AckDelivered {
            tenant: tenant.clone(),
            user: user.clone(),
            device: device.clone(),
            conversation: conversation.clone(),
            seq,
        })
        .await
    }

    async fn ack_read(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversation: &ConversationId,
        seq: u64,
    ) -> StoreResult<MarkChange> {
        self.write_mark(WriteOp::AckRead {
            tenant: tenant.clone(),
            user: user.clone(),
            conversation: conversation.clone(),
            seq,
        })
        .await
    }

    async fn expire_inbox(
        &self,
        before: Timestamp,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<InboxSweep> {
        let from = match cursor {
            Some(c) => hex_decode(&c)
                .ok_or_else(|| StoreError::Corrupt(format!("bad inbox sweep cursor {c:?}")))?,
            None => Vec::new(),
        };
        match self
            .write(WriteOp::ExpireInbox {
                before,
                from,
                budget: budget.max(1),
            })
            .await?
        {
            Applied::Expired(seen, removed, next) => Ok(InboxSweep {
                seen: Some(seen),
                removed,
                next: next.map(|k| hex_encode(&k)),
            }),
            _ => Err(StoreError::Corrupt(
                "an inbox sweep produced no result".into(),
            )),
        }
    }

    async fn ack_thread_read(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversation: &ConversationId,
        root: MessageId,
        seq: u64,
    ) -> StoreResult<()> {
        self.write(WriteOp::AckThreadRead {
            tenant: tenant.clone(),
            user: user.clone(),
            conversation: conversation.clone(),
            root,
            seq,
        })
        .await
        .map(drop)
    }

    async fn register_device(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
    ) -> StoreResult<()> {
        let (t, u, d) = (tenant.clone(), user.clone(), device.clone());
        let known = self
            .on_snapshot(move |r, s| read::device_known(r, s, &t, &u, &d))
            .await?;
        if known {
            return Ok(());
        }
        self.write(WriteOp::RegisterDevice {
            tenant: tenant.clone(),
            user: user.clone(),
            device: device.clone(),
            at: Timestamp::now(),
        })
        .await
        .map(|_| ())
    }
}

#[async_trait]
impl Reads for EmbeddedStore {
    async fn sequencer_states(
        &self,
        keys: Vec<ConversationKey>,
    ) -> StoreResult<Vec<Option<SequencerState>>> {
        self.on_snapshot(move |r, s| read::sequencer_states(r, s, &keys))
            .await
    }

    async fn find_sent(&self, keys: Vec<SentKey>) -> StoreResult<Vec<Option<Message>>> {
        self.on_snapshot(move |r, s| read::find_sent(r, s, &keys))
            .await
    }

    async fn find_messages(&self, keys: Vec<MessageKey>) -> StoreResult<Vec<Option<Message>>> {
        self.on_snapshot(move |r, s| read::find_messages(r, s, &keys))
            .await
    }

    async fn versions(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        message_id: MessageId,
    ) -> StoreResult<Vec<MessageVersion>> {
        let (t, c, u) = (tenant.clone(), conversation.clone(), reader.clone());
        self.on_snapshot(move |r, s| read::versions(r, s, &t, &c, &u, message_id))
            .await
    }

    async fn conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<ConversationDetail> {
        let (t, c, r) = (tenant.clone(), conversation.clone(), reader.clone());
        self.on_snapshot(move |txn, s| read::conversation(txn, s, &t, &c, &r))
            .await
    }

    async fn members(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<(ConversationKind, Vec<UserId>)> {
        let (t, c, r) = (tenant.clone(), conversation.clone(), reader.clone());
        self.on_snapshot(move |txn, s| read::members_of(txn, s, &t, &c, &r))
            .await
    }

    async fn media_readable(
        &self,
        tenant: &TenantId,
        blob_ref: &str,
        reader: &UserId,
    ) -> StoreResult<bool> {
        let (t, b, r) = (tenant.clone(), blob_ref.to_owned(), reader.clone());
        self.on_snapshot(move |txn, s| read::media_readable(txn, s, &t, &b, &r))
            .await
    }

    async fn media_referenced(&self, tenant: &TenantId, blob_ref: &str) -> StoreResult<bool> {
        let (t, b) = (tenant.clone(), blob_ref.to_owned());
        self.on_snapshot(move |txn, s| read::media_referenced(txn, s, &t, &b))
            .await
    }

    async fn contacts(&self, tenant: &TenantId, user: &UserId) -> StoreResult<Vec<UserId>> {
        let (t, u) = (tenant.clone(), user.clone());
        self.on_snapshot(move |r, s| consent::contacts(r, s, &t, &u))
            .await
    }

    async fn consent(&self, queries: Vec<ConsentQuery>) -> StoreResult<Vec<Consent>> {
        self.on_snapshot(move |r, s| consent::consent(r, s, &queries))
            .await
    }

    async fn memberships(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> StoreResult<Vec<(ConversationId, ConversationKind, usize)>> {
        let (t, u) = (tenant.clone(), user.clone());
        self.on_snapshot(move |r, s| read::memberships(r, s, &t, &u))
            .await
    }

    async fn conversation_page(
        &self,
        tenant: &TenantId,
        user: &UserId,
        query: ListQuery,
    ) -> StoreResult<Vec<ConversationSummary>> {
        let (t, u) = (tenant.clone(), user.clone());
        self.on_snapshot(move |r, s| lists::conversation_page(r, s, &t, &u, &query))
            .await
    }

    async fn history(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        query: HistoryQuery,
    ) -> StoreResult<Vec<Message>> {
        let (t, c, r) = (tenant.clone(), conversation.clone(), reader.clone());
        self.on_snapshot(move |txn, s| read::history(txn, s, &t, &c, &r, query))
            .await
    }

    async fn replay(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        let (t, c, r) = (tenant.clone(), conversation.clone(), reader.clone());
        self.on_snapshot(move |txn, s| read::replay(txn, s, &t, &c, &r, after_seq, limit))
            .await
    }

    async fn inbox(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        after: Option<InboxCursor>,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        let (t, u, d) = (tenant.clone(), user.clone(), device.clone());
        self.on_snapshot(move |r, s| read::inbox(r, s, &t, &u, &d, after.as_ref(), limit))
            .await
    }

    async fn message_seqs(&self, keys: Vec<MessageKey>) -> StoreResult<Vec<Option<u64>>> {
        self.on_snapshot(move |r, s| read::message_seqs(r, s, &keys))
            .await
    }

    async fn archive_candidates(
        &self,
        before_day: u32,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<ArchiveScan> {
        let from = match cursor {
            Some(c) => hex_decode(&c)
                .ok_or_else(|| StoreError::Corrupt(format!("bad archive scan cursor {c:?}")))?,
            None => Vec::new(),
        };
        let (buckets, next) = self
            .on_snapshot(move |r, s| {
                read::archive_candidates(r, s, before_day, from, budget.max(1))
            })
            .await?;
        Ok(ArchiveScan {
            buckets,
            next: next.map(|k| hex_encode(&k)),
        })
    }

    async fn bucket_contents(
        &self,
        bucket: &BucketKey,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<BucketContents> {
        let bucket = bucket.clone();
        self.on_snapshot(move |r, s| read::bucket_contents(r, s, &bucket, after_seq, limit))
            .await
    }

    async fn archived_buckets(
        &self,
        key: &ConversationKey,
        after_seq: u64,
        before_seq: u64,
    ) -> StoreResult<Vec<ArchivedBucket>> {
        let key = key.clone();
        self.on_snapshot(move |r, s| read::archived_buckets(r, s, &key, after_seq, before_seq))
            .await
    }

    async fn sent_by(
        &self,
        key: &ConversationKey,
        sender: &UserId,
        before_seq: Option<u64>,
        limit: usize,
    ) -> StoreResult<Vec<SentBy>> {
        let (key, sender) = (key.clone(), sender.clone());
        self.on_snapshot(move |r, s| senders::sent_by(r, s, &key, &sender, before_seq, limit))
            .await
    }

    async fn user_reactions(
        &self,
        key: &ConversationKey,
        user: &UserId,
        seqs: Vec<u64>,
    ) -> StoreResult<Vec<Vec<String>>> {
        let (key, user) = (key.clone(), user.clone());
        self.on_snapshot(move |r, s| extras::user_reactions(r, s, &key, &user, &seqs))
            .await
    }

    async fn threads(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<Vec<ThreadEntry>> {
        let (t, c, u) = (tenant.clone(), conversation.clone(), reader.clone());
        self.on_snapshot(move |r, s| extras::threads(r, s, &t, &c, &u))
            .await
    }

    async fn pins(&self, key: &ConversationKey) -> StoreResult<Vec<PinRow>> {
        let key = key.clone();
        self.on_snapshot(move |r, s| extras::pins(r, s, &key)).await
    }

    async fn bans(&self, key: &ConversationKey) -> StoreResult<Vec<Ban>> {
        let key = key.clone();
        self.on_snapshot(move |r, s| {
            safety::bans(r, s, key.tenant.as_str(), key.conversation_id.as_str())
        })
        .await
    }

    async fn profiles(
        &self,
        tenant: &TenantId,
        users: Vec<UserId>,
    ) -> StoreResult<Vec<Option<Profile>>> {
        let t = tenant.clone();
        self.on_snapshot(move |r, s| safety::profiles(r, s, t.as_str(), &users))
            .await
    }

    async fn directory(
        &self,
        tenant: &TenantId,
        after: Option<ConversationId>,
        limit: usize,
    ) -> StoreResult<Vec<(ConversationId, Listing)>> {
        let t = tenant.clone();
        self.on_snapshot(move |r, s| channels::directory(r, s, t.as_str(), after.as_ref(), limit))
            .await
    }

    async fn member_counts(&self, keys: Vec<ConversationKey>) -> StoreResult<Vec<u64>> {
        self.on_snapshot(move |r, s| channels::member_counts(r, s, &keys))
            .await
    }

    async fn invites(&self, key: &ConversationKey) -> StoreResult<Vec<Invite>> {
        let key = key.clone();
        self.on_snapshot(move |r, s| channels::invites(r, s, &key))
            .await
    }

    async fn invite_by_code(&self, tenant: &TenantId, code: &str) -> StoreResult<Option<Invite>> {
        let (t, code) = (tenant.clone(), code.to_owned());
        self.on_snapshot(move |r, s| channels::invite_by_code(r, s, &t, &code))
            .await
    }

    async fn history_floors(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversations: Vec<ConversationId>,
    ) -> StoreResult<Vec<u64>> {
        let (t, u) = (tenant.clone(), user.clone());
        self.on_snapshot(move |r, s| {
            channels::history_floors(r, s, t.as_str(), u.as_str(), &conversations)
        })
        .await
    }

    async fn blocks(&self, tenant: &TenantId, user: &UserId) -> StoreResult<Vec<Block>> {
        let (t, u) = (tenant.clone(), user.clone());
        self.on_snapshot(move |r, s| safety::blocks(r, s, t.as_str(), u.as_str()))
            .await
    }

    async fn reports(
        &self,
        tenant: &TenantId,
        status: ReportStatus,
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<Report>> {
        let t = tenant.clone();
        self.on_snapshot(move |r, s| safety::reports(r, s, t.as_str(), status, before, limit))
            .await
    }

    async fn report(&self, tenant: &TenantId, id: MessageId) -> StoreResult<Option<Report>> {
        let t = tenant.clone();
        self.on_snapshot(move |r, s| safety::report(r, s, t.as_str(), id))
            .await
    }

    async fn open_reports(&self) -> StoreResult<Vec<(TenantId, u64)>> {
        self.on_snapshot(safety::open_reports).await
    }

    async fn expiring(&self, cursor: Option<String>, budget: usize) -> StoreResult<PolicyScan> {
        let from = match cursor {
            Some(c) => hex_decode(&c)
                .ok_or_else(|| StoreError::Corrupt(format!("bad expiry scan cursor {c:?}")))?,
            None => Vec::new(),
        };
        let (conversations, next) = self
            .on_snapshot(move |r, s| safety::expiring(r, s, from, budget.max(1)))
            .await?;
        Ok(PolicyScan {
            conversations,
            next: next.map(|k| hex_encode(&k)),
        })
    }

    async fn tenant_conversations(
        &self,
        tenant: &TenantId,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<ConversationScan> {
        let from = match cursor {
            Some(c) => hex_decode(&c).ok_or_else(|| {
                StoreError::Corrupt(format!("bad conversation scan cursor {c:?}"))
            })?,
            None => Vec::new(),
        };
        let t = tenant.clone();
        let (conversations, next) = self
            .on_snapshot(move |r, s| safety::tenant_conversations(r, s, &t, from, budget.max(1)))
            .await?;
        Ok(ConversationScan {
            conversations,
            next: next.map(|k| hex_encode(&k)),
        })
    }

    async fn due(
        &self,
        key: &ConversationKey,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<(Timestamp, u64)>> {
        let key = key.clone();
        self.on_snapshot(move |r, s| safety::due(r, s, &key, now, limit.max(1)))
            .await
    }

    async fn expired(
        &self,
        key: &ConversationKey,
        after_seq: u64,
        cutoff: Timestamp,
        limit: usize,
    ) -> StoreResult<ExpiredScan> {
        let key = key.clone();
        self.on_snapshot(move |r, s| safety::expired(r, s, &key, after_seq, cutoff, limit.max(1)))
            .await
    }

    async fn joined(
        &self,
        tenant: &TenantId,
        user: &UserId,
        after: Option<ConversationId>,
        limit: usize,
    ) -> StoreResult<Vec<ConversationId>> {
        let (t, u) = (tenant.clone(), user.clone());
        self.on_snapshot(move |r, s| {
            erasure::joined(r, s, t.as_str(), u.as_str(), after.as_ref(), limit)
        })
        .await
    }

    async fn naming(
        &self,
        key: &ConversationKey,
        user: &UserId,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<ExpiredScan> {
        let (key, user) = (key.clone(), user.clone());
        self.on_snapshot(move |r, s| erasure::naming(r, s, &key, &user, after_seq, limit.max(1)))
            .await
    }
}

/// A sweep or scan cursor is a key, carried as text.
fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance;
    use crate::embedded::keys::SCHEMA_VERSION;

    /// Opens the store at `config` again, once the previous one's commit
    /// thread has let go of the database.
    pub(super) async fn reopen(config: &EmbeddedConfig) -> EmbeddedStore {
        loop {
            match EmbeddedStore::open(config) {
                Ok(s) => break s,
                Err(StoreError::Corrupt(e)) => panic!("{e}"),
                // The commit thread holds the database until it stops.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
    }

    /// A fresh store in a temporary directory for each check.
    async fn subject() -> Option<conformance::Subject> {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&EmbeddedConfig::in_dir(dir.path())).unwrap();
        Some(conformance::Subject::new(Arc::new(store)).keeping(dir))
    }

    mod conformance_suite {
        crate::conformance_tests!(super::subject);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keeps_everything_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let config = EmbeddedConfig::in_dir(dir.path());
        {
            let store = EmbeddedStore::open(&config).unwrap();
            conformance::seed_conversation(&store, "t1", "c1", &["alice", "bob"], 3).await;
        }
        // The commit thread holds the database until its queue closes.
        let store = loop {
            match EmbeddedStore::open(&config) {
                Ok(s) => break s,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        };
        conformance::check_seeded_conversation(&store, "t1", "c1", 3).await;
    }

    /// A store of layout 1 (before v1.1) opens as layout 2, its data
    /// kept; a layout this release does not know is refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_version_1_store_is_upgraded_and_an_unknown_version_refused() {
        use fjall::Readable;
        let dir = tempfile::tempdir().unwrap();
        let config = EmbeddedConfig::in_dir(dir.path());
        let reopen = || async {
            loop {
                match EmbeddedStore::open(&config) {
                    Ok(s) => break Ok(s),
                    Err(StoreError::Corrupt(e)) => break Err(e),
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
                }
            }
        };
        let set_version = |store: &EmbeddedStore, v: &str| {
            store.spaces.meta.insert("schema_version", v).unwrap();
            store.db.persist(fjall::PersistMode::SyncAll).unwrap();
        };
        {
            let store = EmbeddedStore::open(&config).unwrap();
            conformance::seed_conversation(&store, "t1", "c1", &["alice", "bob"], 3).await;
            set_version(&store, "1");
        }
        let store = reopen().await.unwrap();
        let version = store
            .db
            .snapshot()
            .get(&store.spaces.meta, "schema_version");
        assert_eq!(version.unwrap().unwrap().as_ref(), SCHEMA_VERSION);
        conformance::check_seeded_conversation(&store, "t1", "c1", 3).await;
        set_version(&store, "99");
        drop(store);
        let refused = reopen().await.err().unwrap();
        assert!(refused.contains("99"), "{refused}");
    }

    /// A store from before speakers were recorded learns them from its
    /// idempotency keys when it opens, once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_speakers_are_recorded_when_the_store_opens() {
        use fjall::Readable;

        let dir = tempfile::tempdir().unwrap();
        let config = EmbeddedConfig::in_dir(dir.path());
        let (t, a, b) = (
            TenantId::new("t").unwrap(),
            UserId::new("a").unwrap(),
            UserId::new("b").unwrap(),
        );
        {
            let store = EmbeddedStore::open(&config).unwrap();
            store
                .commit(vec![conformance::create(
                    "t",
                    "d",
                    ConversationKind::Direct,
                    &["a", "b"],
                    1,
                )])
                .await
                .unwrap();
            store
                .commit(vec![Mutation::Append {
                    key: conformance::key("t", "d"),
                    expected_last_seq: 0,
                    messages: vec![conformance::text_message("d", 1, "b", "phone", "m1")],
                    inbox: false,
                }])
                .await
                .unwrap();
            assert_eq!(store.contacts(&t, &b).await.unwrap(), vec![a.clone()]);
            // As an older release left it: no speakers, no flag.
            let snap = store.db.snapshot();
            for g in snap.iter(&store.spaces.speakers) {
                let (k, _) = g.into_inner().unwrap();
                store.spaces.speakers.remove(k).unwrap();
            }
            store.spaces.meta.remove("speakers_recorded").unwrap();
            assert!(store.contacts(&t, &b).await.unwrap().is_empty());
        }
        let store = loop {
            match EmbeddedStore::open(&config) {
                Ok(s) => break s,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        };
        assert_eq!(store.contacts(&t, &b).await.unwrap(), vec![a]);
    }

    /// The rows a message and its edit leave, byte for byte: keys in hex,
    /// values as stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn messages_keep_their_stored_format() {
        use crate::golden;
        use fjall::Readable;
        use switchboard_protocol::Content;

        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&EmbeddedConfig::in_dir(dir.path())).unwrap();
        let (t, c) = (golden::TENANT, golden::CONVERSATION);
        let m = golden::message();
        let key = conformance::key(t, c);
        // The fixture's seq is 7: six messages come first.
        store
            .commit(vec![conformance::create(
                t,
                c,
                ConversationKind::Group,
                &["alice", "bob"],
                1,
            )])
            .await
            .unwrap();
        for seq in 1..m.seq {
            let mut earlier = conformance::text_message(c, seq, "bob", "d", &format!("e{seq}"));
            earlier.created_at = m.created_at;
            store
                .commit(vec![Mutation::Append {
                    key: key.clone(),
                    expected_last_seq: seq - 1,
                    messages: vec![earlier],
                    inbox: false,
                }])
                .await
                .unwrap();
        }
        store
            .commit(vec![
                Mutation::Append {
                    key: key.clone(),
                    expected_last_seq: m.seq - 1,
                    messages: vec![m.clone()],
                    inbox: false,
                },
                Mutation::Edit {
                    key,
                    seq: m.seq,
                    content: Content::Text {
                        text: "hello again".into(),
                    },
                    editor: m.sender_id.clone(),
                    at: Timestamp::from_unix_ms(1_780_000_000_500),
                    inbox: false,
                    custom: None,
                },
            ])
            .await
            .unwrap();
        let rows = |space: &fjall::Keyspace, seq: u64| {
            let snap = store.db.snapshot();
            let prefix = keys::Key::new().s(t).s(c).n(seq).bytes();
            snap.prefix(space, prefix)
                .map(|g| {
                    let (k, v) = g.into_inner().unwrap();
                    (hex_encode(&k), String::from_utf8(v.to_vec()).unwrap())
                })
                .collect::<Vec<_>>()
        };
        let mut edited: Message = serde_json::from_str(golden::MESSAGE_JSON).unwrap();
        edited.content = Some(Content::Text {
            text: "hello again".into(),
        });
        edited.edited_at = Some(Timestamp::from_unix_ms(1_780_000_000_500));
        assert_eq!(
            rows(&store.spaces.messages, 7),
            vec![(
                "61636d650067656e6572616c000000000000000007".to_owned(),
                serde_json::to_string(&edited).unwrap()
            )]
        );
        let versions = rows(&store.spaces.versions, 7);
        assert_eq!(versions.len(), 2);
        assert_eq!(
            versions[0],
            (
                "61636d650067656e6572616c0000000000000000070000000000000001".to_owned(),
                golden::VERSION_JSON.to_owned()
            )
        );
    }

    /// A media reference row per message (issue 26): tenant, blob,
    /// conversation, seq. Rows of the layout before it (no seq) are still
    /// references, and a delete leaves them: their blobs are kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn media_references_keep_their_stored_format() {
        use fjall::Readable;
        use switchboard_protocol::Content;

        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&EmbeddedConfig::in_dir(dir.path())).unwrap();
        let (t, c) = ("acme", "general");
        conformance::seed_conversation(&store, t, c, &["alice", "bob"], 1).await;
        let mut m = conformance::text_message(c, 2, "alice", "phone", "img");
        m.content = Some(Content::Image(switchboard_protocol::content::Media {
            blob_ref: "m1".into(),
            mime: "image/png".into(),
            size: 3,
            caption: None,
        }));
        store
            .commit(vec![Mutation::Append {
                key: conformance::key(t, c),
                expected_last_seq: 1,
                messages: vec![m],
                inbox: false,
            }])
            .await
            .unwrap();
        let refs = || {
            let snap = store.db.snapshot();
            snap.prefix(&store.spaces.media_refs, keys::Key::new().s(t).bytes())
                .map(|g| hex_encode(&g.into_inner().unwrap().0))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            refs(),
            vec!["61636d65006d310067656e6572616c000000000000000002".to_owned()]
        );
        // A row of the old layout, for a blob sent before the upgrade.
        let legacy = keys::Key::new().s(t).s("m0").s(c).bytes();
        store.spaces.media_refs.insert(legacy, []).unwrap();
        let tt = conformance::tenant(t);
        assert!(store.media_referenced(&tt, "m0").await.unwrap());
        assert!(
            store
                .media_readable(&tt, "m0", &conformance::user("bob"))
                .await
                .unwrap()
        );
        store
            .commit(vec![Mutation::Delete {
                key: conformance::key(t, c),
                seq: 2,
                at: Timestamp::from_unix_ms(1_780_000_000_900),
                inbox: false,
            }])
            .await
            .unwrap();
        assert_eq!(refs(), vec!["61636d65006d300067656e6572616c00".to_owned()]);
        assert!(!store.media_referenced(&tt, "m1").await.unwrap());
        assert!(store.media_referenced(&tt, "m0").await.unwrap());
    }

    #[test]
    fn sweep_cursors_round_trip_and_bad_ones_are_refused() {
        let key = vec![0, 1, 0x7f, 0xfe, 0xff];
        assert_eq!(hex_decode(&hex_encode(&key)), Some(key));
        for bad in ["abc", "zz", "é0"] {
            assert_eq!(hex_decode(bad), None, "{bad}");
        }
    }
}
