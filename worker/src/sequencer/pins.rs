//! Pins (v1.1): owners and admins pin (both sides of a direct
//! conversation may), at most 50 per conversation; each pin and unpin is
//! a system message, so devices that were away learn it from their
//! backlog, and a `pins_changed` event for the members connected now.

use switchboard_nats::envelope::PinCommand;
use switchboard_protocol::ServerFrame;
use switchboard_protocol::conversation::MAX_PINS;
use switchboard_protocol::frames::PinAction;
use switchboard_store::PinRow;

use super::batch::Batch;
use super::prelude::*;

impl Batch<'_> {
    pub(super) fn pin(
        &mut self,
        c: &PinCommand,
        pin: bool,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some((key, state)) = self.member_state_for(&c.by, reply_to) else {
            return Ok(());
        };
        if self.answered_as_retry(&c.by, reply_to) {
            return Ok(());
        }
        let may = c.by.actor_is_admin
            || state.kind == ConversationKind::Direct
            || state.role_of(&c.by.actor).moderates();
        if !may {
            self.refuse(
                reply_to,
                ErrorCode::Forbidden,
                "only owners and admins pin and unpin",
            );
            return Ok(());
        }
        let pins = self.pins.entry(key.clone()).or_default();
        let pinned = pins.iter().any(|p| p.message_id == c.message_id);
        if pin && !pinned {
            let live = self
                .messages
                .get(&(key.clone(), c.message_id))
                // A shadow-banned sender's message is seen by them
                // alone: nothing to show everyone as pinned.
                .is_some_and(|m| m.deleted_at.is_none() && !m.shadow);
            if !live {
                self.refuse(
                    reply_to,
                    ErrorCode::NotFound,
                    "no such message in this conversation",
                );
                return Ok(());
            }
            if pins.len() >= MAX_PINS {
                self.refuse(
                    reply_to,
                    ErrorCode::Conflict,
                    format!(
                        "a conversation has at most {MAX_PINS} pinned messages: unpin one first"
                    ),
                );
                return Ok(());
            }
        }
        if pin == pinned {
            self.done(reply_to, &c.by.conversation_id, false);
            return Ok(());
        }
        let pins = self.pins.entry(key.clone()).or_default();
        let mutation = if pin {
            let row = PinRow {
                message_id: c.message_id,
                by: c.by.actor.clone(),
                at: c.by.at,
            };
            pins.push(row.clone());
            Mutation::Pin {
                key: key.clone(),
                pin: row,
            }
        } else {
            pins.retain(|p| p.message_id != c.message_id);
            Mutation::Unpin {
                key: key.clone(),
                message_id: c.message_id,
            }
        };
        self.log.push_other(&key, mutation);
        self.touched.insert(key.clone());
        let members: Vec<UserId> = state.members.iter().cloned().collect();
        let Some(client_msg_id) = system_client_msg_id(c.by.command_id) else {
            return Ok(());
        };
        let (event, action) = if pin {
            (SystemEvent::MESSAGE_PINNED, PinAction::Pin)
        } else {
            (SystemEvent::MESSAGE_UNPINNED, PinAction::Unpin)
        };
        let mut system = SystemEvent::about(event, c.by.actor.clone(), Vec::new());
        system.message_id = Some(c.message_id);
        self.append(
            &key,
            &c.by.actor,
            &c.by.device,
            client_msg_id,
            Content::System(system),
            members.clone(),
        )?;
        let route = self.route(&key);
        self.outcomes.push(Outcome::Event {
            tenant: key.tenant.clone(),
            conversation_id: key.conversation_id.clone(),
            frame: Box::new(ServerFrame::PinsChanged {
                conversation_id: key.conversation_id.clone(),
                message_id: c.message_id,
                action,
                by: c.by.actor.clone(),
            }),
            recipients: members,
            route,
        });
        self.done(reply_to, &c.by.conversation_id, true);
        Ok(())
    }
}

/// The pins of the conversations the batch pins in or unpins from.
pub(super) async fn load(
    store: &dyn Store,
    batch: &[Incoming],
) -> Result<HashMap<ConversationKey, Vec<PinRow>>, SequenceError> {
    let keys: BTreeSet<ConversationKey> = batch
        .iter()
        .filter_map(|i| match &i.command {
            Command::Pin(c) | Command::Unpin(c) => Some(key(&c.by.tenant, &c.by.conversation_id)),
            _ => None,
        })
        .collect();
    let mut out = HashMap::new();
    for k in keys {
        let pins = store.pins(&k).await?;
        out.insert(k, pins);
    }
    Ok(out)
}
