//! Moderation without code in a conversation (v1.3): mutes and freezing,
//! checked here, by the conversation's writer, on every way in: a send
//! (socket, REST, scheduled, a thread reply), a reaction, an edit, a
//! member change and a join. Freezing is a field of the policy
//! (`PATCH`, `safety.rs`); a mute is a command of its own. Each change is
//! audited from here, after the commit ([`Batch::audit`]).

use serde_json::{Value, json};
use switchboard_nats::envelope::{Actor, BanCommand};
use switchboard_protocol::moderation::{AuditAction, AuditEntry, MAX_MUTES, Mute};

use switchboard_store::ConversationSettings;

use super::batch::Batch;
use super::prelude::*;

/// Why `actor` may not post, reply, react or edit here at `now`, if they
/// may not: they are muted, or the conversation is frozen and they are
/// neither an owner nor an admin of it (nor a tenant admin).
pub(super) fn silenced(
    state: &SequencerState,
    actor: &UserId,
    actor_is_admin: bool,
    now: Timestamp,
) -> Option<String> {
    if let Some(mute) = state
        .mutes
        .iter()
        .find(|m| m.user_id == *actor && m.holds_at(now))
    {
        return Some(match mute.until {
            Some(until) => format!("you are muted in this conversation until {until}"),
            None => "you are muted in this conversation".to_owned(),
        });
    }
    frozen_refusal(state, actor, actor_is_admin).map(str::to_owned)
}

/// Why `actor` may not change who is a member here, if they may not: the
/// conversation is frozen and they do not moderate it.
pub(super) fn frozen_refusal(
    state: &SequencerState,
    actor: &UserId,
    actor_is_admin: bool,
) -> Option<&'static str> {
    (state.policy.frozen && !actor_is_admin && !state.role_of(actor).moderates()).then_some(
        "this conversation is frozen: only its owners and admins post, react or change its members",
    )
}

impl Batch<'_> {
    /// `POST .../mutes` (`c.until`) and `DELETE .../mutes/{user}`
    /// (`mute` false): owners and admins mute a member, who stays but may
    /// not post, react or reply. A mute again replaces the first.
    pub(super) fn mute(
        &mut self,
        c: &BanCommand,
        mute: bool,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some((key, state)) = self.member_state_for(&c.by, reply_to) else {
            return Ok(());
        };
        if let Some((code, why)) = mute_refusal(&state, c, mute, self.now) {
            self.refuse(reply_to, code, why);
            return Ok(());
        }
        let mut mutes: Vec<Mute> = state
            .mutes
            .iter()
            .filter(|m| m.user_id != c.user && m.holds_at(self.now))
            .cloned()
            .collect();
        if mute {
            if mutes.len() >= MAX_MUTES {
                self.refuse(
                    reply_to,
                    ErrorCode::Conflict,
                    format!("a conversation keeps at most {MAX_MUTES} mutes: lift one first"),
                );
                return Ok(());
            }
            mutes.insert(
                0,
                Mute {
                    user_id: c.user.clone(),
                    by: c.by.actor.clone(),
                    muted_at: c.by.at,
                    until: c.until,
                },
            );
        } else if !state.mutes.iter().any(|m| m.user_id == c.user) {
            if self.replayed {
                self.audit(
                    &c.by,
                    AuditAction::MemberUnmuted,
                    Some(&c.user),
                    Value::Null,
                );
            }
            self.done(reply_to, &c.by.conversation_id, false);
            return Ok(());
        }
        self.set_settings(
            &key,
            ConversationSettings {
                policy: state.policy,
                custom: state.custom,
                channel: state.channel,
                mutes,
            },
        );
        if mute {
            let details = json!({ "until": c.until });
            self.audit(&c.by, AuditAction::MemberMuted, Some(&c.user), details);
        } else {
            self.audit(
                &c.by,
                AuditAction::MemberUnmuted,
                Some(&c.user),
                Value::Null,
            );
        }
        self.done(reply_to, &c.by.conversation_id, true);
        Ok(())
    }
}

/// Why a mute (or, `mute` false, its lifting) is refused, if it is.
fn mute_refusal(
    state: &SequencerState,
    c: &BanCommand,
    mute: bool,
    now: Timestamp,
) -> Option<(ErrorCode, &'static str)> {
    if state.kind == ConversationKind::Direct {
        return Some((
            ErrorCode::Conflict,
            "a direct conversation has no mutes: block the user instead",
        ));
    }
    if !c.by.actor_is_admin && !state.role_of(&c.by.actor).moderates() {
        return Some((ErrorCode::Forbidden, "only owners and admins mute members"));
    }
    if !mute {
        return None;
    }
    if !state.members.contains(&c.user) {
        return Some((ErrorCode::NotFound, "the user is not a member here"));
    }
    if state.role_of(&c.user).moderates() {
        return Some((
            ErrorCode::Forbidden,
            "owners and admins are not muted: change their role first",
        ));
    }
    if c.until.is_some_and(|until| until <= now) {
        return Some((ErrorCode::InvalidRequest, "until is in the past"));
    }
    None
}

impl Batch<'_> {
    /// Records a moderation change `by` made in their conversation (to
    /// `user`, if to someone) in the tenant's audit log, once the batch is
    /// committed. Its id is the command's, so a replay records it once.
    pub(super) fn audit(
        &mut self,
        by: &Actor,
        action: AuditAction,
        user: Option<&UserId>,
        details: Value,
    ) {
        let entry = AuditEntry {
            id: String::new(),
            at: by.at,
            actor: by.actor.clone(),
            action,
            user_id: user.cloned(),
            conversation_id: Some(by.conversation_id.clone()),
            details,
        };
        self.outcomes.push(Outcome::Audited {
            tenant: by.tenant.clone(),
            entry: Box::new(entry),
            id: format!("audit-{}", by.command_id),
        });
    }
}
