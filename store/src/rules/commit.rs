//! The backend's side of the rules: the [`Commit`] trait each backend
//! implements (the reads the rules need and the row writes they make) and
//! the plain types it speaks in. Imports neither the rules nor their
//! submodules, so both can use it.

use switchboard_protocol::{
    ConversationKind, Message, MessageId, MessageVersion, TenantId, Timestamp,
};

use crate::{
    BucketKey, ConversationKey, ConversationRecord, MemberState, PinRow, StoreError, StoreResult,
};

/// What a message row write is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A message appended now: it opens a day bucket when its day is new.
    New,
    /// A stored message edited or deleted: it stays where it is.
    Changed,
    /// A message brought back from an archive object into its bucket.
    Restored,
}

/// Which inbox entries of one device in one conversation to remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxEntries {
    /// The entry of one seq.
    One(u64),
    /// Every entry with `from <= seq <= to`.
    Through { from: u64, to: u64 },
    /// Every entry of the conversation.
    All,
}

/// A day bucket as a commit sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketSpan {
    pub first: u64,
    /// The next bucket's first seq minus one, or the conversation's last.
    pub last: u64,
    pub archived: bool,
}

/// A user's read marks in a conversation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    pub delivered: u64,
    pub read: u64,
}

/// The reads a mark (`ack_delivered`, `ack_read`) needs, which a backend
/// may make together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkReads {
    /// `None` when the conversation does not exist.
    pub last_seq: Option<u64>,
    /// `None` when the user is not a member.
    pub marks: Option<Marks>,
    /// The device's delivery cursor (0 when no device was named or none
    /// is stored).
    pub cursor: u64,
}

/// One commit in progress, as a backend provides it.
///
/// Reads see the committed rows overlaid with every write this commit made
/// so far (a create then an append, an append then its edit). Writes take
/// effect when the backend commits; until then they only change what later
/// reads of the same commit see. Ids are passed as `&str` where the rows
/// store them as text.
// Used through generics only (never as `dyn`), so the futures' `Send`-ness
// is that of each backend's concrete ones.
#[allow(async_fn_in_trait)]
pub trait Commit {
    /// The conversation's last seq, or `None` if it does not exist.
    async fn last_seq(&mut self, c: &ConversationKey) -> StoreResult<Option<u64>>;
    /// The kind of an existing conversation.
    async fn kind(&mut self, c: &ConversationKey) -> StoreResult<ConversationKind>;
    /// Every member's user id.
    async fn members(&mut self, c: &ConversationKey) -> StoreResult<Vec<String>>;
    /// How many members the conversation has (the embedded store counts
    /// its cached list; Scylla reads the members as `members` does).
    async fn member_count(&mut self, c: &ConversationKey) -> StoreResult<usize>;
    async fn is_member(&mut self, c: &ConversationKey, user: &str) -> StoreResult<bool>;
    async fn devices(&mut self, tenant: &TenantId, user: &str) -> StoreResult<Vec<String>>;
    /// Every member with their devices.
    async fn recipients(&mut self, c: &ConversationKey) -> StoreResult<Vec<(String, Vec<String>)>>;
    /// Whether each idempotency key (sender, client_msg_id) is stored.
    async fn sent_exists(
        &mut self,
        c: &ConversationKey,
        keys: &[(&str, &str)],
    ) -> StoreResult<Vec<bool>>;
    /// The live (not archived) message `seq`.
    async fn message(&mut self, c: &ConversationKey, seq: u64) -> StoreResult<Option<Message>>;
    /// The stored versions of message `seq`, oldest first.
    async fn versions(&mut self, c: &ConversationKey, seq: u64)
    -> StoreResult<Vec<MessageVersion>>;
    async fn bucket(&mut self, b: &BucketKey) -> StoreResult<Option<BucketSpan>>;
    /// Whether this commit wrote message rows of the conversation.
    fn touched(&self, c: &ConversationKey) -> bool;
    /// Whether this commit archived a bucket of the conversation: the
    /// rows it removed may still show to reads until it lands.
    fn archived_here(&self, c: &ConversationKey) -> bool;
    async fn ack_reads(
        &mut self,
        c: &ConversationKey,
        user: &str,
        device: Option<&str>,
    ) -> StoreResult<MarkReads>;

    /// A member's v1.1 state: given role and own settings (the default
    /// when none is stored).
    async fn member_state(&mut self, c: &ConversationKey, user: &str) -> StoreResult<MemberState>;

