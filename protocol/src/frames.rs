//! WebSocket frames: one JSON object per text frame, tagged by `type`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::content::Content;
use crate::error::ErrorCode;
use crate::ids::{ClientMsgId, ConversationId, DeviceId, MessageId, UserId};
use crate::membership::NotificationLevel;
use crate::message::Message;
use crate::reaction::ReactAction;
use crate::timestamp::Timestamp;

/// Frames a client sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientFrame {
    SendMessage {
        client_msg_id: ClientMsgId,
        conversation_id: ConversationId,
        #[cfg_attr(feature = "schema", schemars(with = "crate::content::SentContent"))]
        content: Content,
        /// A live message of the conversation this one replies to (v1.1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<MessageId>,
        /// The root of the thread this message goes into (v1.1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread_id: Option<MessageId>,
        /// Members to mention (v1.1).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        mentions: Vec<UserId>,
        /// Mention every member (v1.1; owners and admins only).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        mention_all: bool,
        /// Send it then, not now (v1.2): at most 30 days ahead. The `ack`
        /// says `"scheduled"`; moderation, membership and `seq` are
        /// decided when it is sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        send_at: Option<Timestamp>,
        /// The app's own fields on the message (v1.3): a JSON object of
        /// at most 4096 bytes as compact JSON.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        custom: Option<Map<String, Value>>,
        /// `false`: no link previews for this message (v1.3).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previews: Option<bool>,
    },
    EditMessage {
        conversation_id: ConversationId,
        message_id: MessageId,
        #[cfg_attr(feature = "schema", schemars(with = "crate::content::SentContent"))]
        content: Content,
        /// The message's new `custom` fields (v1.3): absent keeps them,
        /// an object replaces them (`{}` removes them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        custom: Option<Map<String, Value>>,
    },
    DeleteMessage {
        conversation_id: ConversationId,
        message_id: MessageId,
    },
    AckDelivered {
        conversation_id: ConversationId,
        seq: u64,
    },
    AckRead {
        conversation_id: ConversationId,
        seq: u64,
        /// With a thread's root (v1.1): `seq` is read within that thread
        /// only, the conversation's own read mark does not move.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread_id: Option<MessageId>,
    },
    /// Adds or removes the sender's reaction to a message (v1.1);
    /// idempotent per user, message and emoji.
    React {
        conversation_id: ConversationId,
        message_id: MessageId,
        /// 1 to 32 characters.
        emoji: String,
        action: ReactAction,
    },
    /// Replaces the sender's vote in a poll (v1.3): the option ids they
    /// choose now, in any order; empty retracts the vote. Idempotent.
    Vote {
        conversation_id: ConversationId,
        message_id: MessageId,
        option_ids: Vec<String>,
    },
    Typing {
        conversation_id: ConversationId,
        state: TypingState,
    },
    PullBacklog {
        #[serde(default)]
        conversation_id: Option<ConversationId>,
        #[serde(default)]
        since_seq: Option<u64>,
        #[serde(default)]
        limit: Option<u32>,
    },
    Ping {},
    /// A fresh token for this session (an addition to the base protocol): the
    /// session then lives until the new token's `exp`. It must name the
    /// same tenant, user and device.
    Refresh {
        token: String,
    },
}

/// The `type` of each client frame, named once: the frames' serde tags,
/// `ClientFrame::type_name`, and the `request_type` of errors and
/// rejections all use these.
pub mod request_type {
    pub const SEND_MESSAGE: &str = "send_message";
    pub const EDIT_MESSAGE: &str = "edit_message";
    pub const DELETE_MESSAGE: &str = "delete_message";
    pub const ACK_DELIVERED: &str = "ack_delivered";
    pub const ACK_READ: &str = "ack_read";
    pub const TYPING: &str = "typing";
    pub const PULL_BACKLOG: &str = "pull_backlog";
    pub const PING: &str = "ping";
    pub const REFRESH: &str = "refresh";
    pub const REACT: &str = "react";
    pub const VOTE: &str = "vote";

