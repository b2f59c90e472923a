//! A sender's messages through the archive ([`crate::Read::SentBy`]):
//! the backend's index names every seq a user sent and carries the live
//! messages; those archived since are read from their buckets, and so are
//! the whole buckets archived before the index existed (the backend
//! marks them), which only an upgraded store has. A row whose message
//! is gone from the archive too (expired with its bucket) comes back as
//! its seq alone, so that a caller paging by seq goes on past it.

use std::collections::BTreeMap;

use switchboard_protocol::{Message, UserId};

use super::Tiered;
use crate::{ConversationKey, SentBy, StoreResult};

impl Tiered {
    pub(super) async fn sent_by_merged(
        &self,
        key: &ConversationKey,
        sender: &UserId,
        before_seq: Option<u64>,
        limit: usize,
    ) -> StoreResult<Vec<SentBy>> {
        let before = before_seq.unwrap_or(u64::MAX);
        let rows = self.inner.sent_by(key, sender, before_seq, limit).await?;
        // A full page may have more below it: older buckets wait for the
        // next page, whose `before_seq` is the last seq returned.
        let floor = match rows.last() {
            Some(last) if rows.len() >= limit => last.seq.saturating_sub(1),
            _ => 0,
        };
        let archived: Vec<u64> = rows
            .iter()
            .filter(|r| r.message.is_none())
            .map(|r| r.seq)
            .collect();
        let mut found: BTreeMap<u64, Option<Message>> =
            rows.into_iter().map(|r| (r.seq, r.message)).collect();
        for bucket in self.inner.archived_buckets(key, floor, before).await? {
            let wanted = |seq: u64| {
                if bucket.senders_indexed {
                    archived.contains(&seq)
                } else {
                    floor < seq && seq < before
                }
            };
            if bucket.senders_indexed
                && !archived
                    .iter()
                    .any(|s| (bucket.first_seq..=bucket.last_seq).contains(s))
            {
                continue;
            }
            let contents = self.load(&bucket).await?;
            for m in &contents.messages {
                if m.sender_id == *sender && wanted(m.seq) {
                    // A live row wins over its archived copy.
                    let row = found.entry(m.seq).or_default();
                    if row.is_none() {
                        *row = Some(m.clone());
                    }
                }
            }
        }
        Ok(found
            .into_iter()
            .rev()
            .take(limit)
            .map(|(seq, message)| SentBy { seq, message })
            .collect())
    }
}
