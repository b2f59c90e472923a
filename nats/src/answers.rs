//! Sends, from the moment one is accepted to its answer: a state machine
//! with no IO, no clock and no NATS, shared by every way a send comes in.
//! A gateway's connection runs one for all its sends (`answering.rs`); a
//! caller that waits for one send's answer (a REST send, a scheduled send
//! at its time) runs one per send (`commands::answer`). The caller feeds
//! it what happens ([`Sends`]' methods are the events) and carries out
//! what it returns (the [`Action`]s: frames to write, sends to look up in
//! the store).
//!
//! The rule it keeps: every accepted send gets an answer (`ack` or
//! `error`) from one of
//! - its writer (the hub hands over the `ack` or the refusal),
//! - the store, when JetStream said the send was a duplicate, when NATS
//!   reconnected (an answer published meanwhile is lost: events are core
//!   NATS, at most once), or when the answer is overdue,
//! - a publish that failed (`unavailable`: the client sends it again),
//!
//! and a draining connection closes once every send is settled. A send is
//! settled when it is answered, or given up on after `give_up`, answered
//! `unavailable` (the client's resend, with the same `client_msg_id`,
//! then answers it).
//!
//! It also bounds a connection: at most `max_waiting` sends wait for
//! their answer, and at most `max_unstored_bytes` of content waits for
//! JetStream to store it (the partition's queue holds no more of this
//! connection than that).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use switchboard_protocol::{ClientMsgId, Content, ConversationId, ErrorCode, Message, ServerFrame};

/// How much a connection may have waiting.
#[derive(Debug, Clone, Copy)]
pub struct SendLimits {
    /// Sends waiting for their answer (`max_inflight_sends`).
    pub max_waiting: usize,
    /// Bytes of content of sends JetStream has not stored yet
    /// (`max_inflight_send_bytes`).
    pub max_unstored_bytes: usize,
    /// A send unanswered this long is looked up in the store, and again
    /// every as long.
    pub overdue: Duration,
    /// A send unanswered this long is given up on.
    pub give_up: Duration,
}

/// What JetStream said of a send it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PubAck {
    /// Stored: its writer answers it.
    New,
    /// A copy of one stored before, dropped: the original answers it.
    Duplicate,
}

/// What a look-up in the store found for a send.
#[derive(Debug, Clone)]
pub enum Found {
    Stored(Box<Message>),
    /// Its writer refused it (`sb_refused`).
    Refused {
        code: ErrorCode,
        message: String,
    },
    /// Neither: it is on its way, and its writer will answer.
    Nothing,
}

/// Something for the connection to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Write this frame to the client.
    Write(Box<ServerFrame>),
    /// Look these sends up in the store (each answer comes back as
    /// [`Sends::found`]).
    LookUp(Vec<(ConversationId, ClientMsgId)>),
    /// A send was answered this long after it was accepted.
    Answered(Duration),
}

/// Why a send was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

/// What became of an accepted send: the ticket its publish reports under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

#[derive(Debug)]
struct Waiting {
    conversation: ConversationId,
    accepted_at: Instant,
    /// The backbone connection's epoch when it was accepted: a reconnect
    /// after it may have lost its answer.
    epoch: u64,
    /// The copy this entry follows: later copies (the client sent it
    /// again before its answer) are answered with it.
    ticket: Ticket,
    /// Content bytes still waiting for JetStream, 0 once stored.
    unstored: usize,
    /// When it was last looked up in the store (or accepted).
    checked_at: Instant,
    /// A look-up is out.
    looking: bool,
    /// Stored as this rather than as sent (a moderation plugin rewrote
    /// it): the answer carries it.
    stored_content: Option<Content>,
}

/// The sends of one connection.
#[derive(Debug)]
pub struct Sends {
    limits: SendLimits,
    waiting: HashMap<ClientMsgId, Waiting>,
    unstored: usize,
    next_ticket: u64,
    draining: bool,
}

impl Sends {
    pub fn new(limits: SendLimits) -> Self {
        Self {
            limits,
            waiting: HashMap::new(),
            unstored: 0,
            next_ticket: 0,
            draining: false,
        }
    }

