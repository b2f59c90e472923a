//! An erasure's reads on Scylla (v1.2): the conversations a user ever
//! joined, the messages of one that name them or carry their reaction,
//! and the users who block them.
//!
//! `joined` lists a conversation from the user's first membership on and
//! keeps it when they leave; it was added in schema version 5, so the
//! memberships of before are read from `user_conversations` as well (the
//! conversations a user left before it are not found).

use std::collections::{BTreeSet, HashSet};

use futures::{StreamExt, TryStreamExt};
use switchboard_protocol::{ConversationId, Message, UserId};
use switchboard_store::erasure::Erasure;
use switchboard_store::{ConversationKey, ExpiredScan, StoreResult};

use crate::client::ScyllaStore;
use crate::rows::{conversation_id, day_db, decode, limit_db, seq_db, seq_of};

impl ScyllaStore {
    /// The conversations `u` joined after `after`, in id order, at most
    /// `limit`: those of `joined` and those of `user_conversations`, the
    /// first `limit` of each, among which are the first `limit` of both.
    pub(crate) async fn joined_ids(
        &self,
        t: &str,
        u: &str,
        after: Option<&ConversationId>,
        limit: usize,
    ) -> StoreResult<Vec<ConversationId>> {
        let (joined, listed) = match after {
            Some(after) => {
                let (a, n) = (after.as_str(), limit_db(limit));
                futures::try_join!(
                    self.st.joined_after.stream(&self.session, (t, u, a, n)),
                    self.st
                        .user_conversations_after
                        .stream(&self.session, (t, u, a, n)),
                )?
            }
            None => futures::try_join!(
                self.st.joined.stream(&self.session, (t, u)),
                self.st.user_conversations.stream(&self.session, (t, u)),
            )?,
        };
        // Dropping a stream stops its paging.
        let (joined, listed) = futures::try_join!(
            joined.take(limit).try_collect::<Vec<_>>(),
            listed.take(limit).try_collect::<Vec<_>>(),
        )?;
        let ids: BTreeSet<String> = joined.into_iter().chain(listed).map(|(c,)| c).collect();
        ids.into_iter().take(limit).map(conversation_id).collect()
    }

    /// Every conversation of `u`'s `joined` partition.
    pub(crate) async fn joined_all(&self, t: &str, u: &str) -> StoreResult<Vec<String>> {
        self.st
            .joined
            .stream(&self.session, (t, u))
            .await?
            .map_ok(|(c,)| c)
            .try_collect()
            .await
    }

    /// The users of tenant `t` who block `u`. A block is kept under the
    /// blocker's name, so this reads the whole `blocks` table, every
    /// tenant's (paged by the driver): a rare read, made once per erasure.
    pub(crate) async fn blockers_of(&self, t: &str, u: &str) -> StoreResult<Vec<String>> {
        self.st
            .scan_blocks
            .stream(&self.session, ())
            .await?
            .try_filter_map(move |(tenant, blocker, blocked)| async move {
                Ok((tenant == t && blocked == u).then_some(blocker))
            })
            .try_collect()
            .await
    }

    /// Messages after `after_seq`, deleted ones included, that name `user`
    /// or carry their reaction, looking at no more than `limit` rows:
    /// bucket by bucket from the oldest that may hold one, as
    /// `expired_rows` walks them; archived buckets are passed over.
    pub(crate) async fn naming_rows(
        &self,
        key: &ConversationKey,
        user: &UserId,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<ExpiredScan> {
        let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
        let e = Erasure {
            user,
            pseudonym: user,
        };
        let mut buckets = self.bucket_rows(t, c).await?;
        buckets.reverse();
        let mut scan = ExpiredScan {
            last_seen: after_seq,
            ..Default::default()
        };
        let mut seen = 0;
        for (i, bucket) in buckets.iter().enumerate() {
            let wholly_seen = buckets
                .get(i + 1)
                .is_some_and(|next| next.first <= scan.last_seen.saturating_add(1));
            // An archived day is read too: its live rows (the newest
            // message, messages restored to be changed) win over the
            // archive, and the archive object is rewritten apart.
            if wholly_seen {
                continue;
            }
            let from = scan.last_seen;
            let rows = self
                .st
                .oldest_first
                .all(
                    &self.session,
                    (
                        t,
                        c,
                        day_db(bucket.day),
                        seq_db(from),
                        i64::MAX,
                        limit_db(limit - seen),
                    ),
                )
                .await?;
            let messages = rows
                .iter()
                .map(|(body,)| decode::<Message>(body))
                .collect::<StoreResult<Vec<_>>>()?;
            let Some(to) = messages.last().map(|m| m.seq) else {
                continue;
            };
            let reacted = self
                .reacted(key, bucket.day, (from, to), user.as_str())
                .await?;
            for m in messages {
                seen += 1;
                scan.last_seen = m.seq;
                if e.names(&m) || reacted.contains(&m.seq) {
                    scan.seqs.push(m.seq);
                }
                if seen >= limit {
                    return Ok(scan);
                }
            }
        }
        scan.done = true;
        Ok(scan)
    }

    /// The seqs in `from < seq <= to` of bucket `day` that `u` reacted
    /// to: every reaction on those messages is read (the table is keyed
    /// by seq before user), those of others are dropped.
    async fn reacted(
        &self,
        key: &ConversationKey,
        day: u32,
        (from, to): (u64, u64),
        u: &str,
    ) -> StoreResult<HashSet<u64>> {
        let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
        self.st
            .reactions_between
            .stream(&self.session, (t, c, day_db(day), seq_db(from), seq_db(to)))
            .await?
            .try_filter_map(move |(seq, who)| async move {
                if who == u {
                    seq_of(seq).map(Some)
                } else {
                    Ok(None)
                }
            })
            .try_collect()
            .await
    }
}
