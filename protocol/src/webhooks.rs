//! Outbound webhooks (v1.2): a tenant's endpoints, and the events they
//! get. Each POST carries one [`WebhookEvent`] as its body, with
//! `Switchboard-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">` and
//! `Switchboard-Event-Id`.

use serde::{Deserialize, Serialize};

use crate::{ConversationId, TenantId, Timestamp};

/// The most endpoints a tenant may have.
pub const MAX_WEBHOOKS: usize = 10;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum EventType {
    /// A message was sent: `data.message`.
    #[serde(rename = "message.created")]
    MessageCreated,
    /// A message was edited or deleted: `data.message`, as it is now.
    #[serde(rename = "message.updated")]
    MessageUpdated,
    /// A reaction was added or removed: `data` as the `reaction` frame.
    #[serde(rename = "reaction")]
    Reaction,
    /// Members were added: `data.user_ids`, `data.actor`, `data.message`.
    #[serde(rename = "member.added")]
    MemberAdded,
    /// Members were removed or left: `data.user_ids`, `data.actor`,
    /// `data.message`.
    #[serde(rename = "member.removed")]
    MemberRemoved,
    /// A member reported a message: `data.report_id`, `data.message_id`,
    /// `data.reporter`, `data.reason`.
    #[serde(rename = "report.created")]
    ReportCreated,
    /// A member's role changed (v1.3 of the stream): `data.user_ids` (the
    /// member), `data.actor`, `data.message` (its system message, whose
    /// `content.role` is the new role).
    #[serde(rename = "member.role_changed")]
    MemberRoleChanged,
    /// A member was banned: `data.user_ids`, `data.actor`, `data.message`.
    #[serde(rename = "member.banned")]
    MemberBanned,
    /// A ban was lifted: `data.user_ids`, `data.actor`, `data.message`.
    #[serde(rename = "member.unbanned")]
    MemberUnbanned,
    /// A message was pinned: `data.actor`, `data.message` (the system
    /// message, naming the pinned one).
    #[serde(rename = "message.pinned")]
    MessagePinned,
    /// A message was unpinned: `data.actor`, `data.message`.
    #[serde(rename = "message.unpinned")]
    MessageUnpinned,
    /// The settings that affect every member changed (slow mode,
    /// retention, disappearing messages): `data.actor`, `data.message`
    /// (its `content.policy` is what holds now).
    #[serde(rename = "conversation.updated")]
    ConversationUpdated,
    /// A moderation change (v1.3): `data.entry`, as `GET
    /// /v1/admin/audit` lists it; `conversation_id` when it was made in
    /// one.
    #[serde(rename = "moderation.audit")]
    ModerationAudit,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MessageCreated => "message.created",
            Self::MessageUpdated => "message.updated",
            Self::Reaction => "reaction",
            Self::MemberAdded => "member.added",
            Self::MemberRemoved => "member.removed",
            Self::ReportCreated => "report.created",
            Self::MemberRoleChanged => "member.role_changed",
            Self::MemberBanned => "member.banned",
            Self::MemberUnbanned => "member.unbanned",
            Self::MessagePinned => "message.pinned",
            Self::MessageUnpinned => "message.unpinned",
            Self::ConversationUpdated => "conversation.updated",
            Self::ModerationAudit => "moderation.audit",
        }
    }
}

/// One of a tenant's endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WebhookEndpoint {
    /// An `http(s)` URL with a host name or IPv4 address; a private
    /// address is refused when called unless the operator allows them
    /// (`[push] allow_private_targets`).
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(max = crate::fields::MAX_HTTP_URL_LEN),
            pattern(crate::fields::HTTP_URL_PATTERN)
        )
    )]
    pub url: String,
    /// The HMAC-SHA256 key of `Switchboard-Signature`; at least 16
    /// characters. Shown as its fingerprint once stored.
    #[cfg_attr(feature = "schema", schemars(length(min = 16)))]
    pub secret: String,
    /// The events it gets; at least one.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub events: Vec<EventType>,
}

impl WebhookEndpoint {
    pub fn wants(&self, event: EventType) -> bool {
        self.events.contains(&event)
    }
}

/// `PUT /v1/admin/webhooks`'s body and `GET`'s answer: the tenant's
/// endpoints (at most 10), all of them (a `PUT` replaces the list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WebhookList {
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_WEBHOOKS)))]
    pub webhooks: Vec<WebhookEndpoint>,
}

/// `PUT /v1/admin/webhooks`'s body: the list as docs/protocol.md writes it
/// (`[{url, secret, events}]`), or as `GET` answers it
/// (`{"webhooks": [...]}`). A `secret` that is the fingerprint `GET`
/// showed keeps that endpoint's secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum WebhooksBody {
    List(
        #[cfg_attr(feature = "schema", schemars(length(max = MAX_WEBHOOKS)))] Vec<WebhookEndpoint>,
    ),
    Wrapped(WebhookList),
}

impl WebhooksBody {
    pub fn into_list(self) -> Vec<WebhookEndpoint> {
        match self {
            Self::List(list) => list,
            Self::Wrapped(w) => w.webhooks,
        }
    }
}

/// The body of every webhook POST, and of every message of the
/// `SB_EVENTS` stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WebhookEvent {
    /// Unique per event and the same on every retry
    /// (`Switchboard-Event-Id`): a receiver that saw it may drop it.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub tenant: TenantId,
    /// The conversation it happened in; absent for a tenant-wide
    /// `moderation.audit` event (v1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<ConversationId>,
    /// When it happened.
    pub created_at: Timestamp,
    /// What the type says.
    pub data: serde_json::Value,
}
