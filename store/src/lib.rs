//! The message store: the durable history of every conversation.
//!
//! [`Store`] is the one interface the rest of Switchboard uses. It is shaped
//! for a wide-column database (ScyllaDB): every read names its partition
//! (tenant and conversation, or tenant, user and device for an inbox),
//! history is read newest first by `seq`, and messages carry the time
//! bucket (UTC day) that bounds a partition's size. The embedded backend
//! ([`embedded::EmbeddedStore`], fjall) is the single-machine default; the
//! `switchboard-store-scylla` crate is the ScyllaDB backend; old buckets can
//! move to an object store and be read back ([`archive`]).
//!
//! What the store guarantees, whatever the backend:
//! - A successful [`Store::commit`] is durable (fsynced, or at the configured
//!   consistency level) before it returns: the gateway acks a message only
//!   after this.
//! - [`Mutation::Append`] states the `last_seq` it expects; an append that
//!   does not continue the conversation's `seq` without a gap is refused
//!   with [`StoreError::Conflict`], so a stale writer can never overwrite or
//!   skip a `seq`.
//! - Every read that names a conversation checks that the reader is a member.
//!
//! This crate knows nothing of NATS, HTTP or WebSockets.

pub mod archive;
#[macro_use]
mod args;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod embedded;
pub mod erasure;
mod error;
#[cfg(any(test, feature = "conformance"))]
pub mod golden;
pub mod metrics;
pub mod mine;
mod mutation;
pub mod reads;
pub mod roles;
pub mod rules;
mod settings;
mod typed;
mod types;

pub use error::{StoreError, StoreResult};
pub use mutation::Mutation;
pub use reads::{Answer, Read, Reads};
pub use settings::{ConversationSettings, Listing};
pub use types::*;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use switchboard_protocol::{ConversationId, DeviceId, MessageId, TenantId, Timestamp, UserId};

/// A partition writer's right to commit, from
/// [`Store::claim_writer`](crate::Store::claim_writer): each claim of a
/// partition gets a higher `epoch`, and a backend whose writes are not
/// serialised by one process refuses a commit made under an older one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterClaim {
    pub partition: u16,
    pub epoch: u64,
}

/// The store interface: the commits, the writes a gateway makes (marks
/// and devices), the inbox sweep, and one [`Store::read`] for every read
/// of [`reads`]. All methods are cancel-safe in the sense that a
/// dropped future leaves the store consistent (a commit either happened
/// completely or not at all).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Succeeds when the store can serve reads and writes.
    async fn ping(&self) -> StoreResult<()>;

    /// Applies all mutations atomically and durably, in order. On error
    /// nothing was applied, with one exception: a backend without
    /// transactions (Scylla) may answer `Unavailable` for a commit that
    /// still lands (a timed-out logged batch is replayed). A retried append
    /// then finds its `expected_last_seq` stale (`Conflict`), so the writer
    /// reloads instead of writing twice.
    async fn commit(&self, mutations: Vec<Mutation>) -> StoreResult<()>;

    /// Makes the caller the writer of `partition`: every later
    /// [`Store::commit_as`] under an earlier claim is refused with
    /// [`StoreError::Fenced`], and a commit an earlier writer had decided
    /// but not finished writing is finished first. A writer claims once,
    /// when it starts and before it reads the partition's conversations.
    /// A backend whose commits go through one process (the embedded
    /// store, and the store service in front of it) needs no claim: the
    /// `expected_last_seq` of every append, checked with the write,
    /// already fences a stale writer.
    async fn claim_writer(&self, partition: u16) -> StoreResult<WriterClaim> {
        Ok(WriterClaim {
            partition,
            epoch: 0,
        })
    }

    /// [`Store::commit`], by the writer holding `claim`: refused with
    /// [`StoreError::Fenced`] once the partition was claimed again.
    async fn commit_as(&self, claim: WriterClaim, mutations: Vec<Mutation>) -> StoreResult<()> {
        let _ = claim;
        self.commit(mutations).await
    }

    /// Answers one read ([`reads`]): callers use the typed methods
    /// `dyn Store` has for each (`store.history(…)`), made from the list
    /// there. A wrapper passes on every read it does not change.
    async fn read(&self, read: Read) -> StoreResult<Answer>;

    /// The device has everything in `conversation` up to `seq`: its inbox
    /// entries up to there go, its delivered mark and the user's move
    /// forward (never back, never past the last message).
    async fn ack_delivered(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        conversation: &ConversationId,
        seq: u64,
    ) -> StoreResult<MarkChange>;

    /// The user has read everything in `conversation` up to `seq`: the read
    /// mark moves forward, and the delivered mark with it (what was read
    /// was delivered).
    async fn ack_read(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversation: &ConversationId,
        seq: u64,
    ) -> StoreResult<MarkChange>;

    /// One step of the inbox expiry sweep: removes the entries written
    /// before `before` among at most `budget` entries from `cursor` (`None`
    /// starts at the beginning). A device that stays away longer than the
    /// inbox lifetime catches up from history instead. A backend whose
    /// rows expire by themselves (a TTL) removes nothing and returns
    /// `next: None`.
    async fn expire_inbox(
        &self,
        before: Timestamp,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<InboxSweep>;

    /// The user read the thread of message `root` up to `seq` (v1.1): their
    /// read mark there moves forward, if they take part in the thread.
    async fn ack_thread_read(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversation: &ConversationId,
        root: MessageId,
        seq: u64,
    ) -> StoreResult<()>;

    /// Records that the device exists, so later messages get inbox entries for it.
    async fn register_device(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
    ) -> StoreResult<()>;
}
