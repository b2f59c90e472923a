//! The three hooks in Switchboard's own types: what the gateway and the
//! worker pass in and get back. `wit.rs` converts to and from the WIT
//! types; nothing else here knows of wasmtime.

use std::fmt;

use serde::{Deserialize, Serialize};
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::previews::LinkPreview;
use switchboard_protocol::{
    Content, ConversationId, ConversationKind, Message, MessageId, TenantId, Timestamp, UserId,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    Moderation,
    EditPolicy,
    FanOut,
}

impl Hook {
    pub const ALL: [Hook; 3] = [Hook::Moderation, Hook::EditPolicy, Hook::FanOut];

    /// The name in URLs, KV keys and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::Moderation => "moderation",
            Hook::EditPolicy => "edit_policy",
            Hook::FanOut => "fan_out",
        }
    }

    pub fn parse(s: &str) -> Option<Hook> {
        Hook::ALL.into_iter().find(|h| h.as_str() == s)
    }

    /// The WIT world a new component for this hook targets (the newest;
    /// [`Hook::worlds`] lists every one the host loads).
    pub fn world(self) -> &'static str {
        self.worlds()[0]
    }

    /// Every world the host loads for this hook, newest first.
    pub fn worlds(self) -> [&'static str; 4] {
        match self {
            Hook::Moderation => [
                "switchboard:plugin/moderator@0.4.0",
                "switchboard:plugin/moderator@0.3.0",
                "switchboard:plugin/moderator@0.2.0",
                "switchboard:plugin/moderator@0.1.0",
            ],
            Hook::EditPolicy => [
                "switchboard:plugin/edit-policy-plugin@0.4.0",
                "switchboard:plugin/edit-policy-plugin@0.3.0",
                "switchboard:plugin/edit-policy-plugin@0.2.0",
                "switchboard:plugin/edit-policy-plugin@0.1.0",
            ],
            Hook::FanOut => [
                "switchboard:plugin/fan-out-plugin@0.4.0",
                "switchboard:plugin/fan-out-plugin@0.3.0",
                "switchboard:plugin/fan-out-plugin@0.2.0",
                "switchboard:plugin/fan-out-plugin@0.1.0",
            ],
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A message about to be committed, as the moderation hook sees it.
#[derive(Debug, Clone, Copy)]
pub struct ModerationInput<'a> {
    pub tenant: &'a TenantId,
    pub conversation_id: &'a ConversationId,
    pub kind: ConversationKind,
    pub member_count: usize,
    pub sender: &'a UserId,
    pub content: &'a Content,
    /// Its reply, thread and mentions (a 0.2.0 moderator sees them; an
    /// edit's are empty: an edit changes the content alone).
    pub options: &'a SendOptions,
}

/// A reaction about to be added, as a 0.2.0 moderator sees it (removing
/// one is never moderated, and a 0.1.0 moderator sees no reactions).
#[derive(Debug, Clone, Copy)]
pub struct ReactionInput<'a> {
    pub tenant: &'a TenantId,
    pub conversation_id: &'a ConversationId,
    pub kind: ConversationKind,
    pub member_count: usize,
    pub sender: &'a UserId,
    pub message_id: MessageId,
    pub emoji: &'a str,
}

/// A stored message's link preview (v1.3), as a 0.4.0 moderator sees
/// it before the members do (older moderators are not asked).
#[derive(Debug, Clone, Copy)]
pub struct PreviewInput<'a> {
    pub tenant: &'a TenantId,
    pub conversation_id: &'a ConversationId,
    pub kind: ConversationKind,
    pub member_count: usize,
    /// Who sent the message.
    pub sender: &'a UserId,
    pub message_id: MessageId,
    pub card: &'a LinkPreview,
}

/// What moderation decided, after the hook's failure policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Moderation {
    Allow,
    /// Store nothing; the sender gets `rejected_by_policy` with the reason.
    Reject(String),
    /// Store this content instead (already checked against the limits).
    Rewrite(Content),
    /// The plugin failed and the hook fails closed: the sender gets
    /// `unavailable` and may retry.
    Failed(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditAction {
    Edit,
    Delete,
}

/// An `edit_message` or `delete_message`, as the edit-policy hook sees it.
#[derive(Debug, Clone, Copy)]
pub struct EditRequest<'a> {
    pub tenant: &'a TenantId,
    pub action: EditAction,
    pub actor: &'a UserId,
    pub actor_is_admin: bool,
    pub message: &'a Message,
    pub now: Timestamp,
}