    /// Every client frame type.
    pub const ALL: &[&str] = &[
        SEND_MESSAGE,
        EDIT_MESSAGE,
        DELETE_MESSAGE,
        ACK_DELIVERED,
        ACK_READ,
        TYPING,
        PULL_BACKLOG,
        PING,
        REFRESH,
        REACT,
        VOTE,
    ];
}

impl ClientFrame {
    /// A `send_message` of `content` alone: no reply, thread or mentions.
    pub fn send_message(
        client_msg_id: ClientMsgId,
        conversation_id: ConversationId,
        content: Content,
    ) -> Self {
        Self::SendMessage {
            client_msg_id,
            conversation_id,
            content,
            reply_to: None,
            thread_id: None,
            mentions: Vec::new(),
            mention_all: false,
            send_at: None,
            custom: None,
            previews: None,
        }
    }

    pub fn type_name(&self) -> &'static str {
        use request_type::*;
        match self {
            Self::SendMessage { .. } => SEND_MESSAGE,
            Self::EditMessage { .. } => EDIT_MESSAGE,
            Self::DeleteMessage { .. } => DELETE_MESSAGE,
            Self::AckDelivered { .. } => ACK_DELIVERED,
            Self::AckRead { .. } => ACK_READ,
            Self::Typing { .. } => TYPING,
            Self::PullBacklog { .. } => PULL_BACKLOG,
            Self::Ping {} => PING,
            Self::Refresh { .. } => REFRESH,
            Self::React { .. } => REACT,
            Self::Vote { .. } => VOTE,
        }
    }

    /// Parses one text frame. A failure carries what could be recovered of
    /// the request (its type, `client_msg_id`, `conversation_id`) so the
    /// `error` frame can say which request it answers.
    pub fn parse(text: &str) -> Result<Self, FrameError> {
        serde_json::from_str(text).map_err(|e| FrameError::describe(text, &e))
    }
}

/// Why a client frame could not be parsed, with the request fields it had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    pub message: String,
    pub request_type: Option<String>,
    pub client_msg_id: Option<String>,
    pub conversation_id: Option<String>,
}

