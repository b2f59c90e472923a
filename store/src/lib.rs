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
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod embedded;
pub mod erasure;
mod error;
#[cfg(any(test, feature = "conformance"))]
pub mod golden;
pub mod metrics;
pub mod mine;
pub mod roles;
pub mod rules;
mod types;

pub use error::{StoreError, StoreResult};
pub use types::*;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use switchboard_protocol::reports::{Report, ReportStatus};
use switchboard_protocol::safety::{Ban, Block};
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, MessageId, MessageVersion, TenantId,
    Timestamp, UserId,
};

/// A partition writer's right to commit, from
/// [`Store::claim_writer`](crate::Store::claim_writer): each claim of a
/// partition gets a higher `epoch`, and a backend whose writes are not
/// serialised by one process refuses a commit made under an older one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterClaim {
    pub partition: u16,
    pub epoch: u64,
}

/// One row of a sender's index ([`crate::Store::sent_by`]): the seq of a
/// message they sent, and the message when the backend holds it live
/// (`None`: archived, which [`crate::archive::Tiered`] reads; from
/// `Tiered`, `None` is a message gone since, skipped by a reader).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentBy {
    pub seq: u64,
    pub message: Option<Message>,
}

/// The store interface. All methods are cancel-safe in the sense that a
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

    /// The sequencer's view of each conversation (`None` if it does not exist).
    async fn sequencer_states(
        &self,
        keys: Vec<ConversationKey>,
    ) -> StoreResult<Vec<Option<SequencerState>>>;

    /// Messages already stored under each idempotency key.
    async fn find_sent(&self, keys: Vec<SentKey>) -> StoreResult<Vec<Option<Message>>>;

    /// Messages by id, as they are now (for the sequencer; no membership
    /// check).
    async fn find_messages(&self, keys: Vec<MessageKey>) -> StoreResult<Vec<Option<Message>>>;

    /// Every version of an edited message, the original first, for a member.
    /// Empty for a message never edited, or deleted.
    async fn versions(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        message_id: MessageId,
    ) -> StoreResult<Vec<MessageVersion>>;

    /// One conversation with all its members, for a member.
    async fn conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<ConversationDetail>;

    /// The conversation's kind and members, for a member (to address an
    /// ephemeral event such as typing).
    async fn members(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<(ConversationKind, Vec<UserId>)>;

    /// Whether `reader` is a member of a conversation with a message that
    /// references blob `blob_ref` (F13: who may download an upload).
    async fn media_readable(
        &self,
        tenant: &TenantId,
        blob_ref: &str,
        reader: &UserId,
    ) -> StoreResult<bool>;

    /// Whether any stored message references blob `blob_ref` (the blob
    /// collector keeps those).
    async fn media_referenced(&self, tenant: &TenantId, blob_ref: &str) -> StoreResult<bool>;

    /// Whom `user`'s presence concerns: the other members of `user`'s
    /// direct conversations that `user` opened or has sent in. Someone who
    /// merely opened a direct conversation with `user` is not among them
    /// until `user` answers.
    async fn contacts(&self, tenant: &TenantId, user: &UserId) -> StoreResult<Vec<UserId>>;

    /// What the sequencer needs to decide whether an add is unsolicited,
    /// for each query (see [`ConsentQuery`]).
    async fn consent(&self, queries: Vec<ConsentQuery>) -> StoreResult<Vec<Consent>>;

    /// Every conversation of `user` with its kind and member count (to find
    /// those that fan out on read).
    async fn memberships(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> StoreResult<Vec<(ConversationId, ConversationKind, usize)>>;

    /// One page of the conversations `user` is a member of, in
    /// [`list_order`] (most recent activity first): at most `query.limit`
    /// of them, after `query.after`.
    async fn conversation_page(
        &self,
        tenant: &TenantId,
        user: &UserId,
        query: ListQuery,
    ) -> StoreResult<Vec<ConversationSummary>>;

    /// History, newest first: messages with `after_seq < seq < before_seq`.
    async fn history(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        query: HistoryQuery,
    ) -> StoreResult<Vec<Message>>;

    /// Messages after `after_seq`, oldest first (replay of a conversation).
    async fn replay(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<Message>>;

    /// The device's undelivered messages across conversations, in `seq`
    /// order within each conversation (and conversations in a fixed
    /// order), from just after the entry `after` names when given.
    async fn inbox(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        after: Option<InboxCursor>,
        limit: usize,
    ) -> StoreResult<Vec<Message>>;

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

    /// The `seq` of each message id, also of messages whose rows are in the
    /// archive (no membership check).
    async fn message_seqs(&self, keys: Vec<MessageKey>) -> StoreResult<Vec<Option<u64>>>;

    /// One step of the scan for buckets to archive (F14): buckets of days
    /// before `before_day` that are not archived, at most `budget` bucket
    /// rows looked at from `cursor` (`None` starts at the beginning).
    async fn archive_candidates(
        &self,
        before_day: u32,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<ArchiveScan>;

    /// Part of one bucket that is not archived, for the archiver (no
    /// membership check): its whole seq range, and its messages with
    /// `seq > after_seq` (at most `limit`, oldest first) with their
    /// versions. `NotFound` when there is no such bucket, `Conflict` when
    /// it is archived already.
    async fn bucket_contents(
        &self,
        bucket: &BucketKey,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<BucketContents>;

    /// The archived buckets of a conversation that hold a `seq` with
    /// `after_seq < seq < before_seq`, newest first (no membership check:
    /// callers read the live rows first, which checks).
    async fn archived_buckets(
        &self,
        key: &ConversationKey,
        after_seq: u64,
        before_seq: u64,
    ) -> StoreResult<Vec<ArchivedBucket>>;

    /// The messages `sender` sent in a conversation (system messages they
    /// caused included), newest first, with `seq < before_seq`, at most
    /// `limit`: read from a per-sender index, so the cost follows the
    /// sender's own messages, not the conversation's (the export). Rows
    /// outlive archiving and go with the user's erasure. No membership
    /// check.
    async fn sent_by(
        &self,
        key: &ConversationKey,
        sender: &UserId,
        before_seq: Option<u64>,
        limit: usize,
    ) -> StoreResult<Vec<SentBy>>;

    /// The emoji `user` reacted with to each of the messages `seqs` of
    /// the conversation (v1.1), in order: what makes a reaction's `me`.
    /// No membership check (callers read the messages first, which
    /// checks).
    async fn user_reactions(
        &self,
        key: &ConversationKey,
        user: &UserId,
        seqs: Vec<u64>,
    ) -> StoreResult<Vec<Vec<String>>>;

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

    /// The threads of a conversation `reader` took part in, the most
    /// recent reply first, each with its root and the reader's unread
    /// replies (v1.1).
    async fn threads(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<Vec<ThreadEntry>>;

    /// The conversation's pins, newest first (v1.1). No membership check
    /// (the sequencer reads them; a gateway checks membership first).
    async fn pins(&self, key: &ConversationKey) -> StoreResult<Vec<PinRow>>;

    /// The conversation's bans, lifted ones gone and ended ones still
    /// among them, newest first (v1.2). No membership check (the
    /// sequencer reads them; a gateway checks the caller's role first).
    async fn bans(&self, key: &ConversationKey) -> StoreResult<Vec<Ban>>;

    /// The users `user` blocks, newest first (v1.2).
    async fn blocks(&self, tenant: &TenantId, user: &UserId) -> StoreResult<Vec<Block>>;

    /// A tenant's reports with `status`, newest first, those with an id
    /// below `before` (v1.2). No check: tenant admins read them.
    async fn reports(
        &self,
        tenant: &TenantId,
        status: ReportStatus,
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<Report>>;

    async fn report(&self, tenant: &TenantId, id: MessageId) -> StoreResult<Option<Report>>;

    /// How many reports are open, per tenant that has any.
    async fn open_reports(&self) -> StoreResult<Vec<(TenantId, u64)>>;

    /// One step of the scan for conversations with a retention or
    /// disappearing time (v1.2), from `cursor` (a step's `next`), looking
    /// at about `budget` rows.
    async fn expiring(&self, cursor: Option<String>, budget: usize) -> StoreResult<PolicyScan>;

    /// Messages of the conversation whose `expires_at` is at or before
    /// `now`, by that time, at most `limit` (v1.2): (`expires_at`, seq).
    async fn due(
        &self,
        key: &ConversationKey,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<(Timestamp, u64)>>;

    /// One step of the scan of a conversation's live messages after
    /// `after_seq`, in seq order, for those created at or before `cutoff`
    /// and not deleted, looking at no more than `limit` rows (v1.2).
    /// Archived buckets are not looked at.
    async fn expired(
        &self,
        key: &ConversationKey,
        after_seq: u64,
        cutoff: Timestamp,
        limit: usize,
    ) -> StoreResult<ExpiredScan>;

    /// The conversations `user` ever joined, in id order after `after`,
    /// at most `limit` (v1.2): those they left included, which is what
    /// an erasure visits.
    async fn joined(
        &self,
        tenant: &TenantId,
        user: &UserId,
        after: Option<ConversationId>,
        limit: usize,
    ) -> StoreResult<Vec<ConversationId>>;

    /// One step of an erasure's scan of a conversation's live messages,
    /// after `after_seq`, in seq order, looking at no more than `limit`
    /// rows: those that name `user` ([`erasure::Erasure::names`]) or
    /// carry their reaction. Archived buckets are not looked at.
    async fn naming(
        &self,
        key: &ConversationKey,
        user: &UserId,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<ExpiredScan>;

    /// Records that the device exists, so later messages get inbox entries for it.
    async fn register_device(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
    ) -> StoreResult<()>;
}
