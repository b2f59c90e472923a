//! What travels on the backbone's subjects, read as its readers read it:
//! commands on the ingest streams, REST replies, events, deliveries to
//! gateways, push jobs and the store service's requests and replies. An
//! input that needs a header beside its payload has the header's value
//! on its first line.

use bytes::Bytes;
use switchboard_nats::envelope::{
    self, Actor, Command, CommandReply, CreateConversationCommand, Event, MembersCommand,
    PinCommand, ReactCommand, Rejection, RoleCommand, SendCommand, SettingsCommand, UpdateCommand,
};
use switchboard_nats::push_jobs::{MessageJob, SendJob};
use switchboard_nats::trace;
use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, ConversationKind, DeviceId, ErrorCode, Message,
    MessageId, ServerFrame, TenantId, Timestamp, UserId,
};
use switchboard_store::{
    ArchiveScan, BucketContents, ConversationDetail, ConversationSummary, InboxSweep, MarkChange,
    Read, SequencerState, StoreError,
};
use switchboard_store_remote::{decode_answer, decode_reply, decode_request};

use super::input::{first_line, lines};

/// `SB_INGEST`: a command alone, or several sends one per line
/// (`Sb-Commands`) with their trace contexts (`Sb-Traceparents`, the
/// first line here), as a writer takes them.
pub(super) fn ingest_commands(data: &[u8]) {
    let (traceparents, payload) = first_line(data);
    let payload = Bytes::copy_from_slice(payload);
    let _ = Command::decode(&payload);
    // Trace contexts are parsed only when tracing is on.
    trace::enable();
    let traceparents = std::str::from_utf8(traceparents).ok();
    for (line, encoded) in envelope::command_lines(&payload).enumerate() {
        if Command::decode(&encoded).is_ok()
            && let Some(traceparent) = traceparents.and_then(|all| trace::nth(all, line))
        {
            trace::follow(&tracing::Span::none(), traceparent);
        }
    }
}

/// `Sb-Reply`: a REST command's outcome, as the gateway waits for it.
pub(super) fn command_reply(data: &[u8]) {
    let _ = serde_json::from_slice::<CommandReply>(data);
}

/// An event on a conversation's subject: its kind (`Sb-Event`) on the
/// first line, then its payload.
pub(super) fn event(data: &[u8]) {
    let (kind, payload) = first_line(data);
    let kind = std::str::from_utf8(kind).ok();
    let payload = Bytes::copy_from_slice(payload);
    if let Ok(event) = envelope::event_from(kind, Some("alice"), Some("phone"), payload) {
        hand_over(&event);
    }
}

/// A delivery on `sb.gw.<gateway>`: its events, each addressed and
/// length-counted, as a gateway's hub takes them apart.
pub(super) fn delivery(data: &[u8]) {
    for delivered in envelope::decode_delivery(&Bytes::copy_from_slice(data)).flatten() {
        hand_over(&delivered.event);
    }
}

/// What a gateway reads of an event it hands to connections (`hub.rs`):
/// frames go out as they came, if they are text; a refusal is made into
/// its `error` frame.
fn hand_over(event: &Event) {
    match event {
        Event::Message { frame, .. } | Event::Ack { frame, .. } => {
            let _ = std::str::from_utf8(frame);
        }
        Event::Frame(frame) => {
            let _ = std::str::from_utf8(frame);
        }
        Event::Rejected(r) => {
            let frame = ServerFrame::error_answering(
                r.code,
                r.message.clone(),
                Some(&r.request_type),
                r.client_msg_id.as_ref().map(|id| id.as_str()),
                Some(r.conversation_id.as_str()),
            );
            let _ = frame.to_json();
        }
        Event::Blocks { frame, .. } => {
            let _ = std::str::from_utf8(frame);
        }
        Event::Listen { .. } | Event::EndSessions(_) => {}
    }
}

