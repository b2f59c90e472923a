//! The jobs of the push pipeline (F15) on the `SB_PUSH` stream, and
//! (v1.3) the link previews' jobs beside them.
//!
//! 1. A writer publishes a [`MessageJob`] for each stored message of a
//!    tenant with pushes, in a conversation that fans out on write.
//! 2. The push stage's first step waits the tenant's delay, then, for
//!    every recipient device with a push token that has still not
//!    acknowledged the message (its inbox entry is there) and got no push
//!    for the conversation within the collapse window, publishes a
//!    [`SendJob`].
//! 3. The second step calls the provider; failures are retried with a
//!    growing delay, and a push that fails every attempt goes to
//!    `SB_PUSH_DEAD` as it was, for an operator to inspect and republish.

use serde::{Deserialize, Serialize};
use switchboard_protocol::push::PushProvider;
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, MessageId, TenantId, Timestamp, UserId,
};

use crate::subject::token;

/// Header of a dead letter: the last error.
pub const HEADER_PUSH_ERROR: &str = "Sb-Push-Error";

pub fn message_subject(tenant: &TenantId) -> String {
    format!("sb.push.msg.{}", token(tenant.as_str()))
}

pub fn send_subject(tenant: &TenantId) -> String {
    format!("sb.push.send.{}", token(tenant.as_str()))
}

/// Where a stored message's links wait to be unfurled (v1.3).
pub fn preview_subject(tenant: &TenantId) -> String {
    format!("sb.push.preview.{}", token(tenant.as_str()))
}

pub fn dead_subject(tenant: &TenantId) -> String {
    format!("sb.pushdead.{}", token(tenant.as_str()))
}

/// A stored message that may need pushes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageJob {
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
    pub seq: u64,
    pub sender: UserId,
    /// Every member the message was delivered to (the sender included).
    pub recipients: Vec<UserId>,
    /// When it was stored: the delay counts from here.
    pub stored_at: Timestamp,
    /// A reaction to the message (v1.3), not the message: the emoji, with
    /// `sender` the reactor, `recipients` the message's author and
    /// `stored_at` the reaction's time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reaction: Option<String>,
}

/// A stored text message whose links are to be unfurled (v1.3),
/// published by its writer after the commit; the previews stage fetches
/// them and sends the cards back to the writer
/// ([`crate::envelope::PreviewsCommand`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewJob {
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
    /// The text's first links (`previews::links`), in order.
    pub urls: Vec<String>,
    /// What the tenant's moderator is shown of the message beside each
    /// card: its sender, and its conversation's kind and size when it
    /// was stored. Absent from jobs of writers older than the previews'
    /// plugin hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<UserId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_kind: Option<ConversationKind>,
    #[serde(default)]
    pub member_count: usize,
}

/// One push to one device, ready to send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendJob {
    pub tenant: TenantId,
    pub user: UserId,
    pub device: DeviceId,
    pub provider: PushProvider,
    pub token: String,
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
    pub seq: u64,
    pub sender: UserId,
    pub title: String,
    /// `None` where the tenant's preview mode or the content allows none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The user's unread total when the push was made (v1.3); `None` when
    /// it could not be read (or in jobs of earlier releases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub badge: Option<u64>,
    /// For a reaction's push (v1.3): its emoji; `sender` is the reactor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reaction: Option<String>,
}
