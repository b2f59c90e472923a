//! Safety (v1.2): blocks between two users, bans and slow mode in a
//! conversation, and the settings that affect every member. Every path
//! that writes (WebSocket and REST sends, reactions, membership, plugin
//! replays) reaches the conversation's writer, so these checks hold
//! whichever gateway a command came through.

use std::collections::hash_map::Entry;

use switchboard_nats::envelope::{
    Actor, BanCommand, BlockCommand, PolicyCommand, direct_conversation_id,
};
use switchboard_protocol::Role;
use switchboard_protocol::custom::{MAX_CUSTOM_BYTES, merged};
use switchboard_protocol::reports::Report;
use switchboard_protocol::safety::{Ban, BlockAction};
use switchboard_store::ConversationSettings;

use super::batch::Batch;
use super::prelude::*;

/// Bans one conversation keeps at most: the list is read whole when
/// members are added.
pub const MAX_BANS: usize = 1000;

/// Why a member of a direct conversation may not write in it, if either
/// side blocks the other: neither writes until the block is lifted.
pub(super) fn blocked_refusal(state: &SequencerState, actor: &UserId) -> Option<&'static str> {
    if state.kind != ConversationKind::Direct || state.blocked_by.is_empty() {
        return None;
    }
    Some(if state.blocked_by.contains(actor) {
        "you blocked this user: unblock them to write to them"
    } else {
        "this user does not accept your messages"
    })
}

/// Why `by` may not ban `user` here, if they may not: owners and admins
/// ban (tenant admins too), an admin bans members only, and nobody bans
/// an owner or themselves.
pub(super) fn ban_refusal(
    state: &SequencerState,
    by: &Actor,
    user: &UserId,
) -> Option<(ErrorCode, &'static str)> {
    if state.kind == ConversationKind::Direct {
        return Some((
            ErrorCode::Conflict,
            "a direct conversation has no bans: block the user instead",
        ));
    }
    if *user == by.actor {
        return Some((ErrorCode::Forbidden, "you cannot ban yourself"));
    }
    let target = if state.members.contains(user) {
        state.role_of(user)
    } else {
        Role::Member
    };
    if target == Role::Owner {
        return Some((
            ErrorCode::Forbidden,
            "an owner cannot be banned: change their role first",
        ));
    }
    if by.actor_is_admin {
        return None;
    }
    match (state.role_of(&by.actor), target) {
        (Role::Owner, _) | (Role::Admin, Role::Member) => None,
        (Role::Admin, _) => Some((ErrorCode::Forbidden, "only an owner bans an admin")),
        (Role::Member, _) => Some((ErrorCode::Forbidden, "only owners and admins ban")),
    }
}

/// Rows of a sender read to find their last send: system messages they
/// caused (a pin, a member added) are passed over.
const RECALLED_ROWS: usize = 4;

/// Slow mode across a hand-over: a sender's last send in a conversation
/// with slow mode, when this writer does not know it (it took the
/// partition over, or its cache started over), is read from the sender's
/// own rows (`sent_by`): their newest message there that is no system
/// message. One read per sender and conversation per writer; a sender
/// with none is remembered as having sent at the epoch.
pub(super) async fn recall_last_sends(
    store: &dyn Store,
    batch: &[Incoming],
    states: &HashMap<ConversationKey, Option<SequencerState>>,
    last_sent: &mut LastSent,
) -> Result<(), SequenceError> {
    let mut asked = HashSet::new();
    for incoming in batch {
        let Command::Send(c) = &incoming.command else {
            continue;
        };
        let key = key(&c.tenant, &c.conversation_id);
        let Some(Some(state)) = states.get(&key) else {
            continue;
        };
        let known = last_sent
            .get(&key)
            .is_some_and(|senders| senders.contains_key(&c.sender));
        if state.policy.slow_mode_secs == 0
            || state.role_of(&c.sender).moderates()
            || known
            || !asked.insert((key.clone(), c.sender.clone()))
        {
            continue;
        }
        let rows = store.sent_by(&key, &c.sender, None, RECALLED_ROWS).await?;
        let at = rows
            .into_iter()
            .filter_map(|row| row.message)
            .find(|m| !matches!(m.content, Some(Content::System(_))))
            .map_or(Timestamp::from_unix_ms(0), |m| m.created_at);
        last_sent
            .entry(key)
            .or_default()
            .insert(c.sender.clone(), at);
    }
    Ok(())
}

/// What a batch's safety checks read: the bans of the conversations it
/// adds members to, bans or unbans in (or resolves reports of), the blocks
/// between the users of each direct conversation it creates, and the
/// reports it resolves.
#[derive(Default)]
pub(super) struct Reads {
    pub bans: HashMap<ConversationKey, Vec<Ban>>,
    pub blocking: HashSet<(TenantId, UserId, UserId)>,
    pub reports: HashMap<MessageId, Report>,
}

