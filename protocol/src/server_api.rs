//! Sending over REST (v1.2): `POST /v1/conversations/{id}/messages`, for
//! backends and bots that hold no socket. It says what `send_message`
//! says and is answered with the `ack`'s fields.

use serde::{Deserialize, Serialize};

use crate::frames::SendAck;
use crate::message::SendOptions;
use crate::{ClientMsgId, Content, MessageId, Timestamp, UserId};

/// The body of `POST /v1/conversations/{id}/messages`: `send_message`'s
/// fields but the conversation, which is the path's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PostMessage {
    /// The sender's idempotency key: a retry with the same one is
    /// answered with the message first stored, and stores nothing.
    pub client_msg_id: ClientMsgId,
    /// Any kind but `system`, which the server alone writes.
    #[cfg_attr(feature = "schema", schemars(with = "crate::content::SentContent"))]
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
    /// The message's own fields (v1.3): a JSON object of at most 4096
    /// bytes as compact JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<serde_json::Map<String, serde_json::Value>>,
    /// `false`: no link previews for this message (v1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previews: Option<bool>,
}

impl PostMessage {
    /// What the send says beyond its content.
    pub fn options(&self) -> SendOptions {
        SendOptions {
            reply_to: self.reply_to,
            thread_id: self.thread_id,
            mentions: self.mentions.clone(),
            mention_all: self.mention_all,
            custom: self.custom.clone(),
            previews: self.previews,
        }
    }
}

/// The answer to `POST /v1/conversations/{id}/messages`: the `ack` a
/// socket's send gets.
pub type PostedMessage = SendAck;
