//! Open channels (v1.3): a user joining by themselves (a public
//! conversation, or with an invite), invites made and revoked, and who
//! posts in the main timeline. The writer decides each, so that a ban, a
//! block, an invite's uses and `posting` hold on every way in.

use std::collections::hash_map::Entry;

use switchboard_nats::envelope::{InviteCommand, JoinCommand};
use switchboard_protocol::channels::{Invite, MAX_INVITES, Posting, Visibility};

use super::batch::Batch;
use super::moderation::frozen_refusal;
use super::prelude::*;

/// The invites of the conversations this batch joins with an invite or
/// changes the invites of, and (into `blocking`) whom the creators of
/// the invites used block.
pub(super) async fn load(
    store: &dyn Store,
    batch: &[Incoming],
    blocking: &mut HashSet<(TenantId, UserId, UserId)>,
) -> Result<HashMap<ConversationKey, Vec<Invite>>, SequenceError> {
    let mut invites = HashMap::new();
    for incoming in batch {
        let code = match &incoming.command {
            Command::Join(c) => match &c.invite {
                Some(code) => code,
                None => continue,
            },
            Command::Invite(c) => &c.code,
            _ => continue,
        };
        let key = conversation_key(&incoming.command);
        let list: &Vec<Invite> = match invites.entry(key) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                let found = store.invites(v.key()).await?;
                v.insert(found)
            }
        };
        if let (Command::Join(_), Some(invite)) =
            (&incoming.command, list.iter().find(|i| i.code == *code))
        {
            let tenant = incoming.command.tenant();
            for b in store.blocks(tenant, &invite.created_by).await? {
                blocking.insert((tenant.clone(), invite.created_by.clone(), b.user_id));
            }
        }
    }
    Ok(invites)
}

/// Why `sender` may not post this message, if only owners and admins
/// post in the main timeline and it is not a thread reply (`in_thread`).
pub(super) fn posting_refusal(
    state: &SequencerState,
    sender: &UserId,
    in_thread: bool,
) -> Option<&'static str> {
    (state.channel.posting == Posting::Admins && !in_thread && !state.role_of(sender).moderates())
        .then_some("only owners and admins post here: react, or reply in a thread")
}

