//! Records and mutations of the store interface.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use switchboard_protocol::channels::ChannelSettings;
use switchboard_protocol::safety::ConversationPolicy;
use switchboard_protocol::{
    ClientMsgId, ConversationId, ConversationKind, MemberSettings, Message, MessageId,
    MessageVersion, Role, TenantId, Timestamp, UserId,
};

/// Identifies one conversation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ConversationKey {
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
}

impl ConversationKey {
    pub fn new(tenant: TenantId, conversation_id: ConversationId) -> Self {
        Self {
            tenant,
            conversation_id,
        }
    }
}

/// Identifies one message by its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MessageKey {
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
}

/// Identifies one send for idempotency: (conversation, sender, `client_msg_id`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SentKey {
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub sender: UserId,
    pub client_msg_id: ClientMsgId,
}

/// A conversation's metadata row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationRecord {
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub kind: ConversationKind,
    pub title: Option<String>,
    pub created_at: Timestamp,
    pub created_by: UserId,
    /// The highest `seq` stored; 0 when there are no messages.
    pub last_seq: u64,
    pub last_message: Option<Message>,
    /// When the last message was stored (or the conversation created).
    pub last_activity: Timestamp,
    /// Slow mode, retention and disappearing messages (v1.2).
    #[serde(default, skip_serializing_if = "ConversationPolicy::is_default")]
    pub policy: ConversationPolicy,
    /// The conversation's own fields (v1.3).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub custom: serde_json::Map<String, serde_json::Value>,
    /// Visibility, posting, topic, history for newcomers (v1.3).
    #[serde(default, skip_serializing_if = "ChannelSettings::is_default")]
    pub channel: ChannelSettings,
    /// The members muted here (v1.3), ended mutes included until lifted:
    /// for owners and admins (`GET .../mutes`), never in the view.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mutes: Vec<switchboard_protocol::moderation::Mute>,
}

impl ConversationRecord {
    pub fn key(&self) -> ConversationKey {
        ConversationKey::new(self.tenant.clone(), self.conversation_id.clone())
    }

    /// The record with its settings row's values.
    pub fn with_settings(mut self, settings: crate::ConversationSettings) -> Self {
        self.policy = settings.policy;
        self.custom = settings.custom;
        self.channel = settings.channel;
        self.mutes = settings.mutes;
        self
    }
}

/// A member of a conversation with their high-water marks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    pub user_id: UserId,
    pub joined_at: Timestamp,
    /// Highest `seq` any of the user's devices has acknowledged.
    pub delivered_seq: u64,
    /// Highest `seq` the user has read (their own sends count as read).
    pub read_seq: u64,
    /// The member's role as it stands (`roles::effective`: given, or by
    /// default), and their own settings (v1.1).
    #[serde(default)]
    pub role: Role,
    #[serde(default)]
    pub settings: MemberSettings,
}

/// What a member's row of v1.1 state holds: the role given to them (none:
/// the default of `roles::effective`) and their own settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default)]
    pub settings: MemberSettings,
    /// The first seq the member reads (v1.3: they joined a conversation
    /// whose earlier history is not for newcomers); `None`: all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_from: Option<u64>,
}

impl MemberState {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// A pinned message as stored (v1.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinRow {
    pub message_id: MessageId,
    pub by: UserId,
    pub at: Timestamp,
}

/// What the single writer of a conversation needs to sequence it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequencerState {
    pub kind: ConversationKind,
    /// The title (v1.3: an invite's preview shows it).
    #[serde(default)]
    pub title: Option<String>,
    pub created_by: UserId,
    pub last_seq: u64,
    pub members: BTreeSet<UserId>,
    /// Every member's role as it stands (`roles::effective`).
    #[serde(default)]
    pub roles: BTreeMap<UserId, Role>,
    /// The members whose state is not the default: given roles, and
    /// settings (which decide their pushes).
    #[serde(default)]
    pub states: BTreeMap<UserId, MemberState>,
    /// Slow mode, retention and disappearing messages (v1.2).
    #[serde(default)]
    pub policy: ConversationPolicy,
    /// The conversation's own fields (v1.3).
    #[serde(default)]
    pub custom: serde_json::Map<String, serde_json::Value>,
    /// Visibility, posting, topic, history for newcomers (v1.3).
    #[serde(default)]
    pub channel: ChannelSettings,
    /// In a direct conversation, the members who block the other one
    /// (v1.2); empty elsewhere.
    #[serde(default)]
    pub blocked_by: BTreeSet<UserId>,
    /// The members muted here (v1.3), ended mutes included until lifted.
    #[serde(default)]
    pub mutes: Vec<switchboard_protocol::moderation::Mute>,
}

impl SequencerState {
    /// A member's role (members without one listed are members).
    pub fn role_of(&self, user: &UserId) -> Role {
        self.roles.get(user).copied().unwrap_or_default()
    }