impl FrameError {
    fn describe(text: &str, err: &serde_json::Error) -> Self {
        let Ok(serde_json::Value::Object(obj)) = serde_json::from_str::<serde_json::Value>(text)
        else {
            return Self {
                message: if err.is_syntax() || err.is_eof() {
                    format!("frame is not valid JSON: {err}")
                } else {
                    "frame must be a JSON object with a \"type\"".to_owned()
                },
                request_type: None,
                client_msg_id: None,
                conversation_id: None,
            };
        };
        let field = |name: &str| {
            obj.get(name)
                .and_then(|v| v.as_str())
                .map(|s| s.chars().take(128).collect::<String>())
        };
        let request_type = field("type");
        let message = match &request_type {
            None => "frame has no string \"type\"".to_owned(),
            Some(t) if !request_type::ALL.contains(&t.as_str()) => {
                format!("unknown frame type {t:?}")
            }
            Some(t) => format!("invalid {t} frame: {err}"),
        };
        Self {
            message,
            request_type,
            client_msg_id: field("client_msg_id"),
            conversation_id: field("conversation_id"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PresenceStatus {
    Online,
    Offline,
}

/// Body of `GET /v1/users/{user}/presence` (an addition to the base protocol).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PresenceInfo {
    pub user_id: UserId,
    pub status: PresenceStatus,
    /// Now while online; when the user was last connected otherwise; null
    /// if never.
    pub last_seen: Option<Timestamp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum TypingState {
    Start,
    Stop,
}

/// Which high-water mark a `receipt` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReceiptKind {
    /// Some device of the user has everything up to `seq`.
    Delivered,
    /// The user has read everything up to `seq`.
    Read,
}

/// The `type` of every server frame, named once (the metrics' static
/// labels and the schema's test use it).
pub const SERVER_FRAME_TYPES: &[&str] = &[
    "ack",
    "message",
    "message_updated",
    "receipt",
    "typing",
    "presence",
    "backlog_done",
    "error",
    "pong",
    "refreshed",
    "prekeys_low",
    "reaction",
    "poll_updated",
    "pins_changed",
    "settings_changed",
    "blocks_changed",
    "profile_updated",
];

/// Frames the server sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// A send's answer: what became of it.
    Ack(SendAck),
    Message {
        message: Message,
    },
    /// An edit or a deletion: the message as it is now.
    MessageUpdated {
        message: Message,
    },
    /// Another member's high-water mark moved.
    Receipt {
        conversation_id: ConversationId,
        user_id: UserId,
        kind: ReceiptKind,
        seq: u64,
    },
    /// Another member is typing. A `start` holds for `expires_in_ms`
    /// unless refreshed (an addition to the base protocol).
    Typing {
        conversation_id: ConversationId,
        user_id: UserId,
        state: TypingState,
        expires_in_ms: u64,
    },
    /// A contact came online or went offline.
    Presence {
        user_id: UserId,
        status: PresenceStatus,
        last_seen: Option<Timestamp>,
    },
    BacklogDone {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation_id: Option<ConversationId>,
        /// With a conversation: the highest `seq` replayed (or `since_seq`
        /// when there was nothing). Across conversations: 0; see `more`.
        last_seq: u64,
        /// Whether the `limit` cut the replay short (an addition to
        /// the base protocol): pull again to get the rest.
        #[serde(default)]
        more: bool,
    },
    Error {
        code: ErrorCode,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_msg_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation_id: Option<String>,
        /// The message the refused request named (an edit, a delete, a
        /// reaction; an addition to the base protocol).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// With `rate_limited` from slow mode (v1.2): how long until a
        /// send may go.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
    Pong {},
    /// The answer to `refresh` (an addition to the base protocol): the session
    /// now lives until `expires_at` (the new token's `exp`).
    Refreshed {
        expires_at: Timestamp,
    },
    /// An addition to the base protocol (F17): one of the user's devices has few
    /// unclaimed one-time prekeys left (or none); that device should
    /// upload more (`PUT /v1/devices/{device}/keys`). Sent to every
    /// connection of the user; the device named acts on it.
    PrekeysLow {
        device_id: DeviceId,
        remaining: usize,
    },
    /// A member's reaction to a message was added or removed (v1.1);
    /// `counts` are the message's reactions after it. In a conversation
    /// that fans out on read, members may get one per message per moment:
    /// the latest reaction, with the counts after all of them.
    Reaction {
        conversation_id: ConversationId,
        message_id: MessageId,
        user_id: UserId,
        emoji: String,
        action: ReactAction,
        counts: BTreeMap<String, u64>,
    },
    /// A poll's results changed (v1.3): a vote, or its closing. `voters`
    /// (each option's latest, at most 100) unless the poll is anonymous.
    /// In a conversation that fans out on read, members may get one per
    /// poll per moment, with the results after every vote of it.
    PollUpdated {
        conversation_id: ConversationId,
        message_id: MessageId,
        counts: BTreeMap<String, u64>,
        closed: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        voters: Option<BTreeMap<String, Vec<UserId>>>,
    },
    /// A message was pinned or unpinned (v1.1).
    PinsChanged {
        conversation_id: ConversationId,
        message_id: MessageId,
        action: PinAction,
        by: UserId,
    },
    /// The user's own settings of a conversation changed (an addition to
    /// the base protocol, for their other devices).
    SettingsChanged {
        conversation_id: ConversationId,
        notifications: NotificationLevel,
        muted_until: Option<Timestamp>,
    },
    /// The user blocked or unblocked `user_id` (v1.2; the event's name is
    /// an addition to the base protocol), for all of their devices.
    BlocksChanged {
        user_id: UserId,
        action: crate::safety::BlockAction,
    },
    /// A user's profile changed (v1.3), for everyone who shares a
    /// conversation with them and for their own devices.
    ProfileUpdated {
        profile: crate::profile::Profile,
    },
}

/// What a `pins_changed` event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PinAction {
    Pin,
    Unpin,
}

/// What became of a send: the `ack` frame a socket gets, and the answer
/// of a REST send (`PostedMessage`), one type for every way a send comes
/// in. A `sent` ack names the stored message; a `scheduled` one (v1.2)
/// names the schedule instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend(
        "if" = {"properties": {"status": {"const": "scheduled"}}},
        "then" = {"required": ["scheduled_id", "send_at"]},
        "else" = {"required": ["message_id", "seq"], "properties": {"status": {"const": "sent"}}}
    ))
)]
pub struct SendAck {
    pub client_msg_id: ClientMsgId,
    pub conversation_id: ConversationId,
    /// The stored message's id: present when `status` is `"sent"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<MessageId>,
    /// The stored message's `seq`: present when `status` is `"sent"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// `"sent"`: stored. `"scheduled"` (v1.2): a send with `send_at`,
    /// kept until then; it gets its `message_id` and `seq` when sent.
    pub status: AckStatus,
    /// What was stored, only when it differs from what was sent (a
    /// moderation plugin rewrote it, or the tenant's word list masked
    /// it): the sender shows this instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// With `"scheduled"`: the id that lists and cancels it
    /// (`/v1/scheduled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_id: Option<String>,
    /// With `"scheduled"`: when it will be sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_at: Option<Timestamp>,
}