impl Batch<'_> {
    /// `POST /v1/conversations/{id}/join` and `POST
    /// /v1/invites/{code}/accept`: a `members_added` system message whose
    /// actor is the user who joined.
    pub(super) fn join(
        &mut self,
        c: &JoinCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let by = &c.by;
        if self.answered_as_retry(by, reply_to) {
            return Ok(());
        }
        let key = key(&by.tenant, &by.conversation_id);
        let Some(Some(state)) = self.states.get(&key).cloned() else {
            self.refuse(reply_to, ErrorCode::NotFound, "no such conversation");
            return Ok(());
        };
        if state.members.contains(&by.actor) {
            self.done(reply_to, &by.conversation_id, false);
            return Ok(());
        }
        let invite = match self.join_refusal(&key, &state, c) {
            Ok(invite) => invite,
            Err((code, why)) => {
                self.refuse(reply_to, code, why);
                return Ok(());
            }
        };
        let joiner = std::slice::from_ref(&by.actor);
        if let Some(banned) = self.banned_among(&key, joiner) {
            let why = format!("{banned} is banned from this conversation");
            self.refuse(reply_to, ErrorCode::Forbidden, why);
            return Ok(());
        }
        if let Err(why) = self
            .policies
            .check_members(&by.tenant, state.members.len() + 1)
        {
            self.refuse(reply_to, ErrorCode::QuotaExceeded, why);
            return Ok(());
        }
        // The join's own system message is the first the newcomer reads.
        let first = state.last_seq + 1;
        if let Some(used) = &invite
            && let Some(list) = self.invites.get_mut(&key)
            && let Some(slot) = list.iter_mut().find(|i| i.code == used.code)
        {
            *slot = used.clone();
        }
        self.log.push_other(
            &key,
            Mutation::Join {
                key: key.clone(),
                user: by.actor.clone(),
                at: by.at,
                read_to: state.last_seq,
                history_from: (!state.channel.history_visible_to_new_members).then_some(first),
                invite,
            },
        );
        if !state.channel.history_visible_to_new_members
            && let Some(Some(s)) = self.states.get_mut(&key)
        {
            s.states.entry(by.actor.clone()).or_default().history_from = Some(first);
        }
        let members = self.admit(&key, &state, joiner);
        let event = SystemEvent::about(
            SystemEvent::MEMBERS_ADDED,
            by.actor.clone(),
            joiner.to_vec(),
        );
        let Some(client_msg_id) = system_client_msg_id(by.command_id) else {
            return Ok(());
        };
        self.append(
            &key,
            &by.actor,
            &by.device,
            client_msg_id,
            Content::System(event),
            members.into_iter().collect(),
        )?;
        self.done(reply_to, &by.conversation_id, true);
        Ok(())
    }

    /// Why the actor may not join, or the invite they join with, its use
    /// counted.
    fn join_refusal(
        &self,
        key: &ConversationKey,
        state: &SequencerState,
        c: &JoinCommand,
    ) -> Result<Option<Invite>, (ErrorCode, String)> {
        let by = &c.by;
        if state.kind == ConversationKind::Direct {
            return Err((
                ErrorCode::Forbidden,
                "a direct conversation has no joins".into(),
            ));
        }
        if let Some(why) = frozen_refusal(state, &by.actor, false) {
            return Err((ErrorCode::Forbidden, why.into()));
        }
        let Some(code) = &c.invite else {
            if state.channel.visibility != Visibility::Public {
                return Err((
                    ErrorCode::Forbidden,
                    "this conversation is not public: join it with an invite".into(),
                ));
            }
            return Ok(None);
        };
        let Some(invite) = self
            .invites
            .get(key)
            .and_then(|list| list.iter().find(|i| i.code == *code))
        else {
            return Err((ErrorCode::NotFound, "no such invite".into()));
        };
        if let Some(why) = invite.spent(self.now) {
            return Err((ErrorCode::Forbidden, why.into()));
        }
        let blocked = (
            by.tenant.clone(),
            invite.created_by.clone(),
            by.actor.clone(),
        );
        if self.blocking.contains(&blocked) {
            return Err((
                ErrorCode::Forbidden,
                "the user who made this invite does not accept you".into(),
            ));
        }
        Ok(Some(Invite {
            uses: invite.uses.saturating_add(1),
            ..invite.clone()
        }))
    }

    /// `POST` and `DELETE /v1/conversations/{id}/invites`: owners and
    /// admins (tenant admins too) of a group or channel. A retried create
    /// finds its invite (the gateway chose the code) and is done again.
    pub(super) fn invite(
        &mut self,
        c: &InviteCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some((key, state)) = self.member_state_for(&c.by, reply_to) else {
            return Ok(());
        };
        if state.kind == ConversationKind::Direct {
            self.refuse(
                reply_to,
                ErrorCode::Conflict,
                "a direct conversation has no invites",
            );
            return Ok(());
        }
        if !c.by.actor_is_admin && !state.role_of(&c.by.actor).moderates() {
            self.refuse(
                reply_to,
                ErrorCode::Forbidden,
                "only owners and admins manage invites",
            );
            return Ok(());
        }
        let list = self.invites.entry(key.clone()).or_default();
        let existing = list.iter().position(|i| i.code == c.code);
        let change = match (&c.create, existing) {
            (Some(_), Some(_)) => None,
            (Some(_), None) if list.len() >= MAX_INVITES => {
                self.refuse(
                    reply_to,
                    ErrorCode::QuotaExceeded,
                    format!("a conversation keeps at most {MAX_INVITES} invites: revoke one first"),
                );
                return Ok(());
            }
            (Some(create), None) => {
                if let Some(why) = create.refusal(c.by.at) {
                    self.refuse(reply_to, ErrorCode::InvalidRequest, why);
                    return Ok(());
                }
                let invite = Invite {
                    code: c.code.clone(),
                    conversation_id: c.by.conversation_id.clone(),
                    created_by: c.by.actor.clone(),
                    created_at: c.by.at,
                    max_uses: create.max_uses,
                    uses: 0,
                    expires_at: create.expires_at,
                };
                list.push(invite.clone());
                Some(Some(invite))
            }
            (None, Some(at)) => {
                list.remove(at);
                Some(None)
            }
            (None, None) => {
                self.refuse(reply_to, ErrorCode::NotFound, "no such invite");
                return Ok(());
            }
        };
        if let Some(invite) = change {
            self.log.push_other(
                &key,
                Mutation::SetInvite {
                    key: key.clone(),
                    code: c.code.clone(),
                    invite,
                },
            );
        }
        self.done(reply_to, &c.by.conversation_id, true);
        Ok(())
    }
}
