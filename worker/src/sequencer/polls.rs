//! Polls (v1.3): a member's vote, checked against the poll, the voter's
//! standing (membership, join, mute, freeze, blocks) and their current
//! choice; a poll's closing by its author, an owner or an admin. Each
//! change is a `poll_updated` for the members, coalesced like reactions
//! where the conversation fans out on read.

use switchboard_nats::envelope::{PinCommand, VoteCommand};
use switchboard_protocol::ServerFrame;
use switchboard_protocol::poll::{PollResults, VOTE_MARK_PREFIX, split_marks, vote_mark};

use super::batch::Batch;
use super::moderation::silenced;
use super::prelude::*;
use super::safety::blocked_refusal;

impl Batch<'_> {
    /// A refusal of a vote: on the reply subject of a REST vote, else an
    /// `error` frame to the voting device.
    fn refuse_vote(
        &mut self,
        c: &VoteCommand,
        reply_to: Option<&str>,
        code: ErrorCode,
        message: impl Into<String>,
    ) {
        if reply_to.is_some() {
            self.refuse(reply_to, code, message);
            return;
        }
        self.outcomes.push(Outcome::Reject {
            tenant: c.by.tenant.clone(),
            sender: c.by.actor.clone(),
            rejection: Rejection {
                device: c.by.device.clone(),
                request_type: request_type::VOTE.into(),
                client_msg_id: None,
                conversation_id: c.by.conversation_id.clone(),
                code,
                message: message.into(),
                message_id: Some(c.message_id),
                retry_after_ms: None,
            },
        });
    }

    /// The poll message `message_id` as `actor` may see it: stored, from
    /// after their join, not a shadow-banned sender's unless theirs.
    fn poll_for(
        &self,
        key: &ConversationKey,
        actor: &UserId,
        message_id: MessageId,
    ) -> Result<Message, (ErrorCode, &'static str)> {
        let not_found = (ErrorCode::NotFound, "no such message in this conversation");
        let Some(Some(state)) = self.states.get(key) else {
            return Err(not_found);
        };
        let message = self
            .messages
            .get(&(key.clone(), message_id))
            .filter(|m| state.reads(actor, m.seq) && m.seen_by(actor))
            .ok_or(not_found)?;
        if message.deleted_at.is_some() {
            return Err((ErrorCode::Conflict, "the message is deleted"));
        }
        if message.poll().is_none() {
            return Err((ErrorCode::InvalidRequest, "the message is no poll"));
        }
        Ok(message.clone())
    }

    pub(super) fn vote(
        &mut self,
        c: &VoteCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let key = key(&c.by.tenant, &c.by.conversation_id);
        let members: Vec<UserId> = match self.states.get(&key) {
            Some(Some(s)) if s.members.contains(&c.by.actor) => s.members.iter().cloned().collect(),
            Some(Some(_)) => {
                self.refuse_vote(
                    c,
                    reply_to,
                    ErrorCode::NotAMember,
                    "you are not a member of this conversation",
                );
                return Ok(());
            }
            _ => {
                self.refuse_vote(c, reply_to, ErrorCode::NotFound, "no such conversation");
                return Ok(());
            }
        };
        if let Some(Some(s)) = self.states.get(&key)
            && let Some(why) = silenced(s, &c.by.actor, c.by.actor_is_admin, self.now)
                .or_else(|| blocked_refusal(s, &c.by.actor).map(str::to_owned))
        {
            self.refuse_vote(c, reply_to, ErrorCode::Forbidden, why);
            return Ok(());
        }
        let mut message = match self.poll_for(&key, &c.by.actor, c.message_id) {
            Ok(m) => m,
            Err((code, why)) => {
                self.refuse_vote(c, reply_to, code, why);
                return Ok(());
            }
        };
        let Some((poll, mut results)) = message.take_poll() else {
            return Ok(());
        };
        if poll.is_closed(&results, self.now) {
            self.refuse_vote(c, reply_to, ErrorCode::Conflict, "the poll is closed");
            return Ok(());
        }
        let after = match poll.choice(&c.option_ids) {
            Ok(after) => after,
            Err(e) => {
                self.refuse_vote(c, reply_to, ErrorCode::InvalidRequest, e.to_string());
                return Ok(());
            }
        };
        let marks_key = (key.clone(), message.seq, c.by.actor.clone());
        let marks: Vec<String> = self
            .reactions
            .get(&marks_key)
            .map(|m| m.iter().cloned().collect())
            .unwrap_or_default();
        let (_, before) = split_marks(&marks);
        let changes = !(before.len() == after.len() && before.iter().all(|id| after.contains(id)));
        let route = self.route(&key);
        if changes {
            self.log.push_other(
                &key,
                Mutation::Vote {
                    key: key.clone(),
                    seq: message.seq,
                    user: c.by.actor.clone(),
                    options: after.clone(),
                    at: self.now,
                    inbox: route == Route::Users,
                },
            );
            results.apply(&c.by.actor, &before, &after);
            let entry = self.reactions.entry(marks_key).or_default();
            entry.retain(|m| !m.starts_with(VOTE_MARK_PREFIX));
            entry.extend(after.iter().map(|id| vote_mark(id)));
            self.touched.insert(key.clone());
        }
        message.poll_results = Some(results.clone());
        self.messages
            .insert((key.clone(), c.message_id), message.clone());
        // A repeat changes nothing: only the voter's devices hear the
        // results again. A change goes to every member (where the
        // conversation fans out on read, through its subject, where
        // events of a poll may be coalesced; the voter's devices then get
        // their own uncoalesced).
        let everyone = if changes { members } else { Vec::new() };
        self.poll_updated(&key, &message, &results, &c.by.actor, everyone, route);
        self.done(reply_to, &c.by.conversation_id, false);
        Ok(())
    }

    /// `POST .../messages/{message_id}/close`: its author, an owner or an
    /// admin of the conversation, or a tenant admin, ends the voting.
    pub(super) fn close_poll(
        &mut self,
        c: &PinCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some((key, state)) = self.member_state_for(&c.by, reply_to) else {
            return Ok(());
        };
        let mut message = match self.poll_for(&key, &c.by.actor, c.message_id) {
            Ok(m) => m,
            Err((code, why)) => {
                self.refuse(reply_to, code, why);
                return Ok(());
            }
        };
        let may = c.by.actor_is_admin
            || message.sender_id == c.by.actor
            || state.role_of(&c.by.actor).moderates();
        if !may {
            self.refuse(
                reply_to,
                ErrorCode::Forbidden,
                "only the poll's author, owners and admins close it",
            );
            return Ok(());
        }
        let Some((_, mut results)) = message.take_poll() else {
            return Ok(());
        };
        if results.closed {
            self.done(reply_to, &c.by.conversation_id, false);
            return Ok(());
        }
        let route = self.route(&key);
        self.log.push_other(
            &key,
            Mutation::ClosePoll {
                key: key.clone(),
                seq: message.seq,
                at: self.now,
                inbox: route == Route::Users,
            },
        );
        self.touched.insert(key.clone());
        results.closed = true;
        message.poll_results = Some(results.clone());
        self.messages
            .insert((key.clone(), c.message_id), message.clone());
        let members: Vec<UserId> = state.members.iter().cloned().collect();
        self.poll_updated(&key, &message, &results, &c.by.actor, members, route);
        self.done(reply_to, &c.by.conversation_id, true);
        Ok(())
    }

    /// The `poll_updated` of a change (to `everyone`) and the actor's own
    /// copy where the change's may be coalesced or there was none. A
    /// shadow-banned sender's poll is theirs alone, and so are its
    /// results.
    fn poll_updated(
        &mut self,
        key: &ConversationKey,
        message: &Message,
        results: &PollResults,
        actor: &UserId,
        everyone: Vec<UserId>,
        route: Route,
    ) {
        let frame = ServerFrame::PollUpdated {
            conversation_id: key.conversation_id.clone(),
            message_id: message.message_id,
            counts: results.counts.clone(),
            closed: message
                .poll()
                .is_some_and(|p| p.is_closed(results, self.now)),
            voters: results.voters.clone(),
        };
        let (everyone, route) = if message.shadow {
            (vec![actor.clone()], Route::Users)
        } else {
            (everyone, route)
        };
        if route == Route::Conversation || everyone.is_empty() {
            self.outcomes.push(Outcome::Event {
                tenant: key.tenant.clone(),
                conversation_id: key.conversation_id.clone(),
                frame: Box::new(frame.clone()),
                recipients: vec![actor.clone()],
                route: Route::Users,
            });
        }
        if !everyone.is_empty() {
            self.outcomes.push(Outcome::Event {
                tenant: key.tenant.clone(),
                conversation_id: key.conversation_id.clone(),
                frame: Box::new(frame),
                recipients: everyone,
                route,
            });
        }
    }
}
