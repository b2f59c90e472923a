//! A member's standing in a conversation (v1.1): their role, and their own
//! notification settings. Content (system events) and conversation views
//! both name these, so they live apart from either.

use serde::{Deserialize, Serialize};

use crate::timestamp::Timestamp;

/// What a member may do (v1.1). Owners and admins may remove others,
/// pin, delete others' messages, change settings that affect everyone,
/// ban, and mention all; only an owner makes owners.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Owner,
    Admin,
    #[default]
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Owner => "owner",
            Self::Admin => "admin",
            Self::Member => "member",
        }
    }

    /// Owners and admins: they moderate the conversation.
    pub fn moderates(self) -> bool {
        matches!(self, Self::Owner | Self::Admin)
    }
}

/// Which messages of a conversation push to a member (v1.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum NotificationLevel {
    /// Every message.
    #[default]
    All,
    /// Messages that mention the member, mention all, or reply to them.
    Mentions,
    /// None.
    None,
}

/// A member's own settings of a conversation (v1.1):
/// `PUT/GET /v1/conversations/{id}/settings`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MemberSettings {
    #[serde(default)]
    pub notifications: NotificationLevel,
    /// No push at all until then (RFC 3339); null: not muted.
    #[serde(default)]
    pub muted_until: Option<Timestamp>,
}

impl MemberSettings {
    /// Whether a message arriving at `now` pushes to the member, by these
    /// settings alone: not while muted, and at `mentions` only when it
    /// `names_them` (mentions them, mentions all, or replies to them).
    pub fn pushes(&self, now: Timestamp, names_them: bool) -> bool {
        if self.muted_until.is_some_and(|until| until > now) {
            return false;
        }
        match self.notifications {
            NotificationLevel::All => true,
            NotificationLevel::Mentions => names_them,
            NotificationLevel::None => false,
        }
    }
}

/// Body of `PATCH /v1/conversations/{id}/members/{user}` (v1.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ChangeRole {
    pub role: Role,
}