pub(super) async fn load(store: &dyn Store, batch: &[Incoming]) -> Result<Reads, SequenceError> {
    let Reads {
        mut bans,
        mut blocking,
        mut reports,
    } = Reads::default();
    for incoming in batch {
        if let Command::ResolveReport(c) = &incoming.command
            && let Some(report) = store.report(&c.by.tenant, c.report_id).await?
        {
            reports.insert(c.report_id, report);
        }
        match &incoming.command {
            Command::AddMembers(_)
            | Command::Join(_)
            | Command::Ban(_)
            | Command::Unban(_)
            | Command::ResolveReport(_) => {
                if let Entry::Vacant(slot) = bans.entry(conversation_key(&incoming.command)) {
                    let found = store.bans(slot.key()).await?;
                    slot.insert(found);
                }
            }
            Command::CreateConversation(c) if c.kind == ConversationKind::Direct => {
                for user in &c.members {
                    for b in store.blocks(&c.tenant, user).await? {
                        blocking.insert((c.tenant.clone(), user.clone(), b.user_id));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Reads {
        bans,
        blocking,
        reports,
    })
}

impl Batch<'_> {
    /// Why `actor` may not open (or reopen) a direct conversation with
    /// the other of `members`, if either blocks the other.
    pub(super) fn direct_blocked(
        &self,
        key: &ConversationKey,
        tenant: &TenantId,
        actor: &UserId,
        members: &BTreeSet<UserId>,
    ) -> Option<&'static str> {
        if let Some(Some(state)) = self.states.get(key) {
            return blocked_refusal(state, actor);
        }
        let other = members.iter().find(|u| *u != actor)?;
        let blocks = |a: &UserId, b: &UserId| {
            self.blocking
                .contains(&(tenant.clone(), a.clone(), b.clone()))
        };
        if blocks(actor, other) {
            Some("you blocked this user: unblock them to write to them")
        } else if blocks(other, actor) {
            Some("this user does not accept your messages")
        } else {
            None
        }
    }

    /// The first of `users` banned here now, if any is.
    pub(super) fn banned_among(&self, key: &ConversationKey, users: &[UserId]) -> Option<UserId> {
        let bans = self.bans.get(key)?;
        users
            .iter()
            .find(|u| {
                bans.iter()
                    .any(|b| b.user_id == **u && b.holds_at(self.now))
            })
            .cloned()
    }

    /// How long `sender` must still wait under slow mode, in ms, if they
    /// must: owners and admins never wait.
    pub(super) fn slow_mode_wait(
        &self,
        key: &ConversationKey,
        state: &SequencerState,
        sender: &UserId,
    ) -> Option<u64> {
        let every = u64::from(state.policy.slow_mode_secs) * 1000;
        if every == 0 || state.role_of(sender).moderates() {
            return None;
        }
        let last = self
            .sent_at
            .get(&(key.clone(), sender.clone()))
            .or_else(|| self.last_sent.get(key).and_then(|m| m.get(sender)))?;
        let since = u64::try_from(self.now.unix_ms() - last.unix_ms()).unwrap_or(0);
        (since < every).then(|| every - since)
    }

    /// `sender` sent now, where slow mode counts it.
    pub(super) fn sent_now(&mut self, key: &ConversationKey, sender: &UserId) {
        if let Some(Some(state)) = self.states.get(key)
            && state.policy.slow_mode_secs > 0
        {
            self.sent_at.insert((key.clone(), sender.clone()), self.now);
        }
    }

    /// `PUT/DELETE /v1/blocks/{user}`: recorded by the writer of the
    /// pair's direct conversation, which from then on refuses its sends;
    /// told to the actor's devices.
    pub(super) fn block(
        &mut self,
        c: &BlockCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let by = &c.by;
        if c.user == by.actor {
            self.refuse(
                reply_to,
                ErrorCode::InvalidRequest,
                "you cannot block yourself",
            );
            return Ok(());
        }
        if direct_conversation_id(&by.actor, &c.user).as_ref() != Some(&by.conversation_id) {
            self.refuse(
                reply_to,
                ErrorCode::InvalidRequest,
                "a block goes to the pair's direct conversation",
            );
            return Ok(());
        }
        let key = key(&by.tenant, &by.conversation_id);
        let blocked = c.action == BlockAction::Block;
        self.log.push_other(
            &key,
            Mutation::SetBlock {
                tenant: by.tenant.clone(),
                user: by.actor.clone(),
                target: c.user.clone(),
                at: blocked.then_some(by.at),
            },
        );
        let pair = (by.tenant.clone(), by.actor.clone(), c.user.clone());
        if blocked {
            self.blocking.insert(pair);
        } else {
            self.blocking.remove(&pair);
        }
        if let Some(Some(state)) = self.states.get_mut(&key) {
            if blocked {
                state.blocked_by.insert(by.actor.clone());
            } else {
                state.blocked_by.remove(&by.actor);
            }
            self.touched.insert(key.clone());
        }
        self.outcomes.push(Outcome::Event {
            tenant: by.tenant.clone(),
            conversation_id: by.conversation_id.clone(),
            frame: Box::new(ServerFrame::BlocksChanged {
                user_id: c.user.clone(),
                action: c.action,
            }),
            recipients: vec![by.actor.clone()],
            route: Route::Users,
        });
        self.done(reply_to, &by.conversation_id, true);
        Ok(())
    }

    /// `POST .../bans`: the ban, and the user taken out if a member; a
    /// `member_banned` system message for everyone who was a member.
    pub(super) fn ban(
        &mut self,
        c: &BanCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some((key, state)) = self.member_state_for(&c.by, reply_to) else {
            return Ok(());
        };
        if self.answered_as_retry(&c.by, reply_to) {
            return Ok(());
        }
        if let Some((code, why)) = ban_refusal(&state, &c.by, &c.user) {
            self.refuse(reply_to, code, why);
            return Ok(());
        }
        if c.until.is_some_and(|until| until <= self.now) {
            self.refuse(reply_to, ErrorCode::Conflict, "until is in the past");
            return Ok(());
        }
        let bans = self.bans.entry(key.clone()).or_default();
        if bans.len() >= MAX_BANS && !bans.iter().any(|b| b.user_id == c.user) {
            self.refuse(
                reply_to,
                ErrorCode::Conflict,
                format!("a conversation keeps at most {MAX_BANS} bans: lift one first"),
            );
            return Ok(());
        }
        let ban = Ban {
            user_id: c.user.clone(),
            by: c.by.actor.clone(),
            banned_at: c.by.at,
            until: c.until,
        };
        bans.retain(|b| b.user_id != c.user);
        bans.insert(0, ban.clone());
        self.log.push_other(
            &key,
            Mutation::Ban {
                key: key.clone(),
                ban,
            },
        );
        let audience: Vec<UserId> = state.members.iter().cloned().collect();
        if state.members.contains(&c.user) {
            self.take_out(&key, &state, std::slice::from_ref(&c.user));
        }
        let mut event = SystemEvent::about(
            SystemEvent::MEMBER_BANNED,
            c.by.actor.clone(),
            vec![c.user.clone()],
        );
        event.until = c.until;
        self.announce(&c.by, &key, event, audience, reply_to)
    }

    /// `DELETE .../bans/{user}`: lifts a ban; a `member_unbanned` system
    /// message for the members. The user is not added back.
    pub(super) fn unban(
        &mut self,
        c: &BanCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some((key, state)) = self.member_state_for(&c.by, reply_to) else {
            return Ok(());
        };
        if self.answered_as_retry(&c.by, reply_to) {
            return Ok(());
        }
        if !c.by.actor_is_admin && !state.role_of(&c.by.actor).moderates() {
            self.refuse(
                reply_to,
                ErrorCode::Forbidden,
                "only owners and admins lift bans",
            );
            return Ok(());
        }
        let bans = self.bans.entry(key.clone()).or_default();
        if !bans.iter().any(|b| b.user_id == c.user) {
            self.done(reply_to, &c.by.conversation_id, false);
            return Ok(());
        }
        bans.retain(|b| b.user_id != c.user);
        self.log.push_other(
            &key,
            Mutation::Unban {
                key: key.clone(),
                user: c.user.clone(),
            },
        );
        let event = SystemEvent::about(
            SystemEvent::MEMBER_UNBANNED,
            c.by.actor.clone(),
            vec![c.user.clone()],
        );
        let audience = state.members.iter().cloned().collect();
        self.announce(&c.by, &key, event, audience, reply_to)
    }

    /// `PATCH /v1/conversations/{id}`: slow mode, retention, disappearing
    /// messages, custom fields and (v1.3) the channel settings; a
    /// `conversation_updated` system message with the result.
    /// In a direct conversation either member sets retention and
    /// disappearing messages; there is no slow mode there.
    pub(super) fn set_policy(
        &mut self,
        c: &PolicyCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some((key, state)) = self.member_state_for(&c.by, reply_to) else {
            return Ok(());
        };
        if self.answered_as_retry(&c.by, reply_to) {
            // Made before (a replay): its freezing or thawing is audited
            // again, in case a crash lost the entry.
            if let Some(frozen) = c.patch.frozen.filter(|f| *f == state.policy.frozen) {
                self.audit(&c.by, frozen_action(frozen), None, serde_json::Value::Null);
            }
            return Ok(());
        }
        if let Err(why) = c.patch.check() {
            self.refuse(reply_to, ErrorCode::InvalidRequest, why);
            return Ok(());
        }
        if state.kind == ConversationKind::Direct {
            if c.patch.names_channel_settings() {
                self.refuse(
                    reply_to,
                    ErrorCode::Conflict,
                    "a direct conversation has no visibility, posting, topic or history setting",
                );
                return Ok(());
            }
            if c.patch.slow_mode_secs.is_some_and(|s| s > 0) {
                self.refuse(
                    reply_to,
                    ErrorCode::Conflict,
                    "a direct conversation has no slow mode",
                );
                return Ok(());
            }
            if c.patch.frozen == Some(true) {
                self.refuse(
                    reply_to,
                    ErrorCode::Conflict,
                    "a direct conversation is not frozen: block the user instead",
                );
                return Ok(());
            }
        } else if !c.by.actor_is_admin && !state.role_of(&c.by.actor).moderates() {
            self.refuse(
                reply_to,
                ErrorCode::Forbidden,
                "only owners and admins change settings that affect everyone",
            );
            return Ok(());
        }
        let policy = state.policy.patched(&c.patch);
        let custom = match &c.patch.custom {
            Some(patch) => match merged(&state.custom, patch) {
                Some(custom) => custom,
                None => {
                    self.refuse(
                        reply_to,
                        ErrorCode::InvalidRequest,
                        format!("custom is at most {MAX_CUSTOM_BYTES} bytes of JSON"),
                    );
                    return Ok(());
                }
            },
            None => state.custom.clone(),
        };
        let custom_changed = custom != state.custom;
        let channel = state.channel.clone().patched(&c.patch);
        if policy == state.policy && !custom_changed && channel == state.channel {
            self.done(reply_to, &c.by.conversation_id, false);
            return Ok(());
        }
        self.set_settings(
            &key,
            ConversationSettings {
                policy,
                custom: custom.clone(),
                channel: channel.clone(),
                mutes: state.mutes.clone(),
            },
        );
        if policy.frozen != state.policy.frozen {
            let action = frozen_action(policy.frozen);
            self.audit(&c.by, action, None, serde_json::Value::Null);
        }
        let mut event = SystemEvent::about(
            SystemEvent::CONVERSATION_UPDATED,
            c.by.actor.clone(),
            Vec::new(),
        );
        event.policy = Some(policy);
        event.custom = custom_changed.then_some(custom);
        event.channel = Some(channel);
        let audience = state.members.iter().cloned().collect();
        self.announce(&c.by, &key, event, audience, reply_to)
    }

    /// The conversation's settings (its policy, custom fields, channel
    /// settings and mutes) are `settings` from now on: written by the
    /// batch's commit, and kept in the writer's state for the commands
    /// after.
    pub(super) fn set_settings(&mut self, key: &ConversationKey, settings: ConversationSettings) {
        if let Some(Some(s)) = self.states.get_mut(key) {
            s.policy = settings.policy;
            s.custom = settings.custom.clone();
            s.channel = settings.channel.clone();
            s.mutes = settings.mutes.clone();
        }
        let ConversationSettings {
            policy,
            custom,
            channel,
            mutes,
        } = settings;
        self.log.push_other(
            key,
            Mutation::SetPolicy {
                key: key.clone(),
                policy,
                custom,
                channel,
                mutes,
            },
        );
        self.touched.insert(key.clone());
    }

    /// A v1.2 command's system message (keyed by the command's id, which
    /// makes a retry find it), and the command's reply.
    fn announce(
        &mut self,
        by: &Actor,
        key: &ConversationKey,
        event: SystemEvent,
        audience: Vec<UserId>,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        if let Some(client_msg_id) = system_client_msg_id(by.command_id) {
            self.append(
                key,
                &by.actor,
                &by.device,
                client_msg_id,
                Content::System(event),
                audience,
            )?;
        }
        self.done(reply_to, &by.conversation_id, true);
        Ok(())
    }
}

/// The audit action of freezing (`true`) or thawing.
fn frozen_action(frozen: bool) -> switchboard_protocol::moderation::AuditAction {
    use switchboard_protocol::moderation::AuditAction;
    if frozen {
        AuditAction::ConversationFrozen
    } else {
        AuditAction::ConversationThawed
    }
}
