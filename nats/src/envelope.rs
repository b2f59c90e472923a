//! What travels on the backbone: commands from gateways to writers (on
//! `SB_INGEST`), replies to REST commands, and events to users'
//! connections. JSON, so an operator can read them with `nats stream view`
//! and `nats sub`.

use std::borrow::Cow;
use std::fmt::Write as _;

use async_nats::HeaderMap;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, ConversationKind, DeviceId, ErrorCode, Message,
    MessageId, TenantId, Timestamp, UserId,
};

use crate::BackboneError;

mod actions;
mod events;
pub use actions::*;
pub use events::*;

/// Header naming the subject a command's outcome is published to.
pub const HEADER_REPLY: &str = "Sb-Reply";
/// Header of a maintenance request on the ingest stream (its value names
/// the kind; the payload is not a [`Command`]). `archive` asks the
/// conversation's writer to move one bucket to the archive (F14), so that
/// the move is ordered with the conversation's edits.
pub const HEADER_MAINTENANCE: &str = "Sb-Maintenance";

/// Header of an ingest message that carries several sends (its value is
/// how many, for operators; a writer reads only that it is there). The
/// payload is their commands, each encoded as alone, one per line: JSON
/// never holds a raw newline, and a line that does not decode costs only
/// itself. Such a message has no `Nats-Msg-Id`: JetStream cannot drop a
/// retried send inside it, and the store's idempotency keys do (the
/// writer answers the retry with the original).
pub const HEADER_COMMANDS: &str = "Sb-Commands";

/// The payload of a message of several commands, from each command's
/// encoding ([`Command::encode`]).
pub fn encode_commands<'a>(encoded: impl IntoIterator<Item = &'a Bytes>) -> Bytes {
    let mut out = Vec::new();
    for (i, command) in encoded.into_iter().enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(command);
    }
    Bytes::from(out)
}

/// The encoded commands of a message of several ([`encode_commands`]),
/// each a slice of `payload`.
pub fn command_lines(payload: &Bytes) -> impl Iterator<Item = Bytes> + '_ {
    payload
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| payload.slice_ref(line))
}

/// A command for the writer of one conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    Send(SendCommand),
    CreateConversation(CreateConversationCommand),
    AddMembers(MembersCommand),
    RemoveMembers(MembersCommand),
    Edit(UpdateCommand),
    Delete(UpdateCommand),
    /// v1.1: a member's role changes.
    SetRole(RoleCommand),
    /// v1.1: a member's own settings of the conversation change.
    Settings(SettingsCommand),
    /// v1.1: a reaction is added or removed.
    React(ReactCommand),
    /// v1.3: a member's vote in a poll is replaced.
    Vote(VoteCommand),
    /// v1.3: a poll is closed by hand.
    ClosePoll(PinCommand),
    /// v1.3: a message's link previews, unfurled by the previews stage.
    Previews(PreviewsCommand),
    /// v1.1: a message is pinned, or unpinned.
    Pin(PinCommand),
    Unpin(PinCommand),
    /// v1.2: the actor blocks or unblocks a user. Its conversation is the
    /// pair's direct one ([`direct_conversation_id`]), existing or not, so
    /// that the writer that keeps the two apart is the one that records it.
    Block(BlockCommand),
    /// v1.2: a user is kept out of a conversation, or let back in.
    Ban(BanCommand),
    Unban(BanCommand),
    /// v1.3: a member may no longer post, react or reply (until
    /// `until`), or may again.
    Mute(BanCommand),
    Unmute(BanCommand),
    /// v1.2: settings that affect every member change.
    SetPolicy(PolicyCommand),
    /// v1.2: a message is reported, or a report resolved.
    Report(ReportCommand),
    ResolveReport(ResolveCommand),
    /// v1.3: a user's profile changes.
    Profile(ProfileCommand),
    /// v1.3: a user joins by themselves (a public channel, or an invite).
    Join(JoinCommand),
    /// v1.3: an invite is made or revoked.
    Invite(InviteCommand),
}

