//! The commands of v1.1 and v1.2 that a member (or a tenant admin) makes
//! through REST or a frame: who acts, and on what.

use serde::{Deserialize, Serialize};
use switchboard_protocol::reports::{ReportAction, ReportReason};
use switchboard_protocol::safety::{BlockAction, ConversationPatch};
use switchboard_protocol::{
    ConversationId, DeviceId, MemberSettings, MessageId, ReactAction, Role, TenantId, Timestamp,
    UserId,
};

/// Who does a v1.1 command, where and when: what each carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// Unique per command; the idempotency key of its system message, if
    /// it makes one.
    pub command_id: MessageId,
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub actor: UserId,
    pub device: DeviceId,
    /// Whether the actor has the tenant's admin role.
    #[serde(default)]
    pub actor_is_admin: bool,
    pub at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub user: UserId,
    pub role: Role,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingsCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub settings: MemberSettings,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReactCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub message_id: MessageId,
    pub emoji: String,
    pub action: ReactAction,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub message_id: MessageId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub user: UserId,
    pub action: BlockAction,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BanCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub user: UserId,
    /// When a ban ends by itself; `None`: until lifted (and for an unban).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub patch: ConversationPatch,
}

/// v1.2: a member reports a message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub message_id: MessageId,
    pub reason: ReportReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// v1.2: a tenant admin resolves a report of a message of this
/// conversation; `message_id` is the report's, so the writer reads the
/// message with the batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolveCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub report_id: MessageId,
    pub message_id: MessageId,
    pub action: ReportAction,
}
