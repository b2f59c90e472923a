//! The per-sender index on CQL (`sent_by`, schema version 7): what one
//! user sent in a conversation, one partition per (tenant, sender,
//! conversation), newest first, so that the export reads the user's own
//! messages and nobody else's. A commit writes its row beside the
//! idempotency key (`commit/view.rs`); archiving keeps it; the user's
//! erasure deletes the partition.
//!
//! A keyspace migrated to version 7 gets the index filled from what it
//! holds then (`schema.rs`, `index_past_senders`).

use switchboard_protocol::UserId;
use switchboard_store::{ConversationKey, SentBy, StoreResult};

use crate::client::ScyllaStore;
use crate::rows::{day_of, limit_db, seq_db, seq_of};

impl ScyllaStore {
    pub(crate) async fn sent_by_rows(
        &self,
        key: &ConversationKey,
        sender: &UserId,
        before_seq: Option<u64>,
        limit: usize,
    ) -> StoreResult<Vec<SentBy>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
        let before = before_seq.map_or(i64::MAX, seq_db);
        let rows = self
            .st
            .sent_by_before
            .all(
                &self.session,
                (t, sender.as_str(), c, before, limit_db(limit)),
            )
            .await?;
        self.each(rows, |(seq, day)| async move {
            let seq = seq_of(seq)?;
            let message = self.message_at(t, c, day_of(day)?, seq).await?;
            Ok(SentBy { seq, message })
        })
        .await
    }
}