/// `SB_PUSH`: a message job (and when its pushes are due) or a send job.
pub(super) fn push_job(data: &[u8]) {
    if let Ok(job) = serde_json::from_slice::<MessageJob>(data) {
        for delay_ms in [0, 30_000, u64::MAX] {
            let _ = switchboard_push::due(job.stored_at, delay_ms);
        }
    }
    let _ = serde_json::from_slice::<SendJob>(data);
}

/// `sb.store.*`: a request as the store service decodes it.
pub(super) fn store_request(data: &[u8]) {
    let _ = decode_request(data);
}

/// A store service reply, as a `RemoteStore` decodes it for each kind of
/// answer.
pub(super) fn store_reply(data: &[u8]) {
    let _ = decode_reply::<()>(data);
    let _ = decode_reply::<bool>(data);
    let _ = decode_reply::<Vec<Message>>(data);
    let _ = decode_reply::<Vec<Option<Message>>>(data);
    let _ = decode_reply::<Vec<Option<u64>>>(data);
    let _ = decode_reply::<Vec<Option<SequencerState>>>(data);
    let _ = decode_reply::<ConversationDetail>(data);
    let _ = decode_reply::<Vec<ConversationSummary>>(data);
    let _ = decode_reply::<(ConversationKind, Vec<UserId>)>(data);
    let _ = decode_reply::<Vec<(ConversationId, ConversationKind, usize)>>(data);
    let _ = decode_reply::<MarkChange>(data);
    let _ = decode_reply::<BucketContents>(data);
    let _ = decode_reply::<ArchiveScan>(data);
    let _ = decode_reply::<InboxSweep>(data);
    for read in [
        Read::OpenReports {},
        Read::Expiring {
            cursor: None,
            budget: 1,
        },
    ] {
        let _ = decode_answer(&read, data);
    }
}

/// The ids of the seeds.
struct Ids {
    tenant: TenantId,
    conversation: ConversationId,
    alice: UserId,
    bob: UserId,
    phone: DeviceId,
    client_msg_id: ClientMsgId,
}

fn ids() -> Option<Ids> {
    Some(Ids {
        tenant: TenantId::new("acme.eu").ok()?,
        conversation: ConversationId::new("c:1").ok()?,
        alice: UserId::new("alice").ok()?,
        bob: UserId::new("b.o@b").ok()?,
        phone: DeviceId::new("phone").ok()?,
        client_msg_id: ClientMsgId::new("m1").ok()?,
    })
}

fn at() -> Timestamp {
    Timestamp::from_unix_ms(1_779_441_701_123)
}

fn message(ids: &Ids) -> Message {
    Message {
        message_id: MessageId::from_u64(42),
        conversation_id: ids.conversation.clone(),
        seq: 7,
        sender_id: ids.alice.clone(),
        sender_device: ids.phone.clone(),
        client_msg_id: ids.client_msg_id.clone(),
        content: Some(Content::Text {
            text: "line\nnext".into(),
        }),
        created_at: at(),
        edited_at: None,
        deleted_at: None,
        reply_to: Some(MessageId::from_u64(41)),
        thread_id: None,
        thread: None,
        reactions: vec![switchboard_protocol::Reaction {
            emoji: "👍".into(),
            count: 2,
            me: false,
        }],
        mentions: vec![ids.bob.clone()],
        mention_all: false,
        blocked_sender: false,
        expires_at: Some(at()),
        custom: None,
        poll_results: None,
        previews: Vec::new(),
        shadow: false,
    }
}

