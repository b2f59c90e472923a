//! The embedded store: redb, a pure-Rust, crash-safe B-tree database in a
//! single file. Writes are group-committed by one writer thread
//! (`writer.rs`); reads run on tokio's blocking pool against a snapshot.
//!
//! redb allows one process per file, so the process that opens the store is
//! its only owner. Other processes reach it through the store service on
//! NATS (the backbone crate), which serves any `Store`.

mod apply;
mod codec;
mod read;
mod tables;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use redb::{Database, ReadableDatabase};
use switchboard_protocol::{ConversationId, DeviceId, Message, TenantId, Timestamp, UserId};
use tokio::sync::{mpsc, oneshot};

use self::apply::WriteOp;
use self::codec::storage;
use self::writer::Job;
use crate::{
    ConversationDetail, ConversationKey, ConversationSummary, HistoryQuery, Mutation, SentKey,
    SequencerState, Store, StoreError, StoreResult,
};

/// Settings of the embedded store.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    /// The database file.
    pub path: PathBuf,
    /// redb's page cache, in bytes.
    pub cache_bytes: usize,
    /// Writes waiting for the writer thread before callers wait too.
    pub queue_depth: usize,
}

impl EmbeddedConfig {
    /// Defaults for a database file inside `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            path: dir.join("switchboard.redb"),
            cache_bytes: 256 * 1024 * 1024,
            queue_depth: 16 * 1024,
        }
    }
}

/// The embedded [`Store`].
pub struct EmbeddedStore {
    db: Arc<Database>,
    writer: mpsc::Sender<Job>,
}

impl EmbeddedStore {
    /// Opens (or creates) the database file and starts the writer thread.
    /// Fails if another process holds the file.
    pub fn open(config: &EmbeddedConfig) -> StoreResult<Self> {
        if let Some(parent) = config.path.parent() {
            std::fs::create_dir_all(parent).map_err(storage)?;
        }
        let db = Database::builder()
            .set_cache_size(config.cache_bytes)
            .create(&config.path)
            .map_err(storage)?;
        read::init_schema(&db)?;
        let db = Arc::new(db);
        let writer = writer::spawn(db.clone(), config.queue_depth).map_err(storage)?;
        Ok(Self { db, writer })
    }

    async fn write(&self, op: WriteOp) -> StoreResult<()> {
        let (done, wait) = oneshot::channel();
        self.writer
            .send(Job { op, done })
            .await
            .map_err(|_| StoreError::Unavailable("store writer stopped".into()))?;
        wait.await
            .map_err(|_| StoreError::Unavailable("store writer stopped".into()))?
    }

    async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&redb::ReadTransaction) -> StoreResult<T> + Send + 'static,
    {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || {
            let txn = db.begin_read().map_err(storage)?;
            f(&txn)
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("store read task failed: {e}")))?
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn ping(&self) -> StoreResult<()> {
        self.read(read::ping).await
    }

    async fn commit(&self, mutations: Vec<Mutation>) -> StoreResult<()> {
        if mutations.is_empty() {
            return Ok(());
        }
        self.write(WriteOp::Commit(mutations)).await
    }

    async fn sequencer_states(
        &self,
        keys: Vec<ConversationKey>,
    ) -> StoreResult<Vec<Option<SequencerState>>> {
        self.read(move |txn| read::sequencer_states(txn, &keys))
            .await
    }

    async fn find_sent(&self, keys: Vec<SentKey>) -> StoreResult<Vec<Option<Message>>> {
        self.read(move |txn| read::find_sent(txn, &keys)).await
    }

    async fn conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<ConversationDetail> {
        let (t, c, r) = (tenant.clone(), conversation.clone(), reader.clone());
        self.read(move |txn| read::conversation(txn, &t, &c, &r))
            .await
    }

    async fn conversations_of(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> StoreResult<Vec<ConversationSummary>> {
        let (t, u) = (tenant.clone(), user.clone());
        self.read(move |txn| read::conversations_of(txn, &t, &u))
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
        self.read(move |txn| read::history(txn, &t, &c, &r, query))
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
        self.read(move |txn| read::replay(txn, &t, &c, &r, after_seq, limit))
            .await
    }

    async fn inbox(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        let (t, u, d) = (tenant.clone(), user.clone(), device.clone());
        self.read(move |txn| read::inbox(txn, &t, &u, &d, limit))
            .await
    }

    async fn ack_delivered(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        conversation: &ConversationId,
        seq: u64,
    ) -> StoreResult<()> {
        self.write(WriteOp::AckDelivered {
            tenant: tenant.clone(),
            user: user.clone(),
            device: device.clone(),
            conversation: conversation.clone(),
            seq,
        })
        .await
    }

    async fn register_device(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
    ) -> StoreResult<()> {
        let (t, u, d) = (tenant.clone(), user.clone(), device.clone());
        let known = self
            .read(move |txn| read::device_known(txn, &t, &u, &d))
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn passes_the_store_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&EmbeddedConfig::in_dir(dir.path())).unwrap();
        conformance::run_all(&store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keeps_everything_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let config = EmbeddedConfig::in_dir(dir.path());
        {
            let store = EmbeddedStore::open(&config).unwrap();
            conformance::seed_conversation(&store, "t1", "c1", &["alice", "bob"], 3).await;
        }
        // The writer thread holds the database until its queue closes.
        let store = loop {
            match EmbeddedStore::open(&config) {
                Ok(s) => break s,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        };
        conformance::check_seeded_conversation(&store, "t1", "c1", 3).await;
    }
}