/// An edit (with `content`) or a deletion (without) of one message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateCommand {
    pub command_id: MessageId,
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
    pub actor: UserId,
    pub device: DeviceId,
    pub actor_is_admin: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// An edit's new `custom` fields (v1.3): absent keeps the message's,
    /// an object replaces them (`{}` removes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendCommand {
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub sender: UserId,
    pub device: DeviceId,
    pub client_msg_id: ClientMsgId,
    pub content: Content,
    pub received_at: Timestamp,
    /// Reply, thread and mentions (v1.1); absent in commands of earlier
    /// gateways.
    #[serde(default, skip_serializing_if = "SendOptions::is_empty")]
    pub options: SendOptions,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateConversationCommand {
    /// Unique per command; also the idempotency key of the system message.
    pub command_id: MessageId,
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub kind: ConversationKind,
    pub title: Option<String>,
    /// Every member, the actor included.
    pub members: Vec<UserId>,
    pub actor: UserId,
    pub device: DeviceId,
    /// Whether the actor has the tenant's admin role: admins are not held
    /// to the unsolicited-groups limit. Absent from older gateways' commands.
    #[serde(default)]
    pub actor_is_admin: bool,
    pub at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembersCommand {
    pub command_id: MessageId,
    pub tenant: TenantId,
    pub conversation_id: ConversationId,
    pub users: Vec<UserId>,
    pub actor: UserId,
    pub device: DeviceId,
    /// Whether the actor has the tenant's admin role.
    pub actor_is_admin: bool,
    pub at: Timestamp,
}

impl Command {
    pub fn tenant(&self) -> &TenantId {
        match self {
            Self::Send(c) => &c.tenant,
            Self::CreateConversation(c) => &c.tenant,
            Self::AddMembers(c) | Self::RemoveMembers(c) => &c.tenant,
            Self::Edit(c) | Self::Delete(c) => &c.tenant,
            Self::SetRole(c) => &c.by.tenant,
            Self::Settings(c) => &c.by.tenant,
            Self::React(c) => &c.by.tenant,
            Self::Vote(c) => &c.by.tenant,
            Self::ClosePoll(c) => &c.by.tenant,
            Self::Previews(c) => &c.tenant,
            Self::Pin(c) | Self::Unpin(c) => &c.by.tenant,
            Self::Block(c) => &c.by.tenant,
            Self::Ban(c) | Self::Unban(c) | Self::Mute(c) | Self::Unmute(c) => &c.by.tenant,
            Self::SetPolicy(c) => &c.by.tenant,
            Self::Report(c) => &c.by.tenant,
            Self::ResolveReport(c) => &c.by.tenant,
            Self::Profile(c) => &c.by.tenant,
            Self::Join(c) => &c.by.tenant,
            Self::Invite(c) => &c.by.tenant,
        }
    }

    /// Who does a v1.1 command.
    pub fn actor(&self) -> Option<&Actor> {
        match self {
            Self::SetRole(c) => Some(&c.by),
            Self::Settings(c) => Some(&c.by),
            Self::React(c) => Some(&c.by),
            Self::Vote(c) => Some(&c.by),
            Self::ClosePoll(c) => Some(&c.by),
            Self::Pin(c) | Self::Unpin(c) => Some(&c.by),
            Self::Block(c) => Some(&c.by),
            Self::Ban(c) | Self::Unban(c) | Self::Mute(c) | Self::Unmute(c) => Some(&c.by),
            Self::SetPolicy(c) => Some(&c.by),
            Self::Report(c) => Some(&c.by),
            Self::ResolveReport(c) => Some(&c.by),
            Self::Profile(c) => Some(&c.by),
            Self::Join(c) => Some(&c.by),
            Self::Invite(c) => Some(&c.by),
            _ => None,
        }
    }

    pub fn conversation_id(&self) -> &ConversationId {
        match self {
            Self::Send(c) => &c.conversation_id,
            Self::CreateConversation(c) => &c.conversation_id,
            Self::AddMembers(c) | Self::RemoveMembers(c) => &c.conversation_id,
            Self::Edit(c) | Self::Delete(c) => &c.conversation_id,
            Self::SetRole(c) => &c.by.conversation_id,
            Self::Settings(c) => &c.by.conversation_id,
            Self::React(c) => &c.by.conversation_id,
            Self::Vote(c) => &c.by.conversation_id,
            Self::ClosePoll(c) => &c.by.conversation_id,
            Self::Previews(c) => &c.conversation_id,
            Self::Pin(c) | Self::Unpin(c) => &c.by.conversation_id,
            Self::Block(c) => &c.by.conversation_id,
            Self::Ban(c) | Self::Unban(c) | Self::Mute(c) | Self::Unmute(c) => {
                &c.by.conversation_id
            }
            Self::SetPolicy(c) => &c.by.conversation_id,
            Self::Report(c) => &c.by.conversation_id,
            Self::ResolveReport(c) => &c.by.conversation_id,
            Self::Profile(c) => &c.by.conversation_id,
            Self::Join(c) => &c.by.conversation_id,
            Self::Invite(c) => &c.by.conversation_id,
        }
    }

    /// The `Nats-Msg-Id` JetStream deduplicates on: for a send, a digest
    /// of (tenant, conversation, sender, `client_msg_id`), the idempotency
    /// key of docs/protocol.md; for other commands their unique id.
    pub fn dedupe_id(&self) -> String {
        match self {
            Self::Send(c) => {
                send_dedupe_id(&c.tenant, &c.conversation_id, &c.sender, &c.client_msg_id)
            }
            Self::CreateConversation(c) => format!("cmd-{}", c.command_id),
            Self::AddMembers(c) | Self::RemoveMembers(c) => format!("cmd-{}", c.command_id),
            Self::Edit(c) | Self::Delete(c) => format!("cmd-{}", c.command_id),
            // One unfurling per message: a job handled twice (redelivered
            // after a crash) is one command.
            Self::Previews(c) => format!("previews-{}", c.message_id),
            Self::SetRole(_)
            | Self::Settings(_)
            | Self::React(_)
            | Self::Vote(_)
            | Self::ClosePoll(_)
            | Self::Pin(_)
            | Self::Unpin(_)
            | Self::Block(_)
            | Self::Ban(_)
            | Self::Mute(_)
            | Self::Unmute(_)
            | Self::Unban(_)
            | Self::SetPolicy(_)
            | Self::Report(_)
            | Self::ResolveReport(_)
            | Self::Profile(_)
            | Self::Join(_)
            | Self::Invite(_) => match self.actor() {
                Some(a) => format!("cmd-{}", a.command_id),
                None => String::new(),
            },
        }
    }

    pub fn encode(&self) -> Result<Bytes, BackboneError> {
        serde_json::to_vec(self)
            .map(Bytes::from)
            .map_err(BackboneError::encoding)
    }

    pub fn decode(payload: &[u8]) -> Result<Self, BackboneError> {
        serde_json::from_slice(payload).map_err(BackboneError::encoding)
    }
}

/// A 128-bit digest (hex) of the send idempotency key. Short and fixed in
/// length, because JetStream keeps every id of the dedupe window in memory.
pub fn send_dedupe_id(
    tenant: &TenantId,
    conversation: &ConversationId,
    sender: &UserId,
    client_msg_id: &ClientMsgId,
) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [
        tenant.as_str(),
        conversation.as_str(),
        sender.as_str(),
        client_msg_id.as_str(),
    ] {
        // Length-prefixed, so ("ab","c") and ("a","bc") differ.
        ctx.update(&(part.len() as u32).to_be_bytes());
        ctx.update(part.as_bytes());
    }
    let digest = ctx.finish();
    let mut hex = String::with_capacity(34);
    hex.push_str("s-");
    for b in &digest.as_ref()[..16] {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// The id of the direct conversation between two users: the same whoever
/// creates it, so there is at most one per pair, and never the same for
/// two different pairs. Readable (`dm:alice:bob`) when neither user id
/// contains a `:` and it fits in 128 characters: then the one `:` after
/// `dm:` splits it unambiguously. Otherwise a digest of both ids, each
/// length-prefixed (`dm:` and 32 hex digits, with no second `:`, so it is
/// never a readable id). Before, `a:b` with `c` and `a` with `b:c` were
/// both `dm:a:b:c`.
pub fn direct_conversation_id(a: &UserId, b: &UserId) -> Option<ConversationId> {
    let (x, y) = if a <= b { (a, b) } else { (b, a) };
    let readable = format!("dm:{}:{}", x.as_str(), y.as_str());
    let unambiguous = !x.as_str().contains(':') && !y.as_str().contains(':');
    if unambiguous && readable.len() <= switchboard_protocol::ids::MAX_ID_LEN {
        return ConversationId::new(readable).ok();
    }
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [x.as_str(), y.as_str()] {
        ctx.update(&(part.len() as u32).to_be_bytes());
        ctx.update(part.as_bytes());
    }
    let mut id = String::from("dm:");
    for b in &ctx.finish().as_ref()[..16] {
        let _ = write!(id, "{b:02x}");
    }
    ConversationId::new(id).ok()
}

/// The outcome of a REST command, published to its `Sb-Reply` subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CommandReply {
    Done {
        conversation_id: ConversationId,
        /// False when the command found its effect already in place (a
        /// retried command, or an existing direct conversation).
        created: bool,
    },
    Refused {
        code: ErrorCode,
        message: String,
        /// With `rate_limited` (slow mode): when to try again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
    /// A send over REST was stored (now, or before: a retry): the
    /// message as stored, for its `ack` fields.
    Sent { message: Box<Message> },
}

/// Header of a delivery to a gateway (`sb.gw.<gateway>`): how many events
/// it carries, for operators (no reader sizes anything by it). Its
/// payload is, for each event, one line of JSON that addresses it
/// (tenant, users, kind, origin, and the length of its payload), then the
/// event's payload, then a newline. The payload is length-counted, so it
/// may hold anything; the addressing line is compact JSON, which never
/// holds a raw newline. A length is believed only where the payload holds
/// that many bytes and a newline after them ([`decode_delivery`]).
pub const HEADER_EVENTS: &str = "Sb-Events";

#[derive(Serialize, Deserialize)]
struct DeliveryHead<'a> {
    #[serde(borrow)]
    tenant: Cow<'a, str>,
    #[serde(borrow)]
    to: Vec<Cow<'a, str>>,
    #[serde(borrow)]
    event: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    origin_user: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    origin_device: Option<Cow<'a, str>>,
    /// The event's `traceparent` header (`crate::trace`).
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    traceparent: Option<Cow<'a, str>>,
    len: usize,
}

/// Appends one event, for the users `to` of `tenant`, to a delivery's
/// payload.
pub fn push_delivery<'a>(
    payload: &mut Vec<u8>,
    tenant: &TenantId,
    to: impl IntoIterator<Item = &'a UserId>,
    (headers, body): &(HeaderMap, Bytes),
) -> Result<(), BackboneError> {
    let header = |name: &str| headers.get(name).map(|v| Cow::Borrowed(v.as_str()));
    let head = DeliveryHead {
        tenant: Cow::Borrowed(tenant.as_str()),
        to: to.into_iter().map(|u| Cow::Borrowed(u.as_str())).collect(),
        event: header(HEADER_EVENT).unwrap_or_default(),
        origin_user: header(HEADER_ORIGIN_USER),
        origin_device: header(HEADER_ORIGIN_DEVICE),
        traceparent: header(crate::trace::HEADER_TRACEPARENT),
        len: body.len(),
    };
    serde_json::to_writer(&mut *payload, &head).map_err(BackboneError::encoding)?;
    payload.push(b'\n');
    payload.extend_from_slice(body);
    payload.push(b'\n');
    Ok(())
}

