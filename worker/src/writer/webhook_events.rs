//! A batch's outcomes as outbound events (v1.2), for tenants whose
//! webhooks want them: published on `SB_EVENTS` after the commit and
//! before the commands' acks (`publish.rs`), so an event never tells of
//! what the store does not hold. Every event comes from here or from the
//! audit relay (`duties::audit_events`): no other process may publish on
//! `sb.events.>` (a gateway could otherwise have the dispatcher sign what
//! it made up).

use serde_json::json;
use switchboard_nats::records::tenants::TenantBook;
use switchboard_protocol::content::SystemEvent;
use switchboard_protocol::webhooks::{EventType, WebhookEvent};
use switchboard_protocol::{Content, Message, ServerFrame, TenantId, Timestamp};

use super::apply::Traced;
use crate::config::EventStream;
use crate::sequencer::Outcome;

/// The events of `outcomes` that some webhook of their tenant wants, or
/// all of them where the operator stores every event (`event_stream =
/// "all"`). `next_id` names the events that are not about a message's
/// version (a reaction).
pub(super) fn events_of(
    tenants: &TenantBook,
    stream: EventStream,
    outcomes: &[Traced],
    mut next_id: impl FnMut() -> Option<String>,
) -> Vec<WebhookEvent> {
    let wants = |tenant: &TenantId, kind: EventType| {
        stream == EventStream::All
            || tenants
                .get(tenant)
                .is_some_and(|record| record.wants_events(kind))
    };
    let mut events = Vec::new();
    for (outcome, _) in outcomes {
        match outcome {
            // A shadow-banned sender's message (v1.3) is the sender's
            // alone: webhooks hear nothing of it.
            Outcome::Deliver { message, .. }
            | Outcome::Answer { message, .. }
            | Outcome::Update { message, .. }
                if message.shadow => {}
            // A send answered as a retry: its event again, under the same
            // id (dropped by JetStream within its window, by the receiver
            // after), in case a crash after the commit lost the first.
            Outcome::Deliver {
                tenant, message, ..
            }
            | Outcome::Answer { tenant, message } => {
                let Some((kind, id, data)) = about_new_message(message) else {
                    continue;
                };
                if wants(tenant, kind) {
                    events.push(event(tenant, message, kind, id, message.created_at, data));
                }
            }
            Outcome::Update {
                tenant, message, ..
            } if wants(tenant, EventType::MessageUpdated) => {
                let at = message
                    .deleted_at
                    .or(message.edited_at)
                    .unwrap_or(message.created_at);
                // Its version: the time, what happened and a digest of the
                // content, so an edit and a deletion in one batch (one
                // time) are two events.
                let id = format!(
                    "updated-{}-{}-{}",
                    message.message_id,
                    at.unix_ms(),
                    version_digest(message)
                );
                let data = json!({ "message": message });
                events.push(event(
                    tenant,
                    message,
                    EventType::MessageUpdated,
                    id,
                    at,
                    data,
                ));
            }
            Outcome::Event {
                tenant,
                conversation_id,
                frame,
                ..
            } if matches!(**frame, ServerFrame::Reaction { .. })
                && wants(tenant, EventType::Reaction) =>
            {
                let Some(id) = next_id() else { continue };
                let mut data = serde_json::to_value(&**frame).unwrap_or_default();
                if let Some(fields) = data.as_object_mut() {
                    fields.remove("type");
                }
                events.push(WebhookEvent {
                    id: format!("reaction-{id}"),
                    kind: EventType::Reaction,
                    tenant: tenant.clone(),
                    conversation_id: Some(conversation_id.clone()),
                    created_at: Timestamp::now(),
                    data,
                });
            }
            Outcome::Reported { tenant, report } if wants(tenant, EventType::ReportCreated) => {
                events.push(WebhookEvent {
                    id: format!("report-{}", report.report_id),
                    kind: EventType::ReportCreated,
                    tenant: tenant.clone(),
                    conversation_id: Some(report.conversation_id.clone()),
                    created_at: report.created_at,
                    data: json!({
                        "report_id": report.report_id,
                        "message_id": report.message_id,
                        "reporter": report.reporter,
                        "reason": report.reason,
                    }),
                });
            }
            _ => {}
        }
    }
    events
}

/// A new message's event: `message.created`, or for the system message
/// of a change its own (`member.added`, `member.banned`,
/// `message.pinned`, `conversation.updated`, ...).
fn about_new_message(message: &Message) -> Option<(EventType, String, serde_json::Value)> {
    match &message.content {
        Some(Content::System(system)) => {
            let (kind, prefix) = match system.event.as_str() {
                SystemEvent::MEMBERS_ADDED => (EventType::MemberAdded, "members"),
                SystemEvent::MEMBERS_REMOVED => (EventType::MemberRemoved, "members"),
                SystemEvent::ROLE_CHANGED => (EventType::MemberRoleChanged, "role"),
                SystemEvent::MEMBER_BANNED => (EventType::MemberBanned, "ban"),
                SystemEvent::MEMBER_UNBANNED => (EventType::MemberUnbanned, "ban"),
                SystemEvent::MESSAGE_PINNED => (EventType::MessagePinned, "pin"),
                SystemEvent::MESSAGE_UNPINNED => (EventType::MessageUnpinned, "pin"),
                SystemEvent::CONVERSATION_UPDATED => (EventType::ConversationUpdated, "settings"),
                _ => return None,
            };
            let data = json!({
                "user_ids": system.user_ids,
                "actor": system.actor,
                "message": message,
            });
            Some((kind, format!("{prefix}-{}", message.message_id), data))
        }
        Some(_) => Some((
            EventType::MessageCreated,
            format!("created-{}", message.message_id),
            json!({ "message": message }),
        )),
        None => None,
    }
}

/// 16 hex digits of FNV-1a over what the message is now.
fn version_digest(message: &Message) -> String {
    let now = serde_json::to_vec(&(&message.content, message.deleted_at)).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in now {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn event(
    tenant: &TenantId,
    message: &Message,
    kind: EventType,
    id: String,
    at: Timestamp,
    data: serde_json::Value,
) -> WebhookEvent {
    WebhookEvent {
        id,
        kind,
        tenant: tenant.clone(),
        conversation_id: Some(message.conversation_id.clone()),
        created_at: at,
        data,
    }
}
