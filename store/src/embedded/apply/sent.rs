//! The rows a stored message leaves under its sender in a commit group:
//! its idempotency key, its message-id index row, and its row in the
//! sender's index (`sent_by`, what the export reads); and the key's
//! removal (erasure). Archiving removes keys with its bucket
//! (`archive.rs`); the sender's index stays until the user's erasure.

use super::*;

impl GroupView<'_> {
    pub(super) fn record_sent(&mut self, key: &ConversationKey, m: &Message) {
        let ((t, c), sender) = (parts(key), m.sender_id.as_str());
        let sent_key = Key::new()
            .s(t)
            .s(c)
            .s(sender)
            .s(m.client_msg_id.as_str())
            .bytes();
        self.batch
            .insert(&self.s.sent, sent_key.clone(), words([m.seq]));
        self.batch.insert(
            &self.s.message_index,
            Key::new().s(t).s(c).n(m.message_id.as_u64()).bytes(),
            words([m.seq]),
        );
        let by = Key::new().s(t).s(sender).s(c).n(m.seq);
        self.batch.insert(&self.s.sent_by, by.bytes(), []);
        self.pending.sent.insert(sent_key);
    }

    pub(super) fn remove_sent_key(&mut self, key: &ConversationKey, sender: &str, id: &str) {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).s(sender).s(id).bytes();
        self.pending.sent.remove(&k);
        self.batch.remove(&self.s.sent, k);
    }
}
