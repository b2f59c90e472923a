//! The one change a commit applies: [`Mutation`], what each means is in
//! `rules.rs`.

use serde::{Deserialize, Serialize};
use switchboard_protocol::channels::{ChannelSettings, Invite};
use switchboard_protocol::reports::Report;
use switchboard_protocol::safety::{Ban, ConversationPolicy};
use switchboard_protocol::{
    Content, Message, MessageId, MessageVersion, ReactAction, TenantId, Timestamp, UserId,
};

use crate::types::{
    BucketKey, ConversationKey, ConversationRecord, MemberState, PinRow, UnsolicitedAdds,
};

/// One change, applied inside [`crate::Store::commit`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Mutation {
    /// Creates a conversation with its first members. Refused with
    /// `Conflict` if it exists.
    CreateConversation {
        record: Box<ConversationRecord>,
        members: Vec<UserId>,
        /// Absent in commits of releases before consent (and where the
        /// tenant has no limit).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unsolicited: Option<UnsolicitedAdds>,
    },
    /// Adds members (existing members are left as they are).
    AddMembers {
        key: ConversationKey,
        users: Vec<UserId>,
        at: Timestamp,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unsolicited: Option<UnsolicitedAdds>,
    },
    /// Removes members and their inbox entries for the conversation.
    RemoveMembers {
        key: ConversationKey,
        users: Vec<UserId>,
    },
    /// Stores messages with `seq` `expected_last_seq + 1`, `+ 2`, ... in
    /// order; records each idempotency key and message id; with `inbox`,
    /// writes an inbox entry for every device of every member except the
    /// sending device.
    Append {
        key: ConversationKey,
        expected_last_seq: u64,
        messages: Vec<Message>,
        inbox: bool,
    },
    /// A new version of message `seq`: its content becomes `content`, the
    /// previous versions stay readable. With `inbox`, every member's
    /// devices get the update in their inboxes.
    Edit {
        key: ConversationKey,
        seq: u64,
        content: Content,
        editor: UserId,
        at: Timestamp,
        inbox: bool,
        /// The message's new `custom` fields (v1.3): `None` keeps them,
        /// an object replaces them (an empty one removes them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        custom: Option<serde_json::Map<String, serde_json::Value>>,
    },
    /// Soft delete of message `seq`: no content anywhere from now on, its
    /// versions included.
    Delete {
        key: ConversationKey,
        seq: u64,
        at: Timestamp,
        inbox: bool,
    },
    /// The bucket's rows now live in archive `object` (F14): the bucket is
    /// marked archived with its seq range, and its message rows, version
    /// rows, idempotency keys and every member device's inbox entries for
    /// those seqs go. The conversation's newest message keeps its live row
    /// (it is the conversation's position and preview); message-id index
    /// rows and media references stay. Refused with `Conflict` when the
    /// bucket is archived already or no longer holds exactly
    /// `first_seq..=last_seq`.
    Archive {
        bucket: BucketKey,
        first_seq: u64,
        last_seq: u64,
        object: String,
    },
    /// Moves one bucket to the archive: [`crate::archive::Tiered`] reads
    /// it, writes its object and commits [`Mutation::Archive`]. It must be
    /// the only mutation of its commit. A backend reached without `Tiered`
    /// refuses it with `Unavailable`.
    MoveToArchive { bucket: BucketKey },
    /// `user`'s reaction with `emoji` to message `seq`, added or removed
    /// (v1.1): the reaction row, the message's counts, and with `inbox`
    /// every member device's inbox (the message re-enters it, as after
    /// an edit). Idempotent; `Conflict` past the limits (20 emoji of one
    /// user on one message, 50 emoji on one message), `NotFound` for a
    /// message not (or no longer) stored, `Conflict` for a deleted one.
    React {
        key: ConversationKey,
        seq: u64,
        user: UserId,
        emoji: String,
        action: ReactAction,
        at: Timestamp,
        inbox: bool,
    },
    /// `user`'s vote in poll `seq` becomes `options` (v1.3; option ids,
    /// checked against the poll; empty retracts): their vote rows (kept
    /// among their marks on the message, [`switchboard_protocol::poll::vote_mark`]),
    /// the poll's results, and with `inbox` every member device's inbox.
    /// Idempotent; `NotFound` for a message not stored, `Conflict` for a
    /// deleted one, one that is no poll or a closed poll, `NotAMember`.
    Vote {
        key: ConversationKey,
        seq: u64,
        user: UserId,
        options: Vec<String>,
        at: Timestamp,
        inbox: bool,
    },
    /// Poll `seq` takes no more votes (v1.3); closing a closed poll
    /// changes nothing. `NotFound`, or `Conflict` for a deleted message or
    /// one that is no poll.
    ClosePoll {
        key: ConversationKey,
        seq: u64,
        at: Timestamp,
        inbox: bool,
    },
    /// Message `seq`'s link previews become `previews` (v1.3): those whose
    /// link its text still has (an edit may have taken one away), with
    /// the references of their images (members may download them, the
    /// collector keeps them) and with `inbox` every member device's
    /// inbox. A message deleted (or gone) meanwhile takes none: no error.
    SetPreviews {
        key: ConversationKey,
        seq: u64,
        previews: Vec<switchboard_protocol::previews::LinkPreview>,
        at: Timestamp,
        inbox: bool,
    },
    /// Message `seq` is a reply in the thread of message `root_seq`
    /// (v1.1): the root's summary counts it, the thread's index lists it,
    /// and its sender (and the root's) take part in the thread from now
    /// on. Follows the reply's append in the same commit.
    ThreadReply {
        key: ConversationKey,
        root_seq: u64,
        seq: u64,
        sender: UserId,
        at: Timestamp,
    },
    /// Pins message `pin.message_id` (v1.1); nothing changes if it is
    /// pinned. `Conflict` past 50 pins.
    Pin { key: ConversationKey, pin: PinRow },
    /// Unpins a message; nothing changes if it is not pinned.
    Unpin {
        key: ConversationKey,
        message_id: MessageId,
    },
    /// A member's v1.1 state from now on: their given role and their own
    /// settings (v1.1). `NotAMember` when they are not a member.
    SetMemberState {
        key: ConversationKey,
        user: UserId,
        state: MemberState,
    },
    /// The settings that affect every member (v1.2), and (v1.3) the
    /// conversation's `custom` fields, whole. `NotFound` when the
    /// conversation does not exist.
    SetPolicy {
        key: ConversationKey,
        policy: ConversationPolicy,
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        custom: serde_json::Map<String, serde_json::Value>,
        /// Visibility, posting, topic, history for newcomers (v1.3): a
        /// public one is listed in the tenant's directory.
        #[serde(default, skip_serializing_if = "ChannelSettings::is_default")]
        channel: ChannelSettings,
        /// The members muted here (v1.3), whole.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        mutes: Vec<switchboard_protocol::moderation::Mute>,
    },
    /// `user` joins by themselves (v1.3: a public channel, or an invite):
    /// a member from `at`, with their read and delivery marks at `read_to`
    /// (what came before is not unread), reading the history from
    /// `history_from` on when given; `invite` is the invite they used,
    /// its use counted. `NotFound` when the conversation does not exist;
    /// nothing changes for a member already.
    Join {
        key: ConversationKey,
        user: UserId,
        at: Timestamp,
        read_to: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        history_from: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        invite: Option<Invite>,
    },
    /// Invite `code` as it is now, or (`None`) revoked (v1.3).
    SetInvite {
        key: ConversationKey,
        code: String,
        invite: Option<Invite>,
    },
    /// Keeps `ban.user_id` out of the conversation (v1.2), replacing an
    /// earlier ban of them. Removing them, if they are a member, is a
    /// [`Mutation::RemoveMembers`] of its own.
    Ban { key: ConversationKey, ban: Ban },
    /// Lifts a ban; nothing changes where there is none.
    Unban { key: ConversationKey, user: UserId },
    /// `user` blocks `target` from `at` on, or (`at: None`) no longer
    /// does (v1.2). Idempotent.
    SetBlock {
        tenant: TenantId,
        user: UserId,
        target: UserId,
        at: Option<Timestamp>,
    },
    /// Messages `seqs` are past their conversation's retention or
    /// disappearing time (v1.2): each live one goes as a deletion does
    /// (content, versions, reactions, mentions, media references), and
    /// every member device's inbox entries for them go too. Rows archived
    /// or gone are passed over.
    Expire {
        key: ConversationKey,
        seqs: Vec<u64>,
        at: Timestamp,
        /// Entries of the expiry index to remove: (`expires_at`, seq) of
        /// messages found due ([`crate::Read::Due`]), gone or not.
        #[serde(default)]
        unindex: Vec<(Timestamp, u64)>,
    },
    /// Expiry in an archived bucket (v1.2): [`crate::archive::Tiered`]
    /// rewrites its object (same name, same seq range) with messages
    /// `seqs`, and with `cutoff` every message created at or before it,
    /// deleted as a deletion leaves them; first it commits
    /// [`Mutation::ExpiredFromArchive`] for them. It must be the only
    /// mutation of its commit. A backend reached without `Tiered` refuses
    /// it with `Unavailable`.
    ExpireArchived {
        bucket: BucketKey,
        seqs: Vec<u64>,
        cutoff: Option<Timestamp>,
        at: Timestamp,
    },
    /// The live rows archived messages that expire leave behind (v1.2):
    /// their reaction rows, the mentions they counted in, and their media
    /// references `blobs` (seq, blob_ref), so an upload nobody else
    /// references is collected. `gone` are the messages as they were.
    /// Idempotent.
    ExpiredFromArchive {
        key: ConversationKey,
        gone: Vec<Message>,
        blobs: Vec<(u64, String)>,
    },
    /// A user's profile as it is now (v1.3), replacing the one before.
    PutProfile {
        tenant: TenantId,
        profile: Box<switchboard_protocol::profile::Profile>,
    },
    /// A report as it is now (v1.2): a new one, or one resolved.
    PutReport {
        tenant: TenantId,
        report: Box<Report>,
    },
    /// Erasure of `user` in a conversation (v1.2): messages `seqs` as
    /// [`crate::erasure::Erasure::message`] has them. Their own lose their
    /// versions, reactions, mentions, media references and idempotency
    /// keys (as a deletion, without inbox entries); the user's reactions
    /// to the others go. Rows archived or gone, and a conversation that
    /// is gone, are passed over.
    EraseMessages {
        key: ConversationKey,
        user: UserId,
        pseudonym: UserId,
        seqs: Vec<u64>,
        at: Timestamp,
    },
    /// Erasure, a conversation's last step: `user` is no member (their
    /// inbox entries go), their ban is lifted, and pins, bans and a
    /// creator that named them name `pseudonym`.
    EraseMember {
        key: ConversationKey,
        user: UserId,
        pseudonym: UserId,
    },
    /// Erasure, the last step: every row kept under the user
    /// ([`crate::rules::Write::UserRowsGone`]).
    EraseUser { tenant: TenantId, user: UserId },
    /// Erasure in an archived bucket: [`crate::archive::Tiered`] rewrites
    /// its object as [`crate::erasure::Erasure::bucket`] has it (same
    /// name, same seq range). It must be the only mutation of its commit.
    /// A backend reached without `Tiered` refuses it with `Unavailable`.
    EraseArchived {
        bucket: BucketKey,
        user: UserId,
        pseudonym: UserId,
        at: Timestamp,
    },
    /// Puts an archived message and its versions back among the live rows
    /// (so that an edit or delete can change it); nothing happens when the
    /// message has a live row already. Live rows win over the archive on
    /// every read.
    Restore {
        key: ConversationKey,
        message: Box<Message>,
        versions: Vec<MessageVersion>,
    },
}