    /// Whether `user` reads message `seq` (v1.3: not one from before
    /// they joined, where that history is not for newcomers).
    pub fn reads(&self, user: &UserId, seq: u64) -> bool {
        self.states
            .get(user)
            .and_then(|s| s.history_from)
            .is_none_or(|first| seq >= first)
    }

    /// A member's settings.
    pub fn settings_of(&self, user: &UserId) -> MemberSettings {
        self.states
            .get(user)
            .map(|s| s.settings.clone())
            .unwrap_or_default()
    }
}

/// One conversation with every member, for `GET /v1/conversations/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationDetail {
    pub record: ConversationRecord,
    pub members: Vec<MemberRecord>,
    /// Unread messages that mention the reader, or all (v1.1): the same
    /// count its conversation list entry carries.
    #[serde(default)]
    pub reader_mention_count: u64,
    /// What the reader would call unread (issue 43): the same count its
    /// conversation list entry carries.
    #[serde(default)]
    pub reader_unread_count: u64,
}

/// One entry of a user's conversation list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationSummary {
    pub record: ConversationRecord,
    pub member_ids: Vec<UserId>,
    /// The listing user's own membership row (for the unread count).
    pub me: MemberRecord,
    /// Unread messages that mention the listing user, or all (v1.1).
    #[serde(default)]
    pub mention_count: u64,
    /// Messages after the listing user's read mark that count (not system,
    /// not thread replies, not deleted), from others they do not block,
    /// at most [`MAX_UNREAD_COUNTED`] (issue 43).
    #[serde(default)]
    pub unread_count: u64,
}

/// The order of a conversation list: most recent activity first, then
/// conversation id (so that conversations active in the same millisecond
/// still have one order).
pub fn list_order(a: &ConversationRecord, b: &ConversationRecord) -> Ordering {
    b.last_activity
        .cmp(&a.last_activity)
        .then_with(|| a.conversation_id.cmp(&b.conversation_id))
}

/// A position in a conversation list: the last entry a page returned. The
/// next page holds the entries after it in [`list_order`], as they stand
/// when it is read. A conversation whose activity changes between two
/// pages moves to the front: it is not listed twice, and the pages after
/// the move do not hold it (the first page does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListCursor {
    pub last_activity: Timestamp,
    pub conversation_id: ConversationId,
}

impl ListCursor {
    pub fn of(record: &ConversationRecord) -> Self {
        Self {
            last_activity: record.last_activity,
            conversation_id: record.conversation_id.clone(),
        }
    }

    /// Whether a conversation at this activity and id comes after the
    /// position in [`list_order`].
    pub fn is_before(&self, last_activity: Timestamp, conversation_id: &ConversationId) -> bool {
        last_activity < self.last_activity
            || (last_activity == self.last_activity && *conversation_id > self.conversation_id)
    }
}

/// One page of a user's conversation list: at most `limit` entries after
/// `after` (from the start when `None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListQuery {
    pub after: Option<ListCursor>,
    pub limit: usize,
}

/// A question the sequencer asks before `actor` puts `user` into a group:
/// whether `user` knows `actor`, and how many unsolicited groups `user`
/// was put into since `since`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConsentQuery {
    pub tenant: TenantId,
    pub user: UserId,
    pub actor: UserId,
    pub since: Timestamp,
}

/// The store's answer to a [`ConsentQuery`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consent {
    /// `user` and `actor` share a conversation that `user` created or has
    /// sent in (a message, or a membership change they made).
    pub knows_actor: bool,
    /// Unsolicited adds of `user` recorded since the query's `since`.
    pub unsolicited: u32,
}

/// How long an unsolicited add counts against its user: a day. Records
/// older than that may be forgotten.
pub const UNSOLICITED_WINDOW_MS: i64 = 86_400_000;

/// Members added to a group or channel by someone they do not know (see
/// [`Consent`]): each add is recorded against the user, and the commit is
/// refused with `Conflict` if one of them has `limit` such adds in the
/// day before `at` already. The sequencer checks first and refuses the command;
/// the store's check catches adds that other partitions' writers committed
/// in between.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsolicitedAdds {
    pub users: Vec<UserId>,
    pub actor: UserId,
    /// When the adds count from: the window is the day before it.
    pub at: Timestamp,
    pub limit: u32,
}

impl UnsolicitedAdds {
    /// The start of the window the limit counts in.
    pub fn since(&self) -> Timestamp {
        Timestamp::from_unix_ms(self.at.unix_ms().saturating_sub(UNSOLICITED_WINDOW_MS))
    }
}

/// What an `ack_delivered` or `ack_read` did to the user's marks, and who
/// could be told: enough for the caller to broadcast receipts without
/// reading the conversation again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkChange {
    pub kind: ConversationKind,
    /// How many members the conversation has (0 from a store that predates
    /// it: then `members` is all of them).
    #[serde(default)]
    pub member_count: usize,
    /// Every member, the acking user included; empty past
    /// [`MarkChange::MEMBERS_INLINE`] members (ask [`crate::Read::Members`]).
    pub members: Vec<UserId>,
    /// The user's marks after the ack.
    pub delivered_seq: u64,
    pub read_seq: u64,
    /// Whether each mark moved (marks only move forward).
    pub delivered_moved: bool,
    pub read_moved: bool,
}

