//! Conversation objects of the REST control plane.

use serde::{Deserialize, Serialize};

use crate::ids::{ConversationId, MessageId, UserId};
use crate::membership::{NotificationLevel, Role};
use crate::message::Message;
use crate::timestamp::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ConversationKind {
    /// Exactly two members; at most one per pair of users.
    Direct,
    Group,
    Channel,
}

impl ConversationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Group => "group",
            Self::Channel => "channel",
        }
    }
}

/// A member with the high-water marks of `GET /v1/conversations/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemberView {
    pub user_id: UserId,
    pub delivered_seq: u64,
    pub read_seq: u64,
    /// The member's role (v1.1).
    #[serde(default)]
    pub role: Role,
}

/// A pinned message (v1.1): `GET /v1/conversations/{id}/pins`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Pin {
    pub message_id: MessageId,
    /// Who pinned it.
    pub by: UserId,
    pub pinned_at: Timestamp,
    /// The message as it is now (null if it was deleted or has left the
    /// live history).
    pub message: Option<Message>,
}

/// Body of `GET /v1/conversations/{id}/pins`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PinList {
    pub pins: Vec<Pin>,
}

/// Body of `POST /v1/conversations/{id}/pins`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PinMessage {
    pub message_id: MessageId,
}

/// The most messages one conversation may have pinned.
pub const MAX_PINS: usize = 50;

/// One thread of `GET /v1/conversations/{id}/threads` (v1.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThreadView {
    /// The thread's root, with its `thread` summary.
    pub root: Message,
    pub reply_count: u64,
    /// Replies after the caller's read mark in the thread.
    pub unread_count: u64,
}

/// Body of `GET /v1/conversations/{id}/threads`: the threads the caller
/// took part in (started, or replied in), most recent reply first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThreadList {
    pub threads: Vec<ThreadView>,
}

/// `members` is a list of user ids in listings and a list of
/// [`MemberView`]s in `GET /v1/conversations/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Members {
    Detailed(Vec<MemberView>),
    Ids(Vec<UserId>),
}

/// The conversation object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ConversationView {
    pub conversation_id: ConversationId,
    pub kind: ConversationKind,
    pub title: Option<String>,
    pub members: Members,
    pub created_at: Timestamp,
    pub last_seq: u64,
    pub last_message: Option<Message>,
    /// `last_message` in one line ([`crate::Content::preview`]); null when
    /// there is none, it was deleted, or it is ciphertext.
    #[serde(default)]
    pub preview: Option<String>,
    /// For the caller: what they would call unread after their read mark
    /// (issue 43): messages of the main timeline from others they do not
    /// block, neither system messages nor deleted ones, at most 999.
    pub unread_count: u64,
    /// For the caller: their read mark (`ack_read`, or their own last
    /// send), the seq `unread_count` counts after (v1.3 addition).
    #[serde(default)]
    pub read_seq: u64,
    /// For the caller: their notification level here (v1.1).
    #[serde(default)]
    pub notifications: NotificationLevel,
    /// For the caller: whether pushes are muted now (v1.1).
    #[serde(default)]
    pub muted: bool,
    /// For the caller: unread messages that mention them or all (v1.1).
    #[serde(default)]
    pub mention_count: u64,
    /// Slow mode, retention and disappearing messages (v1.2).
    #[serde(flatten)]
    pub policy: crate::safety::ConversationPolicy,
    /// The conversation's own fields (v1.3): a JSON object of at most
    /// 4096 bytes, set by owners and admins (`PATCH`); `{}` for none.
    #[serde(default)]
    pub custom: serde_json::Map<String, serde_json::Value>,
    /// `visibility`, `posting`, `topic` and
    /// `history_visible_to_new_members` (v1.3).
    #[serde(flatten)]
    pub channel: crate::channels::ChannelSettings,
}

/// Body of `POST /v1/conversations`. The caller is a member; a direct
/// conversation names exactly one other member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(extend("allOf" = [{
    "if": { "properties": { "kind": { "const": "direct" } }, "required": ["kind"] },
    "then": { "required": ["members"], "properties": { "members": { "minItems": 1, "maxItems": 1 } } }
}])))]
#[serde(deny_unknown_fields)]
pub struct CreateConversation {
    pub kind: ConversationKind,
    #[serde(default)]
    pub members: Vec<UserId>,
    /// Absent for none; `null` is refused like any other non-string.
    #[serde(
        default,
        deserialize_with = "crate::fields::present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub title: Option<String>,
}

/// Body of `POST /v1/conversations/{id}/members`: `{"members": [...]}`,
/// or `{"user_id": "..."}` for one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(extend("anyOf" = [
    { "required": ["members"], "properties": { "members": { "minItems": 1 } } },
    { "required": ["user_id"] }
])))]
#[serde(deny_unknown_fields)]
pub struct AddMembers {
    #[serde(default)]
    pub members: Vec<UserId>,
    /// Absent for none; `null` is refused.
    #[serde(
        default,
        deserialize_with = "crate::fields::present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "UserId"))]
    pub user_id: Option<UserId>,
}

/// Body of history responses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HistoryPage {
    pub messages: Vec<Message>,
    pub next_before_seq: Option<u64>,
}

/// Body of `GET /v1/conversations`: one page of the caller's list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ConversationList {
    pub conversations: Vec<ConversationView>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    /// Opaque: its form may change between releases. Servers from before
    /// paging answered the whole list without it.
    #[serde(default)]
    pub next_cursor: Option<String>,
}