/// What an `ack` says became of a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum AckStatus {
    /// Stored, with its `message_id` and `seq`.
    Sent,
    /// Kept until its `send_at` (v1.2).
    Scheduled,
}

impl ServerFrame {
    pub fn ack(message: &Message) -> Self {
        Self::Ack(SendAck {
            client_msg_id: message.client_msg_id.clone(),
            conversation_id: message.conversation_id.clone(),
            message_id: Some(message.message_id),
            seq: Some(message.seq),
            status: AckStatus::Sent,
            content: None,
            scheduled_id: None,
            send_at: None,
        })
    }

    /// The `ack` of a send kept until `send_at` (v1.2).
    pub fn scheduled(
        client_msg_id: ClientMsgId,
        conversation_id: ConversationId,
        scheduled_id: String,
        send_at: Timestamp,
    ) -> Self {
        Self::Ack(SendAck {
            client_msg_id,
            conversation_id,
            message_id: None,
            seq: None,
            status: AckStatus::Scheduled,
            content: None,
            scheduled_id: Some(scheduled_id),
            send_at: Some(send_at),
        })
    }

    /// The `ack` of a send whose stored content is not what its sender
    /// sent: it carries the stored content.
    pub fn ack_showing_content(message: &Message) -> Self {
        let mut ack = Self::ack(message);
        if let Self::Ack(SendAck { content, .. }) = &mut ack {
            content.clone_from(&message.content);
        }
        ack
    }

    /// This frame, if an `ack`, carrying `stored` as the content stored
    /// (the writer builds its `ack` without content: it never sees what
    /// was sent, only what was stored); any other frame unchanged.
    pub fn showing_stored(mut self, stored: Content) -> Self {
        if let Self::Ack(SendAck { content, .. }) = &mut self {
            *content = Some(stored);
        }
        self
    }

    /// The send's answer, if this is an `ack`.
    pub fn into_ack(self) -> Option<SendAck> {
        match self {
            Self::Ack(ack) => Some(ack),
            _ => None,
        }
    }

