//! Edits and deletes.

use super::batch::Batch;
use super::moderation::silenced;
use super::prelude::*;

impl Batch<'_> {
    fn refuse_update(
        &mut self,
        c: &UpdateCommand,
        action: Action,
        code: ErrorCode,
        message: impl Into<String>,
    ) {
        self.outcomes.push(Outcome::Reject {
            tenant: c.tenant.clone(),
            sender: c.actor.clone(),
            rejection: Rejection {
                device: c.device.clone(),
                request_type: match action {
                    Action::Edit => request_type::EDIT_MESSAGE,
                    Action::Delete => request_type::DELETE_MESSAGE,
                }
                .into(),
                client_msg_id: None,
                conversation_id: c.conversation_id.clone(),
                code,
                message: message.into(),
                message_id: Some(c.message_id),
                retry_after_ms: None,
            },
        });
    }

    /// An edit or a deletion. Sequenced like sends, so an edit racing a
    /// delete ends the same way on every device: whichever the writer takes
    /// first happens, and an edit after a delete is refused.
    pub(super) fn update(
        &mut self,
        c: &UpdateCommand,
        action: Action,
    ) -> Result<(), SequenceError> {
        let key = key(&c.tenant, &c.conversation_id);
        let (members, moderates): (Vec<UserId>, bool) = match self.states.get(&key) {
            // A muted member, or anyone but an owner or admin of a frozen
            // conversation, edits nothing (deleting stays theirs).
            Some(Some(s))
                if action == Action::Edit
                    && let Some(why) = silenced(s, &c.actor, c.actor_is_admin, self.now) =>
            {
                self.refuse_update(c, action, ErrorCode::Forbidden, why);
                return Ok(());
            }
            // Tenant admins act where they are not members too.
            Some(Some(s)) if s.members.contains(&c.actor) || c.actor_is_admin => (
                s.members.iter().cloned().collect(),
                s.role_of(&c.actor).moderates(),
            ),
            Some(Some(_)) => {
                self.refuse_update(
                    c,
                    action,
                    ErrorCode::NotAMember,
                    "you are not a member of this conversation",
                );
                return Ok(());
            }
            _ => {
                self.refuse_update(c, action, ErrorCode::NotFound, "no such conversation");
                return Ok(());
            }
        };
        // A shadow-banned sender's message is nobody else's to see, so
        // nobody else's to change.
        let Some(current) = self
            .messages
            .get(&(key.clone(), c.message_id))
            .filter(|m| m.seen_by(&c.actor))
            .cloned()
        else {
            self.refuse_update(
                c,
                action,
                ErrorCode::NotFound,
                "no such message in this conversation",
            );
            return Ok(());
        };
        let now = self.now.max(current.created_at);
        // Owners and admins delete others' messages as tenant admins do
        // (v1.1 roles); editing stays the edit policy's.
        let acts_as_admin = c.actor_is_admin || (action == Action::Delete && moderates);
        if let Err(why) =
            self.policies
                .check_change(&key.tenant, action, &current, &c.actor, acts_as_admin, now)
        {
            self.refuse_update(c, action, ErrorCode::Forbidden, why);
            return Ok(());
        }
        let inbox = self.mode(&key) == FanOut::Write;
        let route = self.route(&key);
        let mut updated = current.clone();
        match (action, &c.content) {
            (Action::Edit, _) if current.deleted_at.is_some() => {
                self.refuse_update(c, action, ErrorCode::Conflict, "the message is deleted");
                return Ok(());
            }
            // A poll's question and options are what its voters chose
            // among (v1.3): no edit changes them, nor makes a poll.
            (Action::Edit, Some(content))
                if current.content.as_ref() != Some(content)
                    && (current.poll().is_some() || matches!(content, Content::Poll(_))) =>
            {
                self.refuse_update(
                    c,
                    action,
                    ErrorCode::Conflict,
                    "a poll is not edited: its question and options stay as sent",
                );
                return Ok(());
            }
            (Action::Edit, Some(content))
                if current.content.as_ref() != Some(content)
                    || c.custom.as_ref().is_some_and(|to| {
                        current.custom.as_ref().unwrap_or(&Default::default()) != to
                    }) =>
            {
                self.log.push_other(
                    &key,
                    Mutation::Edit {
                        key: key.clone(),
                        seq: current.seq,
                        content: content.clone(),
                        editor: c.actor.clone(),
                        at: now,
                        inbox,
                        custom: c.custom.clone(),
                    },
                );
                updated.content = Some(content.clone());
                updated.keep_linked_previews();
                if let Some(custom) = &c.custom {
                    updated.custom = (!custom.is_empty()).then(|| custom.clone());
                }
                updated.edited_at = Some(now);
            }
            (Action::Delete, _) if current.deleted_at.is_none() => {
                self.log.push_other(
                    &key,
                    Mutation::Delete {
                        key: key.clone(),
                        seq: current.seq,
                        at: now,
                        inbox,
                    },
                );
                updated.mark_deleted(now);
            }
            // A repeat (the same content again, a second delete): nothing
            // changes, and the members hear the current state again.
            _ => {}
        }
        self.messages.insert((key, c.message_id), updated.clone());
        let (recipients, route) = if updated.shadow {
            (vec![updated.sender_id.clone()], Route::Users)
        } else {
            (members, route)
        };
        self.outcomes.push(Outcome::Update {
            tenant: c.tenant.clone(),
            message: updated,
            recipients,
            route,
        });
        Ok(())
    }
}
