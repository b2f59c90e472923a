//! Sending over REST (v1.2): `POST /v1/conversations/{id}/messages`, for
//! backends and bots that hold no socket. It says what `send_message`
//! says and is answered with the `ack`'s fields.

use serde::{Deserialize, Serialize};

use crate::frames::AckStatus;
use crate::message::SendOptions;
use crate::{ClientMsgId, Content, ConversationId, MessageId, ServerFrame, Timestamp, UserId};

/// The body of `POST /v1/conversations/{id}/messages`: `send_message`'s
/// fields but the conversation, which is the path's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PostMessage {
    /// The sender's idempotency key: a retry with the same one is
    /// answered with the message first stored, and stores nothing.
    pub client_msg_id: ClientMsgId,
    /// Any kind but `system`, which the server alone writes.
    #[cfg_attr(feature = "schema", schemars(with = "SentContent"))]
    pub content: Content,
    /// A live message of the conversation this one replies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<MessageId>,
    /// The root of the thread this message goes into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<MessageId>,
    /// Members to mention.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<UserId>,
    /// Mention every member (owners and admins only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mention_all: bool,
    /// Send it then, not now (at most 30 days ahead): answered with
    /// `"status": "scheduled"` and its `scheduled_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_at: Option<Timestamp>,
}

impl PostMessage {
    /// What the send says beyond its content.
    pub fn options(&self) -> SendOptions {
        SendOptions {
            reply_to: self.reply_to,
            thread_id: self.thread_id,
            mentions: self.mentions.clone(),
            mention_all: self.mention_all,
        }
    }
}

/// The answer to `POST /v1/conversations/{id}/messages`: the fields of
/// the `ack` a socket's send gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PostedMessage {
    pub client_msg_id: ClientMsgId,
    pub conversation_id: ConversationId,
    /// Present when `status` is `"sent"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<MessageId>,
    /// Present when `status` is `"sent"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// `"sent"`, or `"scheduled"` for a send with `send_at`.
    pub status: AckStatus,
    /// What was stored, only when it differs from what was sent (a
    /// moderation plugin rewrote it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// With `"scheduled"`: the id that lists and cancels it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_id: Option<String>,
    /// With `"scheduled"`: when it will be sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_at: Option<Timestamp>,
}

impl PostedMessage {
    /// The REST answer of a send: the fields of its `ack`, which
    /// `ServerFrame`'s constructors build for every way a send comes in.
    /// `None` for any other frame.
    pub fn from_ack(frame: ServerFrame) -> Option<Self> {
        match frame {
            ServerFrame::Ack {
                client_msg_id,
                conversation_id,
                message_id,
                seq,
                status,
                content,
                scheduled_id,
                send_at,
            } => Some(Self {
                client_msg_id,
                conversation_id,
                message_id,
                seq,
                status,
                content,
                scheduled_id,
                send_at,
            }),
            _ => None,
        }
    }
}

/// The content a client may send: every kind but `system`, which only
/// the server writes (a send of it is refused).
// Only the schema uses it; the body is read as `Content`.
#[cfg(feature = "schema")]
#[derive(schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(dead_code)]
enum SentContent {
    Text {
        text: String,
    },
    Image(crate::content::Media),
    File(crate::content::Media),
    Voice(crate::content::Media),
    /// End-to-end encrypted: the server stores and forwards it, never reads it.
    Ciphertext {
        algorithm: String,
        body: String,
    },
}
