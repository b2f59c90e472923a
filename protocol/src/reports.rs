//! Reports (v1.2): a member reports a message; a tenant admin lists the
//! reports and resolves each with an action the conversation's writer
//! carries out (a deletion is a deletion, a ban a ban).

use serde::{Deserialize, Serialize};

use crate::ids::{ConversationId, MessageId, UserId};
use crate::message::Message;
use crate::timestamp::Timestamp;

/// The longest note a report carries, in characters.
pub const MAX_NOTE_CHARS: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReportReason {
    Spam,
    Abuse,
    Illegal,
    Other,
}

/// Body of `POST /v1/conversations/{id}/messages/{message_id}/reports`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReportRequest {
    pub reason: ReportReason,
    /// What the reporter adds, at most 1000 characters.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(max = 1000)))]
    pub note: Option<String>,
}

impl ReportRequest {
    pub fn check(&self) -> Result<(), String> {
        match &self.note {
            Some(note) if note.chars().count() > MAX_NOTE_CHARS => {
                Err(format!("note is at most {MAX_NOTE_CHARS} characters"))
            }
            _ => Ok(()),
        }
    }
}

/// The answer to a report: its id (a Snowflake id, as a string).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReportCreated {
    pub report_id: MessageId,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReportStatus {
    #[default]
    Open,
    Resolved,
}

/// What a resolution does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReportAction {
    /// Nothing but closing the report.
    Dismiss,
    /// Deletes the reported message (a `message_updated` with `deleted_at`).
    DeleteMessage,
    /// Bans the message's sender from the conversation, until lifted.
    BanSender,
}

/// Body of `POST /v1/admin/reports/{report_id}/resolve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ResolveReport {
    pub action: ReportAction,
}

/// One report, as tenant admins see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Report {
    pub report_id: MessageId,
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
    /// Who reported it.
    pub reporter: UserId,
    /// Who sent the reported message.
    pub sender_id: UserId,
    pub reason: ReportReason,
    pub note: Option<String>,
    pub created_at: Timestamp,
    pub status: ReportStatus,
    /// The message as it was when reported (null for ciphertext, which
    /// the server never reads).
    pub message: Option<Message>,
    /// Once resolved: when, by whom, with what.
    #[serde(default)]
    pub resolved_at: Option<Timestamp>,
    #[serde(default)]
    pub resolved_by: Option<UserId>,
    #[serde(default)]
    pub action: Option<ReportAction>,
}

/// `GET /v1/admin/reports`: newest first, a page at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReportList {
    pub reports: Vec<Report>,
    /// Pass as `cursor` for the next page; null at the end.
    pub next_cursor: Option<String>,
}
