//! Roles and a member's own settings (v1.1): who may give which role, the
//! system message a role change is, and the settings event for the
//! member's other devices.

use switchboard_nats::envelope::{Actor, RoleCommand, SettingsCommand};
use switchboard_protocol::{MemberSettings, Role};
use switchboard_store::MemberState;

use super::batch::Batch;
use super::prelude::*;

/// Why a role change is refused, if it is: the actor's role decides
/// (tenant admins may do anything), and a group keeps an owner.
pub(super) fn role_change_refusal(
    state: &SequencerState,
    by: &Actor,
    user: &UserId,
    role: Role,
) -> Option<(ErrorCode, &'static str)> {
    if state.kind == ConversationKind::Direct {
        return Some((
            ErrorCode::Conflict,
            "a direct conversation has no roles: both sides are members",
        ));
    }
    if !state.members.contains(user) {
        return Some((ErrorCode::NotFound, "that user is not a member"));
    }
    let actor = state.role_of(&by.actor);
    let current = state.role_of(user);
    if !by.actor_is_admin {
        if !actor.moderates() {
            return Some((ErrorCode::Forbidden, "only owners and admins change roles"));
        }
        if (role == Role::Owner || current == Role::Owner) && actor != Role::Owner {
            return Some((
                ErrorCode::Forbidden,
                "only an owner makes owners or changes an owner's role",
            ));
        }
    }
    let owners = state.roles.values().filter(|r| **r == Role::Owner).count();
    if current == Role::Owner && role != Role::Owner && owners == 1 {
        return Some((
            ErrorCode::Conflict,
            "a group keeps at least one owner: make another member owner first",
        ));
    }
    None
}

impl Batch<'_> {
    /// Writes a member's new state and keeps the batch's view of it.
    fn put_state(&mut self, key: &ConversationKey, user: &UserId, state: MemberState) {
        self.log.push_other(
            key,
            Mutation::SetMemberState {
                key: key.clone(),
                user: user.clone(),
                state: state.clone(),
            },
        );
        if let Some(Some(s)) = self.states.get_mut(key) {
            if state.is_default() {
                s.states.remove(user);
            } else {
                s.states.insert(user.clone(), state);
            }
        }
        self.touched.insert(key.clone());
    }

    /// `PATCH .../members/{user}`: a role given, told to every member as a
    /// `role_changed` system message (so devices that were away learn it
    /// from their backlog).
    pub(super) fn set_role(
        &mut self,
        c: &RoleCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some((key, state)) = self.member_state_for(&c.by, reply_to) else {
            return Ok(());
        };
        if self.answered_as_retry(&c.by, reply_to) {
            return Ok(());
        }
        if let Some((code, why)) = role_change_refusal(&state, &c.by, &c.user, c.role) {
            self.refuse(reply_to, code, why);
            return Ok(());
        }
        if state.role_of(&c.user) == c.role {
            self.done(reply_to, &c.by.conversation_id, false);
            return Ok(());
        }
        let mut member = state.states.get(&c.user).cloned().unwrap_or_default();
        member.role = Some(c.role);
        self.put_state(&key, &c.user, member);
        if let Some(Some(s)) = self.states.get_mut(&key) {
            s.roles.insert(c.user.clone(), c.role);
        }
        let Some(client_msg_id) = system_client_msg_id(c.by.command_id) else {
            return Ok(());
        };
        let mut event = SystemEvent::about(
            SystemEvent::ROLE_CHANGED,
            c.by.actor.clone(),
            vec![c.user.clone()],
        );
        event.role = Some(c.role);
        self.append(
            &key,
            &c.by.actor,
            &c.by.device,
            client_msg_id,
            Content::System(event),
            state.members.iter().cloned().collect(),
        )?;
        self.done(reply_to, &c.by.conversation_id, true);
        Ok(())
    }

    /// `PUT .../settings`: the actor's own settings, and a
    /// `settings_changed` for their other devices.
    pub(super) fn settings(
        &mut self,
        c: &SettingsCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some((key, state)) = self.member_state_for(&c.by, reply_to) else {
            return Ok(());
        };
        if !state.members.contains(&c.by.actor) {
            self.refuse(
                reply_to,
                ErrorCode::NotAMember,
                "you are not a member of this conversation",
            );
            return Ok(());
        }
        let mut member = state.states.get(&c.by.actor).cloned().unwrap_or_default();
        let changed = member.settings != c.settings;
        if changed {
            member.settings = c.settings.clone();
            self.put_state(&key, &c.by.actor, member);
        }
        let MemberSettings {
            notifications,
            muted_until,
        } = c.settings.clone();
        self.outcomes.push(Outcome::Event {
            tenant: key.tenant.clone(),
            conversation_id: key.conversation_id.clone(),
            frame: Box::new(ServerFrame::SettingsChanged {
                conversation_id: key.conversation_id.clone(),
                notifications,
                muted_until,
            }),
            recipients: vec![c.by.actor.clone()],
            route: Route::Users,
        });
        self.done(reply_to, &c.by.conversation_id, changed);
        Ok(())
    }
}
