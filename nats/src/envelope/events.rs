//! Events to users' connections: what each kind carries, how a writer,
//! the presence notifier or a worker duty encodes one (headers naming its
//! kind and origin, the ready frame as payload), and how a gateway reads
//! it back. Deliveries, which carry several to one gateway, are the
//! parent's.

use async_nats::HeaderMap;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use switchboard_protocol::frames::message_frame_from_json;
use switchboard_protocol::safety::BlockAction;
use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, DeviceId, ErrorCode, Message, MessageId, UserId,
};

use crate::BackboneError;

/// Header naming the kind of a user event: `message` or `rejected`.
pub const HEADER_EVENT: &str = "Sb-Event";
/// Headers of `message` events: the user and device that sent the
/// message. That one device gets an `ack` where every other connection
/// gets a `message`.
pub const HEADER_ORIGIN_USER: &str = "Sb-Origin-User";
pub const HEADER_ORIGIN_DEVICE: &str = "Sb-Origin-Device";
/// Header of a `frame` event on a conversation's subject whose frame
/// carries the whole state of something (a message's reaction counts):
/// a later frame with the same value supersedes it, so a gateway may
/// deliver only the latest of those that arrive within its window.
pub const HEADER_SUPERSEDES: &str = "Sb-Supersedes";

/// A command the writer refused, for the device that sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub device: DeviceId,
    /// The client frame it answers: `send_message`, `edit_message`, ...
    pub request_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_msg_id: Option<ClientMsgId>,
    pub conversation_id: ConversationId,
    pub code: ErrorCode,
    pub message: String,
    /// The message the refused command named (an edit, a delete, a
    /// reaction), for the error frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<MessageId>,
    /// With `rate_limited` (slow mode): when to try again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

/// An event for a user's connections.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A server frame (a receipt, say) for every connection of the user.
    Frame(Bytes),
    /// For the gateway, not the client: start (or stop) listening to the
    /// conversation's own subject on the user's behalf, because it fans out
    /// on read (or no longer does, or the user left it).
    Listen {
        conversation_id: ConversationId,
        listen: bool,
    },
    /// A stored message: `frame` is the ready `message` frame, for every
    /// connection of the users it names but its sending device, which
    /// gets an [`Event::Ack`].
    Message {
        frame: Bytes,
        origin_user: String,
        origin_device: String,
    },
    /// A stored send's answer, for the device that sent it: `frame` is the
    /// ready `ack` frame ([`ServerFrame::ack`]), built once by the writer.
    Ack {
        frame: Bytes,
        device: String,
        client_msg_id: ClientMsgId,
    },
    Rejected(Rejection),
    /// A `blocks_changed` frame for every connection of the user, who
    /// now blocks (`blocked`) `user_id` or no longer does: the gateway
    /// marks that user's messages for them from now on.
    Blocks {
        frame: Bytes,
        user_id: UserId,
        blocked: bool,
    },
    /// For the gateway: close every connection of the user, for the
    /// reason given (each reason has its WebSocket close code).
    EndSessions(SessionsEnd),
}

/// Why a user's sessions are ended by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionsEnd {
    /// The user was erased (v1.2): nothing of theirs is left to serve.
    Erased,
}

#[derive(Serialize, Deserialize)]
struct EndSessionsBody {
    reason: SessionsEnd,
}

/// Tells a user's gateways to close every connection of the user.
pub fn end_sessions_event(reason: SessionsEnd) -> Result<(HeaderMap, Bytes), BackboneError> {
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_EVENT, "end_sessions");
    let payload =
        serde_json::to_vec(&EndSessionsBody { reason }).map_err(BackboneError::encoding)?;
    Ok((headers, Bytes::from(payload)))
}

/// The `ack` of a stored message, for its sending device: a new send's
/// and a resend's alike (a resend gets nothing else: no member sees the
/// message twice).
///
/// [`ServerFrame::ack`]: switchboard_protocol::ServerFrame::ack
pub fn ack_event(message: &Message) -> (HeaderMap, Bytes) {
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_EVENT, "ack");
    headers.insert(HEADER_ORIGIN_USER, message.sender_id.as_str());
    headers.insert(HEADER_ORIGIN_DEVICE, message.sender_device.as_str());
    let frame = switchboard_protocol::ServerFrame::ack(message).to_json();
    (headers, Bytes::from(frame))
}

/// What the hub needs of a `blocks_changed` frame besides the frame.
#[derive(Deserialize)]
struct BlocksBody {
    user_id: UserId,
    action: BlockAction,
}

/// What the hub needs of an `ack` frame besides the frame itself.
#[derive(Deserialize)]
struct AckFields {
    client_msg_id: ClientMsgId,
}

/// Encodes a stored message once for every member it is fanned out to.
/// A message a device sent names that device as its origin: it gets the
/// message's [`ack_event`] instead. A system message (a membership
/// change) has no origin: every device gets it, its actor's too.
pub fn message_event(message: &Message) -> Result<(HeaderMap, Bytes), BackboneError> {
    let json = serde_json::to_string(message).map_err(BackboneError::encoding)?;
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_EVENT, "message");
    if is_acked(message) {
        headers.insert(HEADER_ORIGIN_USER, message.sender_id.as_str());
        headers.insert(HEADER_ORIGIN_DEVICE, message.sender_device.as_str());
    }
    Ok((headers, Bytes::from(message_frame_from_json(&json))))
}

