//! Members added and removed: each change is a system message in the
//! conversation's order, and may move its fan-out across the threshold.

use switchboard_protocol::Role;

use super::batch::Batch;
use super::moderation::frozen_refusal;
use super::prelude::*;

impl Batch<'_> {
    /// Checks shared by membership changes; the state if the change may go on.
    fn membership_state(
        &mut self,
        c: &MembersCommand,
        reply_to: Option<&str>,
    ) -> Option<SequencerState> {
        let key = key(&c.tenant, &c.conversation_id);
        let state = match self.states.get(&key) {
            Some(Some(s)) => s.clone(),
            _ => {
                self.refuse(reply_to, ErrorCode::NotFound, "no such conversation");
                return None;
            }
        };
        if !state.members.contains(&c.actor) && !c.actor_is_admin {
            self.refuse(
                reply_to,
                ErrorCode::NotAMember,
                "you are not a member of this conversation",
            );
            return None;
        }
        if state.kind == ConversationKind::Direct {
            self.refuse(
                reply_to,
                ErrorCode::Conflict,
                "a direct conversation always has the same two members",
            );
            return None;
        }
        Some(state)
    }

    /// A membership command already applied (found by its system
    /// message): answer it the same way again.
    fn already_applied(&mut self, c: &MembersCommand, reply_to: Option<&str>) -> bool {
        let Some(client_msg_id) = system_client_msg_id(c.command_id) else {
            return false;
        };
        let skey = SentKey {
            tenant: c.tenant.clone(),
            conversation_id: c.conversation_id.clone(),
            sender: c.actor.clone(),
            client_msg_id,
        };
        if !self.sent.contains_key(&skey) {
            return false;
        }
        self.done(reply_to, &c.conversation_id, false);
        true
    }

    pub(super) fn add_members(
        &mut self,
        c: &MembersCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        if self.already_applied(c, reply_to) {
            return Ok(());
        }
        let Some(state) = self.membership_state(c, reply_to) else {
            return Ok(());
        };
        let new = users_where(&c.users, |u| !state.members.contains(u));
        if new.is_empty() {
            self.done(reply_to, &c.conversation_id, false);
            return Ok(());
        }
        if let Some(why) = frozen_refusal(&state, &c.actor, c.actor_is_admin) {
            self.refuse(reply_to, ErrorCode::Forbidden, why);
            return Ok(());
        }
        if let Some(banned) = self.banned_among(&key(&c.tenant, &c.conversation_id), &new) {
            self.refuse(
                reply_to,
                ErrorCode::Forbidden,
                format!("{banned} is banned from this conversation: lift the ban first"),
            );
            return Ok(());
        }
        if let Err(why) = self
            .policies
            .check_members(&c.tenant, state.members.len() + new.len())
        {
            self.refuse(reply_to, ErrorCode::QuotaExceeded, why);
            return Ok(());
        }
        // Tenant admins place their users where they belong.
        let unsolicited = if c.actor_is_admin {
            None
        } else {
            match self.unsolicited_adds(&c.tenant, &c.actor, &new) {
                Ok(adds) => adds,
                Err(why) => {
                    self.refuse(reply_to, ErrorCode::Forbidden, why);
                    return Ok(());
                }
            }
        };
        let key = key(&c.tenant, &c.conversation_id);
        self.log.push_other(
            &key,
            Mutation::AddMembers {
                key: key.clone(),
                users: new.clone(),
                at: c.at,
                unsolicited,
            },
        );
        let members = self.admit(&key, &state, &new);
        let event = system_event(SystemEvent::MEMBERS_ADDED, &c.actor, new);
        self.system_message(c, &key, event, members.into_iter().collect(), reply_to)
    }

    /// `new` (none a member yet) are members from now on in the batch's
    /// view, and their gateways listen where the conversation fans out on
    /// read. Returns every member.
    pub(super) fn admit(
        &mut self,
        key: &ConversationKey,
        state: &SequencerState,
        new: &[UserId],
    ) -> BTreeSet<UserId> {
        let before = self.mode(key);
        let mut members = state.members.clone();
        members.extend(new.iter().cloned());
        if let Some(Some(s)) = self.states.get_mut(key) {
            s.members = members.clone();
        }
        // Crossing the threshold: everyone's gateways start listening; past
        // it already: the newcomers'.
        match (before, self.mode(key)) {
            (FanOut::Write, FanOut::Read) => {
                self.listen(key, members.iter().cloned().collect(), true)
            }
            (FanOut::Read, FanOut::Read) => self.listen(key, new.to_vec(), true),
            _ => {}
        }
        self.touched.insert(key.clone());
        members
    }

    pub(super) fn remove_members(
        &mut self,
        c: &MembersCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        if self.already_applied(c, reply_to) {
            return Ok(());
        }
        let Some(state) = self.membership_state(c, reply_to) else {
            return Ok(());
        };
        if let Some(why) = frozen_refusal(&state, &c.actor, c.actor_is_admin) {
            self.refuse(reply_to, ErrorCode::Forbidden, why);
            return Ok(());
        }
        let leaving_only_self = c.users.iter().all(|u| *u == c.actor);
        if !leaving_only_self && !c.actor_is_admin {
            let actor = state.role_of(&c.actor);
            if !actor.moderates() {
                self.refuse(
                    reply_to,
                    ErrorCode::Forbidden,
                    "only owners and admins (or a tenant admin) remove other members",
                );
                return Ok(());
            }
            let removes_an_owner = c
                .users
                .iter()
                .any(|u| *u != c.actor && state.role_of(u) == Role::Owner);
            if removes_an_owner && actor != Role::Owner {
                self.refuse(
                    reply_to,
                    ErrorCode::Forbidden,
                    "only an owner removes an owner",
                );
                return Ok(());
            }
        }
        let gone = users_where(&c.users, |u| state.members.contains(u));
        if gone.is_empty() {
            self.done(reply_to, &c.conversation_id, false);
            return Ok(());
        }
        let key = key(&c.tenant, &c.conversation_id);
        // Everyone who was a member hears of the removal, the removed too.
        let audience: Vec<UserId> = state.members.iter().cloned().collect();
        self.take_out(&key, &state, &gone);
        let event = system_event(SystemEvent::MEMBERS_REMOVED, &c.actor, gone);
        self.system_message(c, &key, event, audience, reply_to)
    }

    /// Takes `gone` (members all) out of the conversation: their rows, and
    /// their gateways' listening where it fans out on read.
    pub(super) fn take_out(
        &mut self,
        key: &ConversationKey,
        state: &SequencerState,
        gone: &[UserId],
    ) {
        self.log.push_other(
            key,
            Mutation::RemoveMembers {
                key: key.clone(),
                users: gone.to_vec(),
            },
        );
        let before = self.mode(key);
        if let Some(Some(s)) = self.states.get_mut(key) {
            // The store drops their rows (member state included): someone
            // who comes back starts over, with no old role, settings or
            // history floor (v1.3 joins make coming back common).
            for u in gone {
                s.members.remove(u);
                s.roles.remove(u);
                s.states.remove(u);
            }
        }
        if before == FanOut::Read {
            self.listen(key, gone.to_vec(), false);
            if self.mode(key) == FanOut::Write {
                let remaining = state
                    .members
                    .iter()
                    .filter(|m| !gone.contains(m))
                    .cloned()
                    .collect();
                self.listen(key, remaining, false);
            }
        }
        self.touched.insert(key.clone());
    }

    fn system_message(
        &mut self,
        c: &MembersCommand,
        key: &ConversationKey,
        event: SystemEvent,
        audience: Vec<UserId>,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some(client_msg_id) = system_client_msg_id(c.command_id) else {
            return Ok(());
        };
        self.append(
            key,
            &c.actor,
            &c.device,
            client_msg_id,
            Content::System(event),
            audience,
        )?;
        self.done(reply_to, &c.conversation_id, true);
        Ok(())
    }
}

fn system_event(event: &str, actor: &UserId, users: Vec<UserId>) -> SystemEvent {
    SystemEvent::about(event, actor.clone(), users)
}