fn rejection(ids: &Ids) -> Rejection {
    Rejection {
        device: ids.phone.clone(),
        request_type: "send_message".into(),
        client_msg_id: Some(ids.client_msg_id.clone()),
        conversation_id: ids.conversation.clone(),
        code: ErrorCode::RejectedByPolicy,
        message: "no".into(),
        message_id: None,
        retry_after_ms: None,
    }
}

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn commands(ids: &Ids) -> Vec<Command> {
    let members = MembersCommand {
        command_id: MessageId::from_u64(2),
        tenant: ids.tenant.clone(),
        conversation_id: ids.conversation.clone(),
        users: vec![ids.bob.clone()],
        actor: ids.alice.clone(),
        device: ids.phone.clone(),
        actor_is_admin: false,
        at: at(),
    };
    // What every v1.1 command carries.
    let by = Actor {
        command_id: MessageId::from_u64(4),
        tenant: ids.tenant.clone(),
        conversation_id: ids.conversation.clone(),
        actor: ids.alice.clone(),
        device: ids.phone.clone(),
        actor_is_admin: false,
        at: at(),
    };
    let update = UpdateCommand {
        command_id: MessageId::from_u64(3),
        tenant: ids.tenant.clone(),
        conversation_id: ids.conversation.clone(),
        message_id: MessageId::from_u64(42),
        actor: ids.alice.clone(),
        device: ids.phone.clone(),
        actor_is_admin: true,
        content: Some(Content::Text { text: "x".into() }),
        custom: None,
    };
    vec![
        Command::Send(SendCommand {
            tenant: ids.tenant.clone(),
            conversation_id: ids.conversation.clone(),
            sender: ids.alice.clone(),
            device: ids.phone.clone(),
            client_msg_id: ids.client_msg_id.clone(),
            content: Content::Text {
                text: "hi\nthere".into(),
            },
            received_at: at(),
            options: switchboard_protocol::message::SendOptions {
                reply_to: Some(MessageId::from_u64(41)),
                thread_id: Some(MessageId::from_u64(40)),
                mentions: vec![ids.bob.clone()],
                mention_all: true,
                custom: None,
                previews: Some(false),
            },
        }),
        Command::CreateConversation(CreateConversationCommand {
            command_id: MessageId::from_u64(1),
            tenant: ids.tenant.clone(),
            conversation_id: ids.conversation.clone(),
            kind: ConversationKind::Group,
            title: Some("t".into()),
            members: vec![ids.alice.clone(), ids.bob.clone()],
            actor: ids.alice.clone(),
            device: ids.phone.clone(),
            actor_is_admin: false,
            at: at(),
        }),
        Command::AddMembers(members.clone()),
        Command::RemoveMembers(members),
        Command::Edit(update.clone()),
        Command::Delete(UpdateCommand {
            content: None,
            ..update
        }),
        Command::SetRole(RoleCommand {
            by: by.clone(),
            user: ids.bob.clone(),
            role: switchboard_protocol::Role::Admin,
        }),
        Command::Settings(SettingsCommand {
            by: by.clone(),
            settings: switchboard_protocol::MemberSettings {
                notifications: switchboard_protocol::NotificationLevel::Mentions,
                muted_until: Some(at()),
            },
        }),
        Command::React(ReactCommand {
            by: by.clone(),
            message_id: MessageId::from_u64(42),
            emoji: "👍".into(),
            action: switchboard_protocol::ReactAction::Add,
        }),
        Command::Vote(switchboard_nats::envelope::VoteCommand {
            by: by.clone(),
            message_id: MessageId::from_u64(42),
            option_ids: vec!["a".into(), "b".into()],
        }),
        Command::ClosePoll(PinCommand {
            by: by.clone(),
            message_id: MessageId::from_u64(42),
        }),
        Command::Pin(PinCommand {
            by: by.clone(),
            message_id: MessageId::from_u64(42),
        }),
        Command::Ban(switchboard_nats::envelope::BanCommand {
            by: by.clone(),
            user: ids.bob.clone(),
            until: Some(at()),
        }),
        Command::SetPolicy(switchboard_nats::envelope::PolicyCommand {
            by: by.clone(),
            patch: switchboard_protocol::safety::ConversationPatch {
                slow_mode_secs: Some(30),
                retention_days: Some(None),
                disappearing_secs: Some(Some(60)),
                visibility: Some(switchboard_protocol::channels::Visibility::Public),
                posting: Some(switchboard_protocol::channels::Posting::Admins),
                topic: Some(Some("releases".into())),
                ..Default::default()
            },
        }),
        Command::Join(switchboard_nats::envelope::JoinCommand {
            by: by.clone(),
            invite: Some("AbC123xyz789".into()),
        }),
        Command::Invite(switchboard_nats::envelope::InviteCommand {
            by: by.clone(),
            code: "AbC123xyz789".into(),
            create: Some(switchboard_protocol::channels::CreateInvite {
                max_uses: Some(5),
                expires_at: None,
            }),
        }),
        Command::Block(switchboard_nats::envelope::BlockCommand {
            by,
            user: ids.bob.clone(),
            action: switchboard_protocol::safety::BlockAction::Block,
        }),
    ]
}