    /// A send of `bytes` of content to `conversation` was read and
    /// passed every check: take it, or say why not.
    pub fn accept(
        &mut self,
        id: &ClientMsgId,
        conversation: &ConversationId,
        bytes: usize,
        epoch: u64,
        now: Instant,
    ) -> Result<Ticket, Refusal> {
        if self.draining {
            return Err(Refusal {
                code: ErrorCode::Unavailable,
                message: "the gateway is restarting; send it again once reconnected".into(),
            });
        }
        self.next_ticket += 1;
        let ticket = Ticket(self.next_ticket);
        if self.waiting.contains_key(id) {
            // A copy: published again (harmless: idempotent), answered
            // with the send it copies.
            return Ok(ticket);
        }
        if self.waiting.len() >= self.limits.max_waiting {
            return Err(Refusal {
                code: ErrorCode::RateLimited,
                message: format!(
                    "{} sends are waiting for their answer on this connection; retry after an ack",
                    self.waiting.len()
                ),
            });
        }
        if self.unstored + bytes > self.limits.max_unstored_bytes && self.unstored > 0 {
            return Err(Refusal {
                code: ErrorCode::RateLimited,
                message: format!(
                    "{} bytes of sends are waiting for the backbone on this connection; retry after an ack",
                    self.unstored
                ),
            });
        }
        self.unstored += bytes;
        self.waiting.insert(
            id.clone(),
            Waiting {
                conversation: conversation.clone(),
                accepted_at: now,
                epoch,
                ticket,
                unstored: bytes,
                checked_at: now,
                looking: false,
                stored_content: None,
            },
        );
        Ok(ticket)
    }

    /// The accepted send is stored as `content`, not as its client sent
    /// it: its `ack` must say so.
    pub fn show_stored(&mut self, id: &ClientMsgId, content: Content) {
        if let Some(w) = self.waiting.get_mut(id) {
            w.stored_content = Some(content);
        }
    }

    /// What the send's `ack` must carry as the stored content, if it was
    /// not stored as sent.
    pub fn stored_content(&self, id: &ClientMsgId) -> Option<Content> {
        self.waiting.get(id)?.stored_content.clone()
    }

    /// JetStream answered the publish of `ticket`.
    pub fn pub_acked(&mut self, id: &ClientMsgId, ticket: Ticket, ack: PubAck) -> Vec<Action> {
        let Some(w) = self.followed(id, ticket) else {
            return Vec::new();
        };
        let bytes = std::mem::take(&mut w.unstored);
        let lookup = match ack {
            PubAck::New => None,
            PubAck::Duplicate => {
                w.looking = true;
                Some((w.conversation.clone(), id.clone()))
            }
        };
        self.unstored -= bytes;
        lookup
            .map(|send| vec![Action::LookUp(vec![send])])
            .unwrap_or_default()
    }

    /// The publish of `ticket` failed: the send is not stored, and the
    /// client must send it again.
    pub fn publish_failed(
        &mut self,
        id: &ClientMsgId,
        ticket: Ticket,
        why: &str,
        now: Instant,
    ) -> Vec<Action> {
        let Some(w) = self.followed(id, ticket) else {
            return Vec::new();
        };
        let conversation = w.conversation.clone();
        let refusal = ServerFrame::error_answering(
            ErrorCode::Unavailable,
            format!("{why}; retry"),
            Some(SEND_MESSAGE),
            Some(id.as_str()),
            Some(conversation.as_str()),
        );
        self.answer(id, refusal, now)
    }

    /// The writer's answer (an `ack` or an `error`) is being written to
    /// the client: the send is settled. The connection writes it whether
    /// or not the send is still followed here (a second `ack` carries the
    /// same `message_id`; a send of an earlier connection is answered on
    /// this one).
    pub fn answered(&mut self, id: &ClientMsgId, now: Instant) -> Vec<Action> {
        self.settle(id, now)
    }

    /// An answer found here: the send is settled, and `frame` written.
    fn answer(&mut self, id: &ClientMsgId, frame: ServerFrame, now: Instant) -> Vec<Action> {
        let mut actions = self.settle(id, now);
        actions.push(Action::Write(Box::new(frame)));
        actions
    }

    /// A look-up of a send in the store came back.
    pub fn found(&mut self, id: &ClientMsgId, found: Found, now: Instant) -> Vec<Action> {
        let Some(w) = self.waiting.get_mut(id) else {
            // Answered meanwhile.
            return Vec::new();
        };
        w.looking = false;
        w.checked_at = now;
        let conversation = w.conversation.clone();
        let rewritten = w.stored_content.is_some();
        match found {
            Found::Stored(message) if rewritten => {
                self.answer(id, ServerFrame::ack_showing_content(&message), now)
            }
            Found::Stored(message) => self.answer(id, ServerFrame::ack(&message), now),
            Found::Refused { code, message } => self.answer(
                id,
                ServerFrame::error_answering(
                    code,
                    message,
                    Some(SEND_MESSAGE),
                    Some(id.as_str()),
                    Some(conversation.as_str()),
                ),
                now,
            ),
            Found::Nothing => Vec::new(),
        }
    }

