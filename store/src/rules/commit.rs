//! The backend's side of the rules: the [`Commit`] trait each backend
//! implements (the reads the rules need and the row writes they make) and
//! the plain types it speaks in. Imports neither the rules nor their
//! submodules, so both can use it.

use switchboard_protocol::channels::Invite;
use switchboard_protocol::reports::Report;
use switchboard_protocol::safety::Ban;
use switchboard_protocol::{
    ConversationKind, Message, MessageId, MessageVersion, TenantId, Timestamp,
};

use crate::erasure::Erasure;

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

/// One row change a commit makes: the rules compose them, the backend
/// writes each in its own layout. A put and its removal are one kind
/// (an `Option` or `present` says which), so a backend writes a row kind
/// in one place. Ids are passed as `&str` where the rows store them as
/// text.
#[derive(Debug, Clone, Copy)]
pub enum Write<'a> {
    /// A new conversation row, with no members yet.
    Conversation { record: &'a ConversationRecord },
    /// A new member with marks at 0, listed among the user's
    /// conversations (`joined`), or (`None`) the member gone: the member
    /// row, the marks, the member's state, the record that the user spoke
    /// there ([`Write::Speaker`]) and the user's listing of the
    /// conversation.
    Member {
        c: &'a ConversationKey,
        user: &'a str,
        joined: Option<Timestamp>,
    },
    /// A member's v1.1 state; the default removes its row.
    MemberState {
        c: &'a ConversationKey,
        user: &'a str,
        state: &'a MemberState,
    },
    /// `user` reacted to message `seq` with `emoji` at `at`, or (`None`)
    /// no more (v1.1).
    Reaction {
        c: &'a ConversationKey,
        seq: u64,
        user: &'a str,
        emoji: &'a str,
        at: Option<Timestamp>,
    },
    /// Every reaction row of message `seq` goes (it was deleted).
    MessageReactionsGone { c: &'a ConversationKey, seq: u64 },
    /// Every reaction row of `user` in the conversation goes, those on
    /// archived messages included (erasure).
    ReactionsOfGone {
        c: &'a ConversationKey,
        user: &'a str,
    },
    /// The pin of `message_id`, or (`None`) none (v1.1).
    Pin {
        c: &'a ConversationKey,
        message_id: MessageId,
        pin: Option<&'a PinRow>,
    },
    /// Lists reply `seq` in the thread of `root_seq` (v1.1).
    ThreadReply {
        c: &'a ConversationKey,
        root_seq: u64,
        seq: u64,
    },
    /// `user`'s read mark in the thread (the rules only raise it); `user`
    /// takes part in the thread from then on.
    ThreadMark {
        c: &'a ConversationKey,
        user: &'a str,
        root_seq: u64,
        seq: u64,
    },
    /// Message `seq` mentions `user` (or all), or no more (it was
    /// deleted).
    Mention {
        c: &'a ConversationKey,
        user: &'a str,
        seq: u64,
        present: bool,
    },
    /// Every message `user` sent in the conversation, archived ones
    /// included, counts toward nobody's unread count (erasure: the live
    /// ones are tombstones by now, which count no more either).
    UncountedOf {
        c: &'a ConversationKey,
        user: &'a str,
    },
    /// Message `seq` does not count toward unread counts (issue 43): a
    /// system message or thread reply, or one deleted, expired or erased.
    Uncounted { c: &'a ConversationKey, seq: u64 },
    /// Member `user` has sent in the conversation (a message or a
    /// membership change): whom they have spoken to, which consent and
    /// presence follow. Writing it again changes nothing.
    Speaker {
        c: &'a ConversationKey,
        user: &'a str,
    },
    /// `actor` put `user` into `c` at `at` unsolicited. A backend may
    /// forget records older than a day.
    Unsolicited {
        c: &'a ConversationKey,
        user: &'a str,
        actor: &'a str,
        at: Timestamp,
    },
    /// A message row, placed as `placement` says.
    Message {
        c: &'a ConversationKey,
        m: &'a Message,
        placement: Placement,
    },
    /// The idempotency key and the message-id index of a new message
    /// (written by [`Write::Message`] before).
    Sent {
        c: &'a ConversationKey,
        m: &'a Message,
    },
    /// The idempotency key `(sender, client_msg_id)` goes (erasure).
    SentGone {
        c: &'a ConversationKey,
        sender: &'a str,
        client_msg_id: &'a str,
    },
    /// A stored version of message `seq`.
    Version {
        c: &'a ConversationKey,
        seq: u64,
        v: &'a MessageVersion,
    },
    /// Every stored version of message `seq` goes.
    VersionsGone { c: &'a ConversationKey, seq: u64 },
    /// Message `seq` of `c` references `blob_ref` (members of `c` may
    /// download it, the blob collector keeps it), or no more (it was
    /// deleted: once no message does, the blob collector removes it).
    MediaRef {
        c: &'a ConversationKey,
        seq: u64,
        blob_ref: &'a str,
        present: bool,
    },
    /// An inbox entry valued with when it was written (for expiry).
    Inbox {
        c: &'a ConversationKey,
        user: &'a str,
        device: &'a str,
        seq: u64,
        at: Timestamp,
    },
    /// Inbox entries of one device go.
    InboxGone {
        c: &'a ConversationKey,
        user: &'a str,
        device: &'a str,
        which: InboxEntries,
    },
    /// Moves the given marks up to the given seqs (never down).
    Marks {
        c: &'a ConversationKey,
        user: &'a str,
        delivered: Option<u64>,
        read: Option<u64>,
    },
    /// A device's delivery cursor.
    Cursor {
        c: &'a ConversationKey,
        user: &'a str,
        device: &'a str,
        seq: u64,
    },
    /// The conversation now ends with `last` (its seq, time and preview).
    Position {
        c: &'a ConversationKey,
        last: &'a Message,
    },
    /// The conversation's settings: its policy (v1.2) and custom fields
    /// (v1.3); the default removes the row.
    Policy {
        c: &'a ConversationKey,
        settings: &'a crate::ConversationSettings,
    },
    /// The conversation's row in its tenant's directory of public
    /// channels, or (`None`) none (v1.3).
    Listing {
        c: &'a ConversationKey,
        listing: Option<&'a crate::Listing>,
    },
    /// Invite `code` of the conversation as it is now, findable by its
    /// code, or (`None`) revoked (v1.3).
    Invite {
        c: &'a ConversationKey,
        code: &'a str,
        invite: Option<&'a Invite>,
    },
    /// `user`'s ban row (v1.2), replacing their earlier one, or (`None`)
    /// none.
    Ban {
        c: &'a ConversationKey,
        user: &'a str,
        ban: Option<&'a Ban>,
    },
    /// `user` blocks `target` since `at`, or (`None`) does not (v1.2).
    Block {
        tenant: &'a TenantId,
        user: &'a str,
        target: &'a str,
        at: Option<Timestamp>,
    },
    /// Message `seq` expires at `at`: listed in (or, `present` false,
    /// taken out of) the conversation's expiry index (v1.2).
    Expiry {
        c: &'a ConversationKey,
        at: Timestamp,
        seq: u64,
        present: bool,
    },
    /// A user's profile row as it is now (v1.3).
    Profile {
        tenant: &'a TenantId,
        profile: &'a switchboard_protocol::profile::Profile,
    },
    /// A report row as it is now (v1.2), listed among the open ones or
    /// not.
    Report {
        tenant: &'a TenantId,
        report: &'a Report,
    },
    /// The conversation's creator, if it is the erased user, becomes the
    /// pseudonym.
    AnonymisedCreator {
        c: &'a ConversationKey,
        e: Erasure<'a>,
    },
    /// The conversation leaves the user's list of conversations they ever
    /// joined (erasure: it is done there).
    JoinedGone {
        c: &'a ConversationKey,
        user: &'a str,
    },
    /// Every row kept under the user (erasure): their devices with their
    /// cursors and inbox entries, their blocks and everyone's blocks of
    /// them, their thread marks, mentions and unsolicited adds, the list
    /// of conversations they joined, and their profile.
    UserRowsGone { tenant: &'a TenantId, user: &'a str },
    /// The bucket's rows replaced by the archive `object`: every message
    /// row in `span` but `newest` goes with its versions and idempotency
    /// key, and the bucket is marked archived.
    Archived {
        b: &'a BucketKey,
        span: &'a BucketSpan,
        newest: u64,
        object: &'a str,
    },
}

impl Write<'_> {
    /// Whether a row given whole names the key given beside it (a pin's
    /// message, a ban's user): a backend keys the put by one and the
    /// removal by the other, so they must agree. Backends assert it.
    pub fn keys_agree(&self) -> bool {
        match self {
            Write::Pin {
                message_id,
                pin: Some(pin),
                ..
            } => pin.message_id == *message_id,
            Write::Ban {
                user,
                ban: Some(ban),
                ..
            } => ban.user_id.as_str() == *user,
            Write::Invite {
                c,
                code,
                invite: Some(invite),
            } => invite.code == *code && invite.conversation_id == c.conversation_id,
            _ => true,
        }
    }
}

/// One commit in progress, as a backend provides it: the reads the rules
/// need, and [`Commit::write`] for every row change.
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
    /// The title of an existing conversation (v1.3: its directory row).
    async fn title(&mut self, c: &ConversationKey) -> StoreResult<Option<String>>;
    /// The conversation's invites (v1.3), in no particular order.
    async fn invites(&mut self, c: &ConversationKey) -> StoreResult<Vec<Invite>>;
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

    /// The unsolicited adds of `user` recorded since `since`, those of
    /// this commit included.
    async fn unsolicited_since(
        &mut self,
        tenant: &TenantId,
        user: &str,
        since: Timestamp,
    ) -> StoreResult<u32>;
    /// The conversation's bans (v1.2).
    async fn bans(
        &mut self,
        c: &ConversationKey,
    ) -> StoreResult<Vec<switchboard_protocol::safety::Ban>>;

    /// Makes one row change (see [`Write`]).
    async fn write(&mut self, write: Write<'_>) -> StoreResult<()>;
}

pub(super) fn conflict(why: impl Into<String>) -> StoreError {
    StoreError::Conflict(why.into())
}
