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
                recipients,
                route,
            } if matches!(**frame, ServerFrame::Reaction { .. })
                && !reactors_own(frame, recipients, *route)
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

/// Whether a reaction frame goes to its reactor alone: a repeat that
/// changed nothing, the reactor's uncoalesced copy of a change the
/// conversation's subject carries too, or a reaction on a shadow-banned
/// sender's message (v1.3), which nobody else sees. None of them is a
/// change for the webhooks. (So is a change in a conversation whose only
/// member is the reactor, which nobody else could hear of either.)
fn reactors_own(
    frame: &ServerFrame,
    recipients: &[switchboard_protocol::UserId],
    route: crate::sequencer::Route,
) -> bool {
    let ServerFrame::Reaction { user_id, .. } = frame else {
        return false;
    };
    route == crate::sequencer::Route::Users && recipients == std::slice::from_ref(user_id)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sequencer::Route;
    use switchboard_protocol::{ConversationId, MessageId, ReactAction, UserId};

    fn reaction(recipients: &[&str], route: Route) -> Traced {
        let frame = ServerFrame::Reaction {
            conversation_id: ConversationId::new("c").unwrap(),
            message_id: MessageId::from_u64(7),
            user_id: UserId::new("ann").unwrap(),
            emoji: "👍".into(),
            action: ReactAction::Add,
            counts: Default::default(),
        };
        (
            Outcome::Event {
                tenant: TenantId::new("t").unwrap(),
                conversation_id: ConversationId::new("c").unwrap(),
                frame: Box::new(frame),
                recipients: recipients
                    .iter()
                    .map(|u| UserId::new(*u).unwrap())
                    .collect(),
                route,
            },
            None,
        )
    }

    #[test]
    fn a_reaction_reaches_the_webhooks_once_per_change_others_hear_of() {
        let mut n = 0;
        let mut ids = || {
            n += 1;
            Some(n.to_string())
        };
        let book = TenantBook::default();
        let count = |outcomes: &[Traced], ids: &mut dyn FnMut() -> Option<String>| {
            events_of(&book, EventStream::All, outcomes, ids).len()
        };
        // A change to every member: one event.
        assert_eq!(
            count(&[reaction(&["ann", "bob"], Route::Users)], &mut ids),
            1
        );
        // A channel's change: the reactor's own copy and the subject's.
        let channel = [
            reaction(&["ann"], Route::Users),
            reaction(&[], Route::Conversation),
        ];
        assert_eq!(count(&channel, &mut ids), 1);
        // A repeat, or a reaction on a shadow message: the reactor alone.
        assert_eq!(count(&[reaction(&["ann"], Route::Users)], &mut ids), 0);
    }
}
