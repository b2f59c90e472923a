//! A connection's sends that wait for their answer.
//!
//! A send the backbone stored is answered by its partition's writer: an
//! `ack` or an `error`, published to the sender's gateway as a core NATS
//! message, which the hub hands to the connection (`hub.rs`). That
//! delivery is at most once: an answer published while this gateway's
//! connection to NATS is broken (its node died; it reconnects to another
//! within milliseconds) is lost. So each connection keeps what it waits
//! for, and after a reconnect answers from the store those of its earlier
//! sends that are stored and still unanswered (`Connection::
//! answer_from_the_store`), instead of leaving them to the client's
//! resend. The same table times each send to its ack.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use switchboard_protocol::{ClientMsgId, ConversationId};

/// A connection's answers to its sends, as they reach it.
#[derive(Default)]
pub(crate) struct Answers {
    /// How many, so that a draining connection knows when it has them all.
    pub count: AtomicU64,
    /// Sends that wait for an answer, by `client_msg_id`.
    waiting: Mutex<HashMap<ClientMsgId, Waiting>>,
}

struct Waiting {
    conversation: ConversationId,
    /// When it arrived: the send→ack latency.
    since: Instant,
    /// `switchboard_backbone::connection_epoch` when it arrived: a
    /// reconnect after it may have lost its answer.
    epoch: u64,
    /// JetStream's pub-ack said it was stored new: the connection counts
    /// it among the answers to come (`Connection::stored`).
    counted: bool,
}

impl Answers {
    /// Sends followed at most; past that, a send is neither timed nor
    /// answered from the store, and a lost ack is left to the client's
    /// resend (a client with that many unanswered sends a burst, up to
    /// `max_inflight_sends`, or is not reading).
    pub const FOLLOWED: usize = 256;

    /// A send of `client_msg_id` to `conversation` is on its way.
    pub fn sent(&self, conversation: &ConversationId, client_msg_id: &ClientMsgId) {
        if let Ok(mut waiting) = self.waiting.lock()
            && waiting.len() < Self::FOLLOWED
        {
            waiting.insert(
                client_msg_id.clone(),
                Waiting {
                    conversation: conversation.clone(),
                    since: Instant::now(),
                    epoch: switchboard_backbone::connection_epoch(),
                    counted: false,
                },
            );
        }
    }

    /// The writer's ack of `client_msg_id` leaves now (whether or not it
    /// was still waited for: a second ack carries the same `message_id`).
    pub fn acked(&self, client_msg_id: &str) {
        crate::metrics::acked(self.take(client_msg_id).map(|w| w.since.elapsed()));
    }

    /// JetStream stored `client_msg_id` as new: its writer's answer is
    /// counted as one to come.
    pub fn stored(&self, client_msg_id: &str) {
        if let Ok(mut waiting) = self.waiting.lock()
            && let Some(w) = waiting.get_mut(client_msg_id)
        {
            w.counted = true;
        }
    }

    /// The ack of `client_msg_id` found in the store after a reconnect
    /// leaves now, unless its writer's answer came meanwhile (`None`).
    /// `Some(true)` when it was counted as an answer to come (its pub-ack
    /// came), so that this answer counts instead of the writer's.
    pub fn acked_from_the_store(&self, client_msg_id: &str) -> Option<bool> {
        let w = self.take(client_msg_id)?;
        crate::metrics::acked(Some(w.since.elapsed()));
        Some(w.counted)
    }

    /// `client_msg_id` was answered with an error.
    pub fn refused(&self, client_msg_id: &str) {
        self.take(client_msg_id);
    }

    /// The sends still waiting that arrived before connection epoch
    /// `epoch`: (conversation, client_msg_id).
    pub fn waiting_since_before(&self, epoch: u64) -> Vec<(ConversationId, ClientMsgId)> {
        self.waiting.lock().map_or_else(
            |_| Vec::new(),
            |waiting| {
                waiting
                    .iter()
                    .filter(|(_, w)| w.epoch < epoch)
                    .map(|(id, w)| (w.conversation.clone(), id.clone()))
                    .collect()
            },
        )
    }

    fn take(&self, client_msg_id: &str) -> Option<Waiting> {
        let mut waiting = self.waiting.lock().ok()?;
        let taken = waiting.remove(client_msg_id);
        // A connection that had a burst in flight gives the room back once
        // it is answered; a small table stays for the next sends.
        if waiting.is_empty() && waiting.capacity() > 8 {
            waiting.shrink_to(0);
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(i: usize) -> (ConversationId, ClientMsgId) {
        (
            ConversationId::new("c").unwrap(),
            ClientMsgId::new(format!("m{i}")).unwrap(),
        )
    }

    fn len(answers: &Answers) -> usize {
        answers.waiting.lock().unwrap().len()
    }

    #[test]
    fn the_table_is_bounded_and_gives_its_room_back() {
        let answers = Answers::default();
        for i in 0..300 {
            let (c, m) = ids(i);
            answers.sent(&c, &m);
        }
        assert_eq!(len(&answers), Answers::FOLLOWED);
        for i in 0..300 {
            answers.acked(&format!("m{i}"));
        }
        assert_eq!(len(&answers), 0);
        assert_eq!(answers.waiting.lock().unwrap().capacity(), 0);
    }

    #[test]
    fn a_send_is_answered_from_the_store_once_and_only_if_still_waited_for() {
        let answers = Answers::default();
        let (c, m) = ids(1);
        answers.sent(&c, &m);
        let (c2, m2) = ids(2);
        answers.sent(&c2, &m2);
        answers.refused("m2");
        let (c3, m3) = ids(3);
        answers.sent(&c3, &m3);
        answers.stored("m3");
        let later = switchboard_backbone::connection_epoch() + 1;
        let mut waiting = answers.waiting_since_before(later);
        waiting.sort_by(|a, b| a.1.cmp(&b.1));
        assert_eq!(waiting, vec![(c, m), (c3, m3)]);
        assert!(answers.waiting_since_before(0).is_empty());
        // Only a send whose pub-ack came counts among the answers to come.
        assert_eq!(answers.acked_from_the_store("m1"), Some(false));
        assert_eq!(answers.acked_from_the_store("m3"), Some(true));
        // Its writer's ack, late, still goes (duplicates carry the same
        // message_id); the store's answer does not go twice.
        answers.acked("m1");
        assert_eq!(answers.acked_from_the_store("m1"), None);
    }
}