    /// The look-up failed: the send waits on, and is looked up again when
    /// overdue.
    pub fn lookup_failed(&mut self, id: &ClientMsgId, now: Instant) {
        if let Some(w) = self.waiting.get_mut(id) {
            w.looking = false;
            w.checked_at = now;
        }
    }

    /// NATS reconnected, to connection epoch `epoch`, a moment ago: the
    /// answers of sends accepted before it may be lost. Those are looked up.
    pub fn reconnected(&mut self, epoch: u64) -> Vec<Action> {
        let lost: Vec<_> = self
            .waiting
            .iter_mut()
            .filter(|(_, w)| w.epoch < epoch && !w.looking)
            .map(|(id, w)| {
                w.looking = true;
                (w.conversation.clone(), id.clone())
            })
            .collect();
        if lost.is_empty() {
            Vec::new()
        } else {
            vec![Action::LookUp(lost)]
        }
    }

    /// Time passed: sends overdue are looked up, and those past `give_up`
    /// are let go, each answered `unavailable`: the client is never left
    /// waiting (its writer is stalled, or the store is down), and its
    /// resend with the same `client_msg_id` is answered with what became
    /// of the send, as the contract says of `unavailable`.
    pub fn tick(&mut self, now: Instant) -> Vec<Action> {
        let give_up = self.limits.give_up;
        let gone: Vec<ClientMsgId> = self
            .waiting
            .iter()
            .filter(|(_, w)| now.saturating_duration_since(w.accepted_at) >= give_up)
            .map(|(id, _)| id.clone())
            .collect();
        let mut actions = Vec::new();
        for id in &gone {
            if let Some(w) = self.waiting.remove(id) {
                self.unstored -= w.unstored;
                actions.push(Action::Write(Box::new(ServerFrame::error_answering(
                    ErrorCode::Unavailable,
                    format!(
                        "no answer within {} s: the send may still be stored; send it again \
                         with the same client_msg_id",
                        give_up.as_secs()
                    ),
                    Some(SEND_MESSAGE),
                    Some(id.as_str()),
                    Some(w.conversation.as_str()),
                ))));
            }
        }
        let overdue = self.limits.overdue;
        let due: Vec<_> = self
            .waiting
            .iter_mut()
            .filter(|(_, w)| {
                w.unstored == 0
                    && !w.looking
                    && now.saturating_duration_since(w.checked_at) >= overdue
            })
            .map(|(id, w)| {
                w.looking = true;
                (w.conversation.clone(), id.clone())
            })
            .collect();
        if !due.is_empty() {
            actions.push(Action::LookUp(due));
        }
        actions
    }

    /// When [`Sends::tick`] has something to do next, if ever.
    pub fn next_tick(&self) -> Option<Instant> {
        self.waiting
            .values()
            .map(|w| {
                let overdue = w.checked_at + self.limits.overdue;
                let give_up = w.accepted_at + self.limits.give_up;
                if w.unstored == 0 && !w.looking {
                    overdue.min(give_up)
                } else {
                    give_up
                }
            })
            .min()
    }

    /// The gateway is shutting down: no new send is taken.
    pub fn drain(&mut self) {
        self.draining = true;
    }

    /// Every accepted send is answered or given up on.
    pub fn is_settled(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The entry `ticket` follows, if it is that send's.
    fn followed(&mut self, id: &ClientMsgId, ticket: Ticket) -> Option<&mut Waiting> {
        self.waiting.get_mut(id).filter(|w| w.ticket == ticket)
    }

    /// Forgets a send answered now, and times it.
    fn settle(&mut self, id: &ClientMsgId, now: Instant) -> Vec<Action> {
        let Some(w) = self.waiting.remove(id) else {
            return Vec::new();
        };
        self.unstored -= w.unstored;
        // A connection that had a burst in flight gives the room back once
        // it is answered; a small table stays for the next sends.
        if self.waiting.is_empty() && self.waiting.capacity() > 8 {
            self.waiting.shrink_to(0);
        }
        vec![Action::Answered(
            now.saturating_duration_since(w.accepted_at),
        )]
    }
}

/// The request type every answer here names.
const SEND_MESSAGE: &str = switchboard_protocol::frames::request_type::SEND_MESSAGE;

#[cfg(test)]
mod tests;