impl MarkChange {
    /// Up to this many members a mark's answer lists them: every
    /// conversation that fans out on write under the default threshold
    /// (500, `fanout_threshold`), whose receipts go to each member anyway.
    pub const MEMBERS_INLINE: usize = 500;

    /// The conversation's member count, from a store of any version.
    pub fn members_total(&self) -> usize {
        self.member_count.max(self.members.len())
    }
}

/// Bounds of a history read: messages with `after_seq < seq < before_seq`,
/// newest first, at most `limit`; with `thread_root`, only the thread of
/// the message of that seq (its root and its replies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryQuery {
    pub before_seq: Option<u64>,
    pub after_seq: Option<u64>,
    pub limit: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_root: Option<u64>,
}

/// One thread a user took part in (v1.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadEntry {
    pub root: Message,
    /// Replies after the user's read mark in the thread (at most
    /// [`MAX_UNREAD_COUNTED`]).
    pub unread: u64,
}

/// Past this many, unread replies and mentions are not counted further:
/// a client shows "999+".
pub const MAX_UNREAD_COUNTED: u64 = 999;

/// An inbox entry, to read the entries after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxCursor {
    pub conversation_id: ConversationId,
    pub seq: u64,
}

impl InboxCursor {
    pub fn of(m: &Message) -> Self {
        Self {
            conversation_id: m.conversation_id.clone(),
            seq: m.seq,
        }
    }
}

/// One time bucket of a conversation: the messages created on one UTC day
/// ([`day_bucket`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BucketKey {
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub day: u32,
}

impl BucketKey {
    /// The conversation the bucket belongs to.
    pub fn conversation(&self) -> ConversationKey {
        ConversationKey::new(self.tenant.clone(), self.conversation_id.clone())
    }
}

/// A bucket whose rows were moved to the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedBucket {
    pub day: u32,
    pub first_seq: u64,
    pub last_seq: u64,
    /// The archive object that holds the bucket's [`BucketContents`].
    pub object: String,
    /// Whether the per-sender index ([`crate::Read::SentBy`]) has its
    /// messages: not if archived before the store had the index, when
    /// [`crate::archive::Tiered`] reads it whole to find a sender's.
    pub senders_indexed: bool,
}

/// Everything one bucket stores: what the archiver writes to one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketContents {
    pub bucket: BucketKey,
    pub first_seq: u64,
    pub last_seq: u64,
    /// Oldest first.
    pub messages: Vec<Message>,
    /// The versions of each edited message, by `seq`, oldest first.
    pub versions: Vec<(u64, Vec<MessageVersion>)>,
}

/// One step of the scan for buckets to archive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveScan {
    /// Buckets old enough and not archived yet.
    pub buckets: Vec<BucketKey>,
    /// Where the next step starts; `None` when the scan is complete.
    pub next: Option<String>,
}

/// The UTC day a message belongs to: the time bucket of its partition.
pub fn day_bucket(t: Timestamp) -> u32 {
    let day = t.unix_ms().div_euclid(86_400_000);
    u32::try_from(day).unwrap_or(0)
}

/// One step of the scan for conversations whose messages expire (v1.2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyScan {
    /// Conversations with a retention or disappearing time, and it.
    pub conversations: Vec<(ConversationKey, ConversationPolicy)>,
    /// Where the next step starts; `None` when the scan is complete.
    pub next: Option<String>,
}

/// One step of the scan of a tenant's conversations (v1.2: what its
/// default retention applies to).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationScan {
    pub conversations: Vec<ConversationId>,
    /// Where the next step starts; `None` when the scan is complete.
    pub next: Option<String>,
}

/// One step of the scan of a conversation's live messages for those past
/// a time (v1.2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpiredScan {
    /// Live messages, not deleted, created at or before the time.
    pub seqs: Vec<u64>,
    /// The last seq looked at: the next step starts after it.
    pub last_seen: u64,
    /// Whether the scan reached a message created after the time, or the
    /// end: nothing past `last_seen` is due.
    pub done: bool,
}

/// How far one step of an inbox expiry sweep got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxSweep {
    /// Entries this step looked at, removed or not: summed over a whole
    /// sweep, the inboxes' size when it began. `None` from a backend
    /// whose rows expire by themselves and that sweeps nothing.
    #[serde(default)]
    pub seen: Option<usize>,
    /// Entries removed in this step.
    pub removed: usize,
    /// Where the next step starts; `None` when the sweep has covered every
    /// inbox.
    pub next: Option<String>,
}

/// One row of a sender's index ([`crate::Read::SentBy`]): the seq of a
/// message they sent, and the message when the backend holds it live
/// (`None`: archived, which [`crate::archive::Tiered`] reads; from
/// `Tiered`, `None` is a message gone since, skipped by a reader).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentBy {
    pub seq: u64,
    pub message: Option<Message>,
}
