//! Reactions (v1.1): checked against the message, its counts and the
//! reactor's own emoji, then a `reaction` event for the members.

use std::collections::BTreeSet;

use switchboard_nats::envelope::ReactCommand;
use switchboard_protocol::poll::VOTE_MARK_PREFIX;
use switchboard_protocol::reaction::{
    self, MAX_EMOJI_PER_MESSAGE, MAX_REACTIONS_PER_USER, check_emoji,
};
use switchboard_protocol::{ReactAction, ServerFrame};

use super::batch::{Batch, UserReactions};
use super::moderation::silenced;
use super::prelude::*;
use super::safety::blocked_refusal;

impl Batch<'_> {
    fn refuse_react(&mut self, c: &ReactCommand, code: ErrorCode, message: impl Into<String>) {
        self.outcomes.push(Outcome::Reject {
            tenant: c.by.tenant.clone(),
            sender: c.by.actor.clone(),
            rejection: Rejection {
                device: c.by.device.clone(),
                request_type: request_type::REACT.into(),
                client_msg_id: None,
                conversation_id: c.by.conversation_id.clone(),
                code,
                message: message.into(),
                message_id: Some(c.message_id),
                retry_after_ms: None,
            },
        });
    }

    pub(super) fn react(&mut self, c: &ReactCommand) -> Result<(), SequenceError> {
        let key = key(&c.by.tenant, &c.by.conversation_id);
        let members: Vec<UserId> = match self.states.get(&key) {
            Some(Some(s)) if s.members.contains(&c.by.actor) => s.members.iter().cloned().collect(),
            Some(Some(_)) => {
                self.refuse_react(
                    c,
                    ErrorCode::NotAMember,
                    "you are not a member of this conversation",
                );
                return Ok(());
            }
            _ => {
                self.refuse_react(c, ErrorCode::NotFound, "no such conversation");
                return Ok(());
            }
        };
        if let Some(Some(s)) = self.states.get(&key)
            && let Some(why) = silenced(s, &c.by.actor, c.by.actor_is_admin, self.now)
                .or_else(|| blocked_refusal(s, &c.by.actor).map(str::to_owned))
        {
            self.refuse_react(c, ErrorCode::Forbidden, why);
            return Ok(());
        }
        if let Err(e) = check_emoji(&c.emoji) {
            self.refuse_react(c, ErrorCode::InvalidRequest, e.to_string());
            return Ok(());
        }
        // A message from before the reactor joined is none of theirs, nor
        // is a shadow-banned sender's, unless theirs (v1.3).
        let readable = |m: &Message| match self.states.get(&key) {
            Some(Some(s)) => s.reads(&c.by.actor, m.seq) && m.seen_by(&c.by.actor),
            _ => false,
        };
        let found = self
            .messages
            .get(&(key.clone(), c.message_id))
            .filter(|m| readable(m))
            .cloned();
        let Some(mut message) = found else {
            self.refuse_react(
                c,
                ErrorCode::NotFound,
                "no such message in this conversation",
            );
            return Ok(());
        };
        if message.deleted_at.is_some() {
            self.refuse_react(c, ErrorCode::Conflict, "the message is deleted");
            return Ok(());
        }
        let mine_key = (key.clone(), message.seq, c.by.actor.clone());
        let mine = self.reactions.get(&mine_key).cloned().unwrap_or_default();
        let has = mine.contains(&c.emoji);
        // A vote is kept among the voter's marks; only emoji count here.
        let emoji_count = mine
            .iter()
            .filter(|m| !m.starts_with(VOTE_MARK_PREFIX))
            .count();
        let changes = match c.action {
            ReactAction::Add => !has,
            ReactAction::Remove => has,
        };
        if changes && c.action == ReactAction::Add {
            if emoji_count >= MAX_REACTIONS_PER_USER {
                self.refuse_react(
                    c,
                    ErrorCode::Conflict,
                    format!(
                        "you may react to one message with at most {MAX_REACTIONS_PER_USER} emoji"
                    ),
                );
                return Ok(());
            }
            let new_emoji = !message.reactions.iter().any(|r| r.emoji == c.emoji);
            if new_emoji && message.reactions.len() >= MAX_EMOJI_PER_MESSAGE {
                self.refuse_react(
                    c,
                    ErrorCode::Conflict,
                    format!("a message carries at most {MAX_EMOJI_PER_MESSAGE} different emoji"),
                );
                return Ok(());
            }
        }
        let route = self.route(&key);
        if changes {
            self.log.push_other(
                &key,
                Mutation::React {
                    key: key.clone(),
                    seq: message.seq,
                    user: c.by.actor.clone(),
                    emoji: c.emoji.clone(),
                    action: c.action,
                    at: self.now,
                    inbox: route == Route::Users,
                },
            );
            reaction::apply(&mut message.reactions, &c.emoji, c.action);
            let entry = self.reactions.entry(mine_key).or_default();
            match c.action {
                ReactAction::Add => entry.insert(c.emoji.clone()),
                ReactAction::Remove => entry.remove(&c.emoji),
            };
            self.messages
                .insert((key.clone(), c.message_id), message.clone());
            self.touched.insert(key.clone());
        }
        let frame = ServerFrame::Reaction {
            conversation_id: key.conversation_id.clone(),
            message_id: c.message_id,
            user_id: c.by.actor.clone(),
            emoji: c.emoji.clone(),
            action: c.action,
            counts: reaction::counts(&message.reactions),
        };
        // A repeat changes nothing: only the reactor's devices hear the
        // state again. A change goes to every member (where the
        // conversation fans out on read, through its subject, where
        // events of a message may be coalesced; the reactor's devices then
        // get their own uncoalesced).
        let everyone = if changes { members } else { Vec::new() };
        // Only its sender sees a shadow-banned sender's message, so only
        // they hear of its reactions (theirs: nobody else can react).
        let (everyone, route) = if message.shadow {
            (vec![c.by.actor.clone()], Route::Users)
        } else {
            (everyone, route)
        };
        if route == Route::Conversation || !changes {
            self.outcomes.push(Outcome::Event {
                tenant: key.tenant.clone(),
                conversation_id: key.conversation_id.clone(),
                frame: Box::new(frame.clone()),
                recipients: vec![c.by.actor.clone()],
                route: Route::Users,
            });
        }
        if changes {
            self.outcomes.push(Outcome::Event {
                tenant: key.tenant.clone(),
                conversation_id: key.conversation_id.clone(),
                frame: Box::new(frame),
                recipients: everyone,
                route,
            });
            if c.action == ReactAction::Add {
                self.reaction_push(&key, &message, c, route);
            }
        }
        Ok(())
    }

    /// A push for the author of the message `c` reacted to, where their
    /// settings let a message that names them push (a reaction is about
    /// them), and the conversation pushes at all (fan-out on write).
    fn reaction_push(
        &mut self,
        key: &ConversationKey,
        message: &Message,
        c: &ReactCommand,
        route: Route,
    ) {
        let author = &message.sender_id;
        let pushes = route == Route::Users
            && author != &c.by.actor
            && !message.shadow
            && matches!(self.states.get(key), Some(Some(s))
                if s.members.contains(author) && s.settings_of(author).pushes(self.now, true));
        if pushes {
            self.outcomes.push(Outcome::ReactionPush {
                tenant: key.tenant.clone(),
                conversation_id: key.conversation_id.clone(),
                message_id: message.message_id,
                seq: message.seq,
                author: author.clone(),
                by: c.by.actor.clone(),
                emoji: c.emoji.clone(),
                at: self.now,
            });
        }
    }
}

/// The reactors' and voters' own marks (emoji and votes) on the
/// messages the batch's reactions and votes name.
pub(super) async fn load(
    store: &dyn Store,
    batch: &[Incoming],
    messages: &HashMap<(ConversationKey, MessageId), Message>,
) -> Result<UserReactions, SequenceError> {
    let mut asked: BTreeSet<(ConversationKey, UserId, u64)> = BTreeSet::new();
    for i in batch {
        let (by, message_id) = match &i.command {
            Command::React(c) => (&c.by, c.message_id),
            Command::Vote(c) => (&c.by, c.message_id),
            _ => continue,
        };
        let k = key(&by.tenant, &by.conversation_id);
        if let Some(m) = messages.get(&(k.clone(), message_id)) {
            asked.insert((k, by.actor.clone(), m.seq));
        }
    }
    let mut out = UserReactions::new();
    for (k, user, seq) in asked {
        let found = store.user_reactions(&k, &user, vec![seq]).await?;
        let emoji = found.into_iter().next().unwrap_or_default();
        out.insert((k, seq, user), emoji.into_iter().collect());
    }
    Ok(out)
}