    /// An `error` that answers no request in particular.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::error_answering(code, message, None, None, None)
    }

    /// An `error` that answers a request: its `type`, and the send or
    /// conversation it names. Every `error` frame is built here.
    pub fn error_answering(
        code: ErrorCode,
        message: impl Into<String>,
        request_type: Option<&str>,
        client_msg_id: Option<&str>,
        conversation_id: Option<&str>,
    ) -> Self {
        Self::Error {
            code,
            message: message.into(),
            request_type: request_type.map(str::to_owned),
            client_msg_id: client_msg_id.map(str::to_owned),
            conversation_id: conversation_id.map(str::to_owned),
            message_id: None,
            retry_after_ms: None,
        }
    }

    /// This frame, if an `error`, saying when to try again.
    pub fn retry_after(mut self, ms: Option<u64>) -> Self {
        if let Self::Error { retry_after_ms, .. } = &mut self {
            *retry_after_ms = ms;
        }
        self
    }

    /// This frame, if an `error`, naming the message its request named.
    pub fn about_message(mut self, id: MessageId) -> Self {
        if let Self::Error { message_id, .. } = &mut self {
            *message_id = Some(id.to_string());
        }
        self
    }

    pub fn to_json(&self) -> String {
        // Serializing these types cannot fail: no maps with non-string keys,
        // no custom serializers that error.
        serde_json::to_string(self).unwrap_or_else(|_| {
            r#"{"type":"error","code":"internal","message":"frame encoding failed"}"#.to_owned()
        })
    }
}

/// A `message` frame around a message object that is already JSON, so a
/// message fanned out to many connections is serialized once.
pub fn message_frame_from_json(message_json: &str) -> String {
    let mut s = String::with_capacity(message_json.len() + 30);
    s.push_str(r#"{"type":"message","message":"#);
    s.push_str(message_json);
    s.push('}');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every named type is a frame the parser knows: a frame of that type
    /// with nothing else in it is refused for its fields, not its type.
    #[test]
    fn every_request_type_is_a_client_frame() {
        for t in request_type::ALL {
            match ClientFrame::parse(&format!(r#"{{"type":"{t}"}}"#)) {
                Ok(frame) => assert_eq!(frame.type_name(), *t),
                Err(e) => assert!(!e.message.starts_with("unknown frame type"), "{t}: {e:?}"),
            }
        }
    }

    #[test]
    fn parses_client_frames() {
        let f = ClientFrame::parse(
            r#"{"type":"send_message","client_msg_id":"c1","conversation_id":"k","content":{"kind":"text","text":"hi"}}"#,
        )
        .unwrap();
        assert_eq!(f.type_name(), "send_message");
        assert_eq!(
            ClientFrame::parse(r#"{"type":"ping"}"#).unwrap(),
            ClientFrame::Ping {}
        );
        let pull = ClientFrame::parse(r#"{"type":"pull_backlog"}"#).unwrap();
        assert!(matches!(
            pull,
            ClientFrame::PullBacklog {
                conversation_id: None,
                ..
            }
        ));
    }

    #[test]
    fn describes_bad_frames_with_the_fields_it_can_recover() {
        let e = ClientFrame::parse("{not json").unwrap_err();
        assert!(e.message.contains("not valid JSON"), "{}", e.message);

        let e = ClientFrame::parse(r#"{"type":"teleport","conversation_id":"k"}"#).unwrap_err();
        assert_eq!(e.message, "unknown frame type \"teleport\"");
        assert_eq!(e.conversation_id.as_deref(), Some("k"));

        let e = ClientFrame::parse(r#"{"type":"send_message","client_msg_id":"c9"}"#).unwrap_err();
        assert!(e.message.contains("missing field"), "{}", e.message);
        assert_eq!(e.client_msg_id.as_deref(), Some("c9"));

        let e = ClientFrame::parse("[1,2]").unwrap_err();
        assert!(e.request_type.is_none());
    }

    #[test]
    fn server_frames_match_the_protocol() {
        let json = ServerFrame::Pong {}.to_json();
        assert_eq!(json, r#"{"type":"pong"}"#);
        let err = ServerFrame::error(ErrorCode::NotAMember, "no").to_json();
        assert_eq!(
            err,
            r#"{"type":"error","code":"not_a_member","message":"no"}"#
        );
        assert_eq!(
            message_frame_from_json(r#"{"seq":1}"#),
            r#"{"type":"message","message":{"seq":1}}"#
        );
    }
}
