//! The commands of v1.1 and v1.2 that a member (or a tenant admin) makes
//! through REST or a frame: who acts, and on what.

use serde::{Deserialize, Serialize};
use switchboard_protocol::profile::ProfilePatch;
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

/// A member's vote in poll `message_id` (v1.3): the option ids they
/// choose now (empty retracts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoteCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub message_id: MessageId,
    pub option_ids: Vec<String>,
}

/// The cards of a message's links (v1.3), as the previews stage made
/// them: the message's writer stores those whose link its text still
/// has, and tells the members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewsCommand {
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
    pub previews: Vec<switchboard_protocol::previews::LinkPreview>,
}

/// A command about one message of the conversation: a pin, an unpin,
/// a poll's closing.
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

/// A change of `user`'s profile (v1.3): their own (`PATCH
/// /v1/me/profile`) or a tenant admin's of `custom`. Its conversation is
/// the user's profile route ([`profile_route_id`]), so that one writer
/// orders every change of one profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub user: UserId,
    pub patch: ProfilePatch,
}

/// The conversation id a user's profile changes are addressed by: it
/// names no conversation (none is ever made with it: a `profile:` id is
/// not one the API gives out), only the partition whose writer keeps the
/// profile.
pub fn profile_route_id(user: &UserId) -> Option<ConversationId> {
    ConversationId::new(format!("profile:{}", user.as_str()))
        .or_else(|_| {
            let digest = ring::digest::digest(&ring::digest::SHA256, user.as_str().as_bytes());
            let hex: String = digest.as_ref()[..16]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            ConversationId::new(format!("profile:{hex}"))
        })
        .ok()
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

/// v1.3: the actor joins by themselves: a public conversation, or
/// (`invite`) any with one of its invite codes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinCommand {
    #[serde(flatten)]
    pub by: Actor,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invite: Option<String>,
}

/// v1.3: an owner or admin makes an invite (its code chosen by the
/// gateway, so that a retried command makes the same one) or revokes one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InviteCommand {
    #[serde(flatten)]
    pub by: Actor,
    pub code: String,
    /// `None`: revoke it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<switchboard_protocol::channels::CreateInvite>,
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