    /// The emoji `user` reacted to message `seq` with (v1.1).
    async fn reactions_of(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        user: &str,
    ) -> StoreResult<Vec<String>>;
    /// The conversation's pins (v1.1), in no particular order.
    async fn pins(&mut self, c: &ConversationKey) -> StoreResult<Vec<PinRow>>;
    /// `user`'s read mark in the thread of `root_seq`, if they take part
    /// in it (v1.1).
    async fn thread_mark(
        &mut self,
        c: &ConversationKey,
        user: &str,
        root_seq: u64,
    ) -> StoreResult<Option<u64>>;

    /// A new conversation row, with no members yet.
    async fn insert_conversation(&mut self, record: &ConversationRecord) -> StoreResult<()>;
    /// A new member with marks at 0, listed among the user's conversations.
    async fn insert_member(
        &mut self,
        c: &ConversationKey,
        user: &str,
        at: Timestamp,
    ) -> StoreResult<()>;
    /// The member row, the marks, the member's state, the record that the
    /// user spoke there (`insert_speaker`) and the user's listing of the
    /// conversation.
    async fn remove_member(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()>;
    /// Writes a member's v1.1 state; the default removes its row.
    async fn put_member_state(
        &mut self,
        c: &ConversationKey,
        user: &str,
        state: &MemberState,
    ) -> StoreResult<()>;
    async fn insert_reaction(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        user: &str,
        emoji: &str,
        at: Timestamp,
    ) -> StoreResult<()>;
    async fn remove_reaction(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        user: &str,
        emoji: &str,
    ) -> StoreResult<()>;
    /// Every reaction row of message `seq` (it was deleted).
    async fn remove_reactions(&mut self, c: &ConversationKey, seq: u64) -> StoreResult<()>;
    async fn insert_pin(&mut self, c: &ConversationKey, pin: &PinRow) -> StoreResult<()>;
    /// Lists reply `seq` in the thread of `root_seq`.
    async fn insert_thread_reply(
        &mut self,
        c: &ConversationKey,
        root_seq: u64,
        seq: u64,
    ) -> StoreResult<()>;
    /// Sets `user`'s read mark in the thread (the rules only raise it);
    /// `user` takes part in the thread from then on.
    async fn set_thread_mark(
        &mut self,
        c: &ConversationKey,
        user: &str,
        root_seq: u64,
        seq: u64,
    ) -> StoreResult<()>;
    /// Message `seq` mentions `user` (or all).
    async fn insert_mention(
        &mut self,
        c: &ConversationKey,
        user: &str,
        seq: u64,
    ) -> StoreResult<()>;
    /// Message `seq` mentions `user` no more (it was deleted).
    async fn remove_mention(
        &mut self,
        c: &ConversationKey,
        user: &str,
        seq: u64,
    ) -> StoreResult<()>;
    async fn remove_pin(&mut self, c: &ConversationKey, message_id: MessageId) -> StoreResult<()>;
    /// Records that member `user` has sent in the conversation (a message
    /// or a membership change): whom they have spoken to, which consent
    /// and presence follow. Writing it again changes nothing.
    async fn insert_speaker(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()>;
    /// The unsolicited adds of `user` recorded since `since`, those of
    /// this commit included.
    async fn unsolicited_since(
        &mut self,
        tenant: &TenantId,
        user: &str,
        since: Timestamp,
    ) -> StoreResult<u32>;
    /// Records that `actor` put `user` into `c` at `at` unsolicited. A
    /// backend may forget records older than a day.
    async fn insert_unsolicited(
        &mut self,
        c: &ConversationKey,
        user: &str,
        actor: &str,
        at: Timestamp,
    ) -> StoreResult<()>;
    async fn put_message(
        &mut self,
        c: &ConversationKey,
        m: &Message,
        placement: Placement,
    ) -> StoreResult<()>;
    /// The idempotency key and the message-id index of a new message
    /// (written by `put_message` before).
    async fn insert_sent(&mut self, c: &ConversationKey, m: &Message) -> StoreResult<()>;
    async fn put_version(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        v: &MessageVersion,
    ) -> StoreResult<()>;
    async fn remove_versions(&mut self, c: &ConversationKey, seq: u64) -> StoreResult<()>;
    /// Message `seq` of `c` references `blob_ref`: members of `c` may
    /// download it, and the blob collector keeps it.
    async fn reference_media(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        blob_ref: &str,
    ) -> StoreResult<()>;
    /// Message `seq` of `c` references `blob_ref` no more (it was
    /// deleted): once no message does, the blob collector removes it.
    async fn unreference_media(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        blob_ref: &str,
    ) -> StoreResult<()>;
    /// An inbox entry valued with when it was written (for expiry).
    async fn insert_inbox(
        &mut self,
        c: &ConversationKey,
        user: &str,
        device: &str,
        seq: u64,
        at: Timestamp,
    ) -> StoreResult<()>;
    async fn remove_inbox(
        &mut self,
        c: &ConversationKey,
        user: &str,
        device: &str,
        which: InboxEntries,
    ) -> StoreResult<()>;
    /// Moves the given marks up to the given seqs (never down).
    async fn raise_marks(
        &mut self,
        c: &ConversationKey,
        user: &str,
        delivered: Option<u64>,
        read: Option<u64>,
    ) -> StoreResult<()>;
    async fn set_cursor(
        &mut self,
        c: &ConversationKey,
        user: &str,
        device: &str,
        seq: u64,
    ) -> StoreResult<()>;
    /// The conversation now ends with `last` (its seq, time and preview).
    async fn set_position(&mut self, c: &ConversationKey, last: &Message) -> StoreResult<()>;
    /// The conversation's policy (v1.2); the default removes it.
    async fn put_policy(
        &mut self,
        c: &ConversationKey,
        policy: &switchboard_protocol::safety::ConversationPolicy,
    ) -> StoreResult<()>;
    /// A ban row (v1.2), replacing the user's earlier one.
    async fn put_ban(
        &mut self,
        c: &ConversationKey,
        ban: &switchboard_protocol::safety::Ban,
    ) -> StoreResult<()>;
    async fn remove_ban(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()>;
    /// `user` blocks `target` since `at`, or (`None`) does not (v1.2).
    async fn put_block(
        &mut self,
        tenant: &TenantId,
        user: &str,
        target: &str,
        at: Option<Timestamp>,
    ) -> StoreResult<()>;
    /// Message `seq` expires at `at`: listed in (or, `present` false,
    /// taken out of) the conversation's expiry index (v1.2).
    async fn set_expiry(
        &mut self,
        c: &ConversationKey,
        at: Timestamp,
        seq: u64,
        present: bool,
    ) -> StoreResult<()>;
    /// A report row as it is now (v1.2), listed among the open ones or not.
    async fn put_report(
        &mut self,
        tenant: &TenantId,
        report: &switchboard_protocol::reports::Report,
    ) -> StoreResult<()>;
    /// The idempotency key `(sender, client_msg_id)` goes (erasure).
    async fn remove_sent(
        &mut self,
        c: &ConversationKey,
        sender: &str,
        client_msg_id: &str,
    ) -> StoreResult<()>;
    /// The conversation's bans (v1.2).
    async fn bans(
        &mut self,
        c: &ConversationKey,
    ) -> StoreResult<Vec<switchboard_protocol::safety::Ban>>;
    /// The conversation's creator, if it is the erased user, becomes the
    /// pseudonym.
    async fn anonymise_creator(
        &mut self,
        c: &ConversationKey,
        e: crate::erasure::Erasure<'_>,
    ) -> StoreResult<()>;
    /// Every reaction row of `user` in the conversation, those on
    /// archived messages included (erasure).
    async fn remove_reactions_of(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()>;
    /// The conversation leaves the user's list of conversations they ever
    /// joined (erasure: it is done there).
    async fn remove_joined(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()>;
    /// Every row kept under the user (erasure): their devices with their
    /// cursors and inbox entries, their blocks and everyone's blocks of
    /// them, their thread marks, mentions and unsolicited adds, and the
    /// list of conversations they joined.
    async fn erase_user_rows(&mut self, tenant: &TenantId, user: &str) -> StoreResult<()>;
    /// Replaces the bucket's rows by the archive `object`: every message
    /// row in `span` but `newest` goes with its versions and idempotency
    /// key, and the bucket is marked archived.
    async fn archive_rows(
        &mut self,
        b: &BucketKey,
        span: &BucketSpan,
        newest: u64,
        object: &str,
    ) -> StoreResult<()>;
}

pub(super) fn conflict(why: impl Into<String>) -> StoreError {
    StoreError::Conflict(why.into())
}