pub(super) fn ingest_seeds() -> Vec<Vec<u8>> {
    let Some(ids) = ids() else {
        return Vec::new();
    };
    let encoded: Vec<Bytes> = commands(&ids)
        .iter()
        .filter_map(|c| c.encode().ok())
        .collect();
    let mut seeds: Vec<Vec<u8>> = encoded.iter().map(|c| lines(&[b"", c])).collect();
    let several = envelope::encode_commands(&encoded[..encoded.len().min(3)]);
    let joined = trace::join([Some(TRACEPARENT), None, Some(TRACEPARENT)]).unwrap_or_default();
    seeds.push(lines(&[joined.as_bytes(), &several]));
    seeds.push(lines(&[b",,,,,,,", &several]));
    seeds.push(lines(&[b"00-zz-zz-zz", &several]));
    seeds
}

pub(super) fn command_reply_seeds() -> Vec<Vec<u8>> {
    let Some(ids) = ids() else {
        return Vec::new();
    };
    [
        CommandReply::Done {
            conversation_id: ids.conversation,
            created: true,
        },
        CommandReply::Refused {
            code: ErrorCode::Conflict,
            message: "a direct conversation has two members".into(),
            retry_after_ms: None,
        },
        CommandReply::Refused {
            code: ErrorCode::RateLimited,
            message: "slow mode".into(),
            retry_after_ms: Some(1500),
        },
    ]
    .iter()
    .filter_map(|r| serde_json::to_vec(r).ok())
    .collect()
}

/// The events a writer publishes: each one's kind (`Sb-Event`), payload
/// and a delivery of it alone.
fn events(ids: &Ids) -> Vec<(String, Bytes, Vec<u8>)> {
    let mut events = Vec::new();
    if let Ok(mut stored) = envelope::message_event(&message(ids)) {
        stored.0.insert(trace::HEADER_TRACEPARENT, TRACEPARENT);
        events.push(stored);
    }
    events.push(envelope::frame_event(&ServerFrame::Pong {}));
    events.push(envelope::frame_event(&ServerFrame::BlocksChanged {
        user_id: ids.bob.clone(),
        action: switchboard_protocol::safety::BlockAction::Block,
    }));
    events.extend(envelope::listen_event(&ids.conversation, true).ok());
    events.extend(envelope::rejection_event(&rejection(ids)).ok());
    let mut unknown = envelope::frame_event(&ServerFrame::Pong {});
    unknown.0.insert(envelope::HEADER_EVENT, "nope");
    unknown.1 = Bytes::from_static(b"x\ny");
    events.push(unknown);
    events
        .into_iter()
        .map(|event| {
            let kind = event
                .0
                .get(envelope::HEADER_EVENT)
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default();
            let mut delivery = Vec::new();
            let to = [&ids.alice, &ids.bob];
            let _ = envelope::push_delivery(&mut delivery, &ids.tenant, to, &event);
            (kind, event.1, delivery)
        })
        .collect()
}

pub(super) fn event_seeds() -> Vec<Vec<u8>> {
    let Some(ids) = ids() else {
        return Vec::new();
    };
    let mut seeds: Vec<Vec<u8>> = events(&ids)
        .iter()
        .map(|(kind, payload, _)| lines(&[kind.as_bytes(), payload]))
        .collect();
    seeds.push(
        b"message\n{\"type\":\"message\",\"message\":{\"seq\":18446744073709551615}}".to_vec(),
    );
    seeds
}

