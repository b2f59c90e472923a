//! The message object of PROTOCOL.md.

use serde::{Deserialize, Serialize};

use crate::content::Content;
use crate::ids::{ClientMsgId, ConversationId, DeviceId, MessageId, UserId};
use crate::timestamp::Timestamp;

/// One version of an edited message (`GET .../versions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MessageVersion {
    /// 1 for the original, then 2, 3, ...
    pub version: u32,
    pub content: Content,
    /// When this version was written (`created_at` for the original).
    pub at: Timestamp,
    pub editor: UserId,
}

/// Body of `GET /v1/conversations/{id}/messages/{message_id}/versions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MessageVersions {
    pub message_id: MessageId,
    pub versions: Vec<MessageVersion>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Message {
    pub message_id: MessageId,
    pub conversation_id: ConversationId,
    /// Per conversation, from 1, without gaps.
    pub seq: u64,
    pub sender_id: UserId,
    pub sender_device: DeviceId,
    pub client_msg_id: ClientMsgId,
    /// `None` (JSON `null`) once the message is deleted.
    pub content: Option<Content>,
    pub created_at: Timestamp,
    pub edited_at: Option<Timestamp>,
    pub deleted_at: Option<Timestamp>,
}