/// One event of a delivery, for some users of one tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivered {
    pub tenant: TenantId,
    pub to: Vec<UserId>,
    pub event: Event,
    /// The trace context of the message it comes from, if traced.
    pub traceparent: Option<String>,
}

/// The events of a delivery, in order. An event that does not decode
/// costs only itself; an addressing line that does not, the rest of the
/// delivery (nothing after it can be found).
pub fn decode_delivery(payload: &Bytes) -> impl Iterator<Item = Result<Delivered, BackboneError>> {
    let mut at = 0;
    let payload = payload.clone();
    std::iter::from_fn(move || {
        if at >= payload.len() {
            return None;
        }
        let next = next_delivered(&payload, at);
        match &next {
            Ok((_, end)) => at = *end,
            Err(_) => at = payload.len(),
        }
        Some(next.and_then(|(event, _)| event))
    })
}

/// The event at `at` (or why it does not decode), and where the next
/// one starts.
#[allow(clippy::type_complexity)]
fn next_delivered(
    payload: &Bytes,
    at: usize,
) -> Result<(Result<Delivered, BackboneError>, usize), BackboneError> {
    let rest = &payload[at..];
    let line_end =
        rest.iter()
            .position(|&b| b == b'\n')
            .ok_or(BackboneError::MalformedDelivery(
                "an addressing line without its end",
            ))?;
    let head: DeliveryHead<'_> =
        serde_json::from_slice(&rest[..line_end]).map_err(BackboneError::encoding)?;
    let body_start = at + line_end + 1;
    let body_end = body_start
        .checked_add(head.len)
        .filter(|&end| end < payload.len() && payload[end] == b'\n')
        .ok_or(BackboneError::MalformedDelivery(
            "an event that does not end where its length says",
        ))?;
    let body = payload.slice(body_start..body_end);
    let event = (|| {
        let tenant = TenantId::new(head.tenant.as_ref()).map_err(BackboneError::encoding)?;
        let to = head
            .to
            .iter()
            .map(|u| UserId::new(u.as_ref()).map_err(BackboneError::encoding))
            .collect::<Result<Vec<_>, _>>()?;
        let event = event_from(
            Some(head.event.as_ref()),
            head.origin_user.as_deref(),
            head.origin_device.as_deref(),
            body,
        )?;
        Ok(Delivered {
            tenant,
            to,
            event,
            traceparent: head.traceparent.map(Cow::into_owned),
        })
    })();
    Ok((event, body_end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_sent_together_come_apart_one_by_one() {
        let send = |text: &str| {
            Command::Send(SendCommand {
                tenant: TenantId::new("t").unwrap(),
                conversation_id: ConversationId::new("c").unwrap(),
                sender: UserId::new("u").unwrap(),
                device: DeviceId::new("d").unwrap(),
                client_msg_id: ClientMsgId::new(text).unwrap(),
                // A newline in the text is escaped, never a line break.
                content: Content::Text {
                    text: format!("{text}\nsecond line"),
                },
                received_at: Timestamp::from_unix_ms(1),
                options: Default::default(),
            })
        };
        let commands = [send("a"), send("b"), send("c")];
        let encoded: Vec<Bytes> = commands.iter().map(|c| c.encode().unwrap()).collect();
        let payload = encode_commands(&encoded);
        let back: Vec<Command> = command_lines(&payload)
            .map(|line| Command::decode(&line).unwrap())
            .collect();
        assert_eq!(back, commands);
        // A line that does not decode costs only itself.
        let payload =
            encode_commands(&[encoded[0].clone(), Bytes::from("{oops"), encoded[2].clone()]);
        let decoded: Vec<bool> = command_lines(&payload)
            .map(|line| Command::decode(&line).is_ok())
            .collect();
        assert_eq!(decoded, [true, false, true]);
    }

    #[test]
    fn events_delivered_together_come_apart_with_their_addresses() {
        let tenant = TenantId::new("acme.eu").unwrap();
        let (alice, bob) = (UserId::new("alice").unwrap(), UserId::new("b.o@b").unwrap());
        // A newline inside an event never ends it: its length does.
        let message = Message::plain(
            switchboard_protocol::MessageId::from_u64(42),
            ConversationId::new("c").unwrap(),
            7,
            alice.clone(),
            DeviceId::new("phone").unwrap(),
            ClientMsgId::new("m1").unwrap(),
            Some(Content::Text {
                text: "line\nnext".into(),
            }),
            Timestamp::from_unix_ms(1),
        );
        let mut stored = message_event(&message).unwrap();
        let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        stored
            .0
            .insert(crate::trace::HEADER_TRACEPARENT, traceparent);
        let listen = listen_event(&ConversationId::new("big").unwrap(), true).unwrap();
        let raw = (HeaderMap::new(), Bytes::from_static(b"x\ny"));
        let mut payload = Vec::new();
        push_delivery(&mut payload, &tenant, [&alice, &bob], &stored).unwrap();
        push_delivery(&mut payload, &tenant, [&bob], &listen).unwrap();
        push_delivery(&mut payload, &tenant, [&bob], &raw).unwrap();
        push_delivery(&mut payload, &tenant, [&alice], &listen).unwrap();
        let payload = Bytes::from(payload);
        let events: Vec<_> = decode_delivery(&payload).collect();
        assert_eq!(events.len(), 4);
        let first = events[0].as_ref().unwrap();
        assert_eq!(first.tenant, tenant);
        assert_eq!(first.to, [alice.clone(), bob.clone()]);
        assert_eq!(
            first.event,
            Event::Message {
                frame: stored.1.clone(),
                origin_user: "alice".into(),
                origin_device: "phone".into(),
            }
        );
        // The trace context travels with its event only.
        assert_eq!(first.traceparent.as_deref(), Some(traceparent));
        assert_eq!(events[1].as_ref().unwrap().traceparent, None);
        assert!(matches!(
            events[1],
            Ok(Delivered {
                event: Event::Listen { listen: true, .. },
                ..
            })
        ));
        // An event of an unknown kind costs only itself.
        assert!(matches!(events[2], Err(BackboneError::UnknownEvent { .. })));
        assert_eq!(events[3].as_ref().unwrap().to, std::slice::from_ref(&alice));
        // A broken length ends the delivery there, with an error.
        let mut cut = payload.to_vec();
        cut.truncate(cut.len() - 3);
        let events: Vec<_> = decode_delivery(&Bytes::from(cut)).collect();
        assert_eq!(events.len(), 4);
        assert!(matches!(
            events[3],
            Err(BackboneError::MalformedDelivery(_))
        ));
        assert!(decode_delivery(&Bytes::from_static(b"{oops")).all(|e| e.is_err()));

        // The end of a user's sessions names its reason.
        let end = end_sessions_event(SessionsEnd::Erased).unwrap();
        let mut payload = Vec::new();
        push_delivery(&mut payload, &tenant, [&bob], &end).unwrap();
        let events: Vec<_> = decode_delivery(&Bytes::from(payload)).collect();
        assert_eq!(
            events[0].as_ref().unwrap().event,
            Event::EndSessions(SessionsEnd::Erased)
        );

        // A send's answer goes to its device, as the one `ack` frame.
        let ack = ack_event(&message);
        let mut payload = Vec::new();
        push_delivery(&mut payload, &tenant, [&alice], &ack).unwrap();
        let events: Vec<_> = decode_delivery(&Bytes::from(payload)).collect();
        let Ok(Delivered {
            event:
                Event::Ack {
                    frame,
                    device,
                    client_msg_id,
                },
            ..
        }) = &events[0]
        else {
            panic!("{events:?}");
        };
        assert_eq!((device.as_str(), client_msg_id.as_str()), ("phone", "m1"));
        let sent: serde_json::Value = serde_json::from_slice(frame).unwrap();
        let built = serde_json::to_value(switchboard_protocol::ServerFrame::ack(&message)).unwrap();
        assert_eq!(sent, built);
    }

    #[test]
    fn dedupe_ids_are_short_and_separate_their_parts() {
        let t = TenantId::new("t").unwrap();
        let id = |c: &str, s: &str, m: &str| {
            send_dedupe_id(
                &t,
                &ConversationId::new(c).unwrap(),
                &UserId::new(s).unwrap(),
                &ClientMsgId::new(m).unwrap(),
            )
        };
        assert_eq!(id("c", "u", "m").len(), 34);
        assert_eq!(id("c", "u", "m"), id("c", "u", "m"));
        assert_ne!(id("ab", "c", "m"), id("a", "bc", "m"));
        assert_ne!(id("c", "u", "m1"), id("c", "u", "m2"));
    }

    #[test]
    fn direct_conversation_ids_do_not_depend_on_who_creates_them() {
        let (a, b) = (UserId::new("alice").unwrap(), UserId::new("bob").unwrap());
        let id = direct_conversation_id(&a, &b).unwrap();
        assert_eq!(id.as_str(), "dm:alice:bob");
        assert_eq!(direct_conversation_id(&b, &a).unwrap(), id);
        let long = UserId::new("x".repeat(128)).unwrap();
        let digest = direct_conversation_id(&long, &a).unwrap();
        assert_eq!(digest.as_str().len(), 35);
        assert_eq!(direct_conversation_id(&a, &long).unwrap(), digest);
    }

    #[test]
    fn direct_conversation_ids_never_collide() {
        let user = |s: &str| UserId::new(s).unwrap();
        let first = direct_conversation_id(&user("a:b"), &user("c")).unwrap();
        let second = direct_conversation_id(&user("a"), &user("b:c")).unwrap();
        assert_ne!(first, second);
        // Ids with a `:` are digests: one `:` only, never a readable id.
        for id in [&first, &second] {
            assert_eq!(id.as_str().matches(':').count(), 1, "{id}");
        }
        assert_eq!(
            direct_conversation_id(&user("c"), &user("a:b")).unwrap(),
            first
        );
        // Every pair from a small alphabet maps to its own id.
        let names = [
            "a", "b", "a:b", "b:a", "a:", ":a", "ab", "a::b", "a.b", "a@b",
        ];
        let mut seen = std::collections::HashMap::new();
        for x in names {
            for y in names {
                let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
                let id = direct_conversation_id(&user(x), &user(y)).unwrap();
                if let Some(pair) = seen.insert(id.clone(), (lo, hi)) {
                    assert_eq!(pair, (lo, hi), "{id} is shared");
                }
            }
        }
    }

    #[test]
    fn commands_round_trip() {
        let cmd = Command::Send(SendCommand {
            tenant: TenantId::new("t").unwrap(),
            conversation_id: ConversationId::new("c").unwrap(),
            sender: UserId::new("u").unwrap(),
            device: DeviceId::default_device(),
            client_msg_id: ClientMsgId::new("m").unwrap(),
            content: Content::Text { text: "hi".into() },
            received_at: Timestamp::from_unix_ms(5),
            options: Default::default(),
        });
        assert_eq!(Command::decode(&cmd.encode().unwrap()).unwrap(), cmd);
    }
}