/// An addressing line for an event of `len` bytes, then `body`.
pub(super) fn delivery_claiming(len: &str, body: &[u8]) -> Vec<u8> {
    let mut out =
        format!(r#"{{"tenant":"acme","to":["alice","bob"],"event":"frame","len":{len}}}"#)
            .into_bytes();
    out.push(b'\n');
    out.extend_from_slice(body);
    out.push(b'\n');
    out
}

pub(super) fn delivery_seeds() -> Vec<Vec<u8>> {
    let Some(ids) = ids() else {
        return Vec::new();
    };
    let events = events(&ids);
    let mut seeds: Vec<Vec<u8>> = events.iter().map(|(_, _, one)| one.clone()).collect();
    seeds.push(events.iter().flat_map(|(_, _, one)| one.clone()).collect());
    // Lengths that point past the end, to its very end, and far beyond.
    for len in [
        "0",
        "2",
        "3",
        "1125899906842624",
        "18446744073709551615",
        "-1",
    ] {
        seeds.push(delivery_claiming(len, b"{}"));
    }
    seeds
}

pub(super) fn push_job_seeds() -> Vec<Vec<u8>> {
    let Some(ids) = ids() else {
        return Vec::new();
    };
    let job = MessageJob {
        tenant: ids.tenant.clone(),
        conversation_id: ids.conversation.clone(),
        message_id: MessageId::from_u64(42),
        seq: u64::MAX,
        sender: ids.alice.clone(),
        recipients: vec![ids.alice.clone(), ids.bob.clone()],
        stored_at: at(),
        reaction: None,
    };
    let send = SendJob {
        tenant: ids.tenant,
        user: ids.bob,
        device: ids.phone,
        provider: switchboard_protocol::push::PushProvider::Apns,
        token: "a1b2c3".into(),
        conversation_id: ids.conversation,
        message_id: MessageId::from_u64(42),
        seq: 7,
        sender: ids.alice,
        title: "alice".into(),
        body: Some("hi".into()),
        badge: Some(3),
        reaction: None,
    };
    let mut seeds: Vec<Vec<u8>> = serde_json::to_vec(&job).into_iter().collect();
    seeds.extend(serde_json::to_vec(&send));
    seeds.push(
        br#"{"tenant":"t","conversation_id":"c","message_id":"1","seq":1,"sender":"a","recipients":[],"stored_at":"9999-12-31T23:59:59.999Z"}"#
            .to_vec(),
    );
    seeds
}

pub(super) fn store_request_seeds() -> Vec<Vec<u8>> {
    let key = r#"{"tenant":"t","conversation_id":"c"}"#;
    let message = r#"{"message_id":"1","conversation_id":"c","seq":1,"sender_id":"a","sender_device":"d","client_msg_id":"m","content":{"kind":"text","text":"hi"},"created_at":"2026-01-01T00:00:00.000Z","edited_at":null,"deleted_at":null}"#;
    let max = u64::MAX;
    [
        r#"{"op":"ping"}"#.to_owned(),
        format!(r#"{{"op":"sequencer_states","keys":[{key},{key}]}}"#),
        format!(
            r#"{{"op":"history","tenant":"t","conversation":"c","reader":"u","query":{{"before_seq":null,"after_seq":0,"limit":{max}}}}}"#
        ),
        format!(
            r#"{{"op":"inbox","tenant":"t","user":"u","device":"d","after":{{"conversation_id":"c","seq":1}},"limit":{max}}}"#
        ),
        format!(
            r#"{{"op":"replay","tenant":"t","conversation":"c","reader":"u","after_seq":{max},"limit":{max}}}"#
        ),
        format!(
            r#"{{"op":"bucket_contents","bucket":{{"tenant":"t","conversation_id":"c","day":4294967295}},"after_seq":0,"limit":{max}}}"#
        ),
        format!(r#"{{"op":"archive_candidates","before_day":1,"cursor":"x","budget":{max}}}"#),
        format!(
            r#"{{"op":"expire_inbox","before":"2026-01-01T00:00:00.000Z","cursor":null,"budget":{max}}}"#
        ),
        r#"{"op":"ack_read","tenant":"t","user":"u","conversation":"c","seq":1}"#.to_owned(),
        format!(
            r#"{{"op":"commit","mutations":[{{"op":"append","key":{key},"expected_last_seq":0,"messages":[{message}],"inbox":true}},{{"op":"move_to_archive","bucket":{{"tenant":"t","conversation_id":"c","day":1}}}}]}}"#
        ),
    ]
    .map(String::into_bytes)
    .to_vec()
}

pub(super) fn store_reply_seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![
        br#"{"ok":null}"#.to_vec(),
        br#"{"ok":true}"#.to_vec(),
        br#"{"ok":[null,null,1]}"#.to_vec(),
        br#"{"ok":["group",["a","b"]]}"#.to_vec(),
        br#"{"ok":{"buckets":[{"tenant":"t","conversation_id":"c","day":1}],"next":"k"}}"#.to_vec(),
        br#"{"ok":{"seen":18446744073709551615,"removed":0,"next":null}}"#.to_vec(),
        br#"{"ok":{"kind":"direct","members":["a"],"delivered_seq":1,"read_seq":1,"delivered_moved":true,"read_moved":false}}"#.to_vec(),
    ];
    if let Some(ids) = ids() {
        let messages = vec![message(&ids), message(&ids)];
        if let Ok(json) = serde_json::to_string(&messages) {
            seeds.push(format!(r#"{{"ok":{json}}}"#).into_bytes());
        }
    }
    for error in [
        StoreError::AnswerTooLarge {
            bytes: usize::MAX,
            max: 1 << 20,
        },
        StoreError::Refused("commit is asked on sb.store.write only".into()),
    ] {
        if let Ok(json) = serde_json::to_string(&error) {
            seeds.push(format!(r#"{{"err":{json}}}"#).into_bytes());
        }
    }
    seeds
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::check;
    use crate::targets::Target;
    use crate::testing::{counters, target};
    use switchboard_nats::BackboneError;

    /// A delivery decoder that believed an event's `len`: what
    /// `decode_delivery` must never be.
    fn delivery_trusting_its_len(data: &[u8]) {
        let (head, rest) = first_line(data);
        if let Ok(head) = serde_json::from_slice::<serde_json::Value>(head) {
            let len = head["len"].as_u64().unwrap_or(0) as usize;
            let mut body = Vec::with_capacity(len);
            body.extend_from_slice(&rest[..len.min(rest.len())]);
        }
    }

    #[test]
    fn a_delivery_claiming_huge_lengths_allocates_nothing_for_them() {
        let _turn = counters();
        let target = target("delivery");
        for len in ["1125899906842624", "18446744073709551615", "268435456"] {
            let input = delivery_claiming(len, b"{}");
            let used = check(target, &input).unwrap();
            assert!(used < 64 << 10, "a length of {len} cost {used} bytes");
            // The event is refused, and nothing after it is read.
            let events: Vec<_> = envelope::decode_delivery(&Bytes::from(input)).collect();
            assert!(
                matches!(events[..], [Err(BackboneError::MalformedDelivery(_))]),
                "{events:?}"
            );
        }
        // Positive control: a decoder that believed the length is a finding.
        let before = Target {
            name: "delivery_trusting_its_len",
            run: delivery_trusting_its_len,
            ..*target
        };
        let finding = check(&before, &delivery_claiming("268435456", b"{}")).unwrap_err();
        assert!(finding.starts_with("allocated"), "{finding}");
    }

    #[test]
    fn push_delays_at_the_ends_of_i64_do_not_overflow() {
        let _turn = counters();
        // A tenant record's `delay_ms` is not checked by those who follow
        // the bucket: stored_at + u64::MAX overflowed (a panic in debug).
        assert_eq!(switchboard_push::due(at(), u64::MAX), i64::MAX);
        assert_eq!(switchboard_push::due(at(), 1_000), at().unix_ms() + 1_000);
    }
}