/// Whether a stored message answers a device's send with an `ack`: every
/// message but the system messages the writer makes itself.
pub fn is_acked(message: &Message) -> bool {
    !matches!(message.content, Some(Content::System(_)))
}

/// A server frame to forward as it is to every connection of a user. A
/// `blocks_changed` is of its own kind, since the gateway acts on it too.
pub fn frame_event(frame: &switchboard_protocol::ServerFrame) -> (HeaderMap, Bytes) {
    let mut headers = HeaderMap::new();
    let kind = match frame {
        switchboard_protocol::ServerFrame::BlocksChanged { .. } => "blocks",
        _ => "frame",
    };
    headers.insert(HEADER_EVENT, kind);
    (headers, Bytes::from(frame.to_json()))
}

/// What a frame is the latest state of, where a later one with the same
/// key makes it stale ([`HEADER_SUPERSEDES`]): a `reaction` or
/// `poll_updated` event carries every count of its message, so only the
/// newest of a burst matters.
pub fn supersedes_key(frame: &switchboard_protocol::ServerFrame) -> Option<String> {
    match frame {
        switchboard_protocol::ServerFrame::Reaction { message_id, .. } => {
            Some(format!("reaction:{message_id}"))
        }
        switchboard_protocol::ServerFrame::PollUpdated { message_id, .. } => {
            Some(format!("poll:{message_id}"))
        }
        switchboard_protocol::ServerFrame::ProfileUpdated { profile } => {
            Some(format!("profile:{}", profile.user_id))
        }
        _ => None,
    }
}

/// [`frame_event`] for a conversation's subject: marked with its
/// [`supersedes_key`] where it has one.
pub fn conversation_frame_event(frame: &switchboard_protocol::ServerFrame) -> (HeaderMap, Bytes) {
    let (mut headers, payload) = frame_event(frame);
    if let Some(key) = supersedes_key(frame) {
        headers.insert(HEADER_SUPERSEDES, key.as_str());
    }
    (headers, payload)
}

#[derive(Serialize, Deserialize)]
struct ListenBody {
    conversation_id: ConversationId,
    listen: bool,
}

/// Tells a user's gateways to (stop) listen(ing) to a conversation subject.
pub fn listen_event(
    conversation_id: &ConversationId,
    listen: bool,
) -> Result<(HeaderMap, Bytes), BackboneError> {
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_EVENT, "listen");
    let body = ListenBody {
        conversation_id: conversation_id.clone(),
        listen,
    };
    let payload = serde_json::to_vec(&body).map_err(BackboneError::encoding)?;
    Ok((headers, Bytes::from(payload)))
}

pub fn rejection_event(r: &Rejection) -> Result<(HeaderMap, Bytes), BackboneError> {
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_EVENT, "rejected");
    let payload = serde_json::to_vec(r).map_err(BackboneError::encoding)?;
    Ok((headers, Bytes::from(payload)))
}

/// An event published on its own (a conversation's subject): its kind
/// and origin are headers.
pub fn decode_event(msg: &async_nats::Message) -> Result<Event, BackboneError> {
    let header = |name: &str| {
        msg.headers
            .as_ref()
            .and_then(|h| h.get(name))
            .map(|v| v.as_str())
    };
    event_from(
        header(HEADER_EVENT),
        header(HEADER_ORIGIN_USER),
        header(HEADER_ORIGIN_DEVICE),
        msg.payload.clone(),
    )
}

/// The event a message with these headers and payload carries: what
/// [`decode_event`] reads, without the NATS message around it.
pub fn event_from(
    kind: Option<&str>,
    origin_user: Option<&str>,
    origin_device: Option<&str>,
    payload: Bytes,
) -> Result<Event, BackboneError> {
    match kind {
        Some("message") => Ok(Event::Message {
            frame: payload,
            origin_user: origin_user.unwrap_or_default().to_owned(),
            origin_device: origin_device.unwrap_or_default().to_owned(),
        }),
        Some("frame") => Ok(Event::Frame(payload)),
        Some("ack") => serde_json::from_slice::<AckFields>(&payload)
            .map(|fields| Event::Ack {
                device: origin_device.unwrap_or_default().to_owned(),
                client_msg_id: fields.client_msg_id,
                frame: payload,
            })
            .map_err(BackboneError::encoding),
        Some("listen") => serde_json::from_slice::<ListenBody>(&payload)
            .map(|b| Event::Listen {
                conversation_id: b.conversation_id,
                listen: b.listen,
            })
            .map_err(BackboneError::encoding),
        Some("rejected") => serde_json::from_slice(&payload)
            .map(Event::Rejected)
            .map_err(BackboneError::encoding),
        Some("blocks") => serde_json::from_slice::<BlocksBody>(&payload)
            .map(|b| Event::Blocks {
                user_id: b.user_id,
                blocked: b.action == BlockAction::Block,
                frame: payload,
            })
            .map_err(BackboneError::encoding),
        Some("end_sessions") => serde_json::from_slice::<EndSessionsBody>(&payload)
            .map(|b| Event::EndSessions(b.reason))
            .map_err(BackboneError::encoding),
        other => Err(BackboneError::UnknownEvent {
            kind: other.map(str::to_owned),
        }),
    }
}
