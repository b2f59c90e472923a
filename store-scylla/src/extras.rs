//! The v1.1 rows on Scylla outside a commit: a user's reactions on some
//! messages, the pins, a thread's pages, a user's threads and their
//! unread mentions, and thread read marks.

use switchboard_protocol::{ConversationId, Message, MessageId, TenantId, Timestamp, UserId};
use switchboard_store::rules;
use switchboard_store::{
    ConversationKey, MAX_UNREAD_COUNTED, PinRow, StoreError, StoreResult, ThreadEntry,
};

use crate::client::ScyllaStore;
use crate::rows::{day_db, limit_db, seq_db, seq_of, user_id};

impl ScyllaStore {
    /// The emoji `user` reacted with to message `seq`.
    pub(crate) async fn reactions_at(
        &self,
        t: &str,
        c: &str,
        day: u32,
        seq: u64,
        user: &str,
    ) -> StoreResult<Vec<String>> {
        Ok(self
            .st
            .user_reactions
            .all(&self.session, (t, c, day_db(day), seq_db(seq), user))
            .await?
            .into_iter()
            .map(|(emoji,)| emoji)
            .collect())
    }

    pub(crate) async fn user_reactions_of(
        &self,
        key: &ConversationKey,
        user: &UserId,
        seqs: Vec<u64>,
    ) -> StoreResult<Vec<Vec<String>>> {
        let (t, c, u) = (
            key.tenant.as_str(),
            key.conversation_id.as_str(),
            user.as_str(),
        );
        let buckets = self.bucket_rows(t, c).await?;
        self.each(seqs, |seq| {
            let day = buckets.iter().find(|b| b.first <= seq).map(|b| b.day);
            async move {
                match day {
                    Some(day) => self.reactions_at(t, c, day, seq, u).await,
                    None => Ok(Vec::new()),
                }
            }
        })
        .await
    }

    /// The pins, newest first.
    pub(crate) async fn pins_newest_first(&self, t: &str, c: &str) -> StoreResult<Vec<PinRow>> {
        let mut pins = self.pin_rows(t, c).await?;
        pins.sort_by(|a, b| b.at.cmp(&a.at).then(b.message_id.cmp(&a.message_id)));
        Ok(pins)
    }

    pub(crate) async fn pin_rows(&self, t: &str, c: &str) -> StoreResult<Vec<PinRow>> {
        self.st
            .pins
            .all(&self.session, (t, c))
            .await?
            .into_iter()
            .map(|(id, by, at)| {
                Ok(PinRow {
                    message_id: MessageId::from_u64(id as u64),
                    by: user_id(by)?,
                    at: Timestamp::from_unix_ms(at),
                })
            })
            .collect()
    }
}

impl ScyllaStore {
    /// A message by seq, from its bucket.
    async fn message_by_seq(
        &self,
        t: &str,
        c: &str,
        buckets: &[crate::rows::Bucket],
        seq: u64,
    ) -> StoreResult<Option<Message>> {
        match buckets.iter().find(|b| b.first <= seq) {
            Some(b) => self.message_at(t, c, b.day, seq).await,
            None => Ok(None),
        }
    }

    /// The thread of `root` (the root and its replies) with `low <= seq <
    /// high`, newest first, at most `limit` (the reader checked).
    pub(crate) async fn thread_page(
        &self,
        t: &str,
        c: &str,
        root: u64,
        low: u64,
        high: u64,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        let buckets = self.bucket_rows(t, c).await?;
        let seqs = self
            .st
            .thread_reply_seqs
            .all(
                &self.session,
                (
                    t,
                    c,
                    seq_db(root),
                    seq_db(low),
                    seq_db(high),
                    limit_db(limit),
                ),
            )
            .await?
            .into_iter()
            .map(|(s,)| seq_of(s))
            .collect::<StoreResult<Vec<_>>>()?;
        let mut out: Vec<Message> = self
            .each(seqs, |seq| self.message_by_seq(t, c, &buckets, seq))
            .await?
            .into_iter()
            .flatten()
            .collect();
        if out.len() < limit
            && (low..high).contains(&root)
            && let Some(m) = self.message_by_seq(t, c, &buckets, root).await?
        {
            out.push(m);
        }
        Ok(out)
    }

    pub(crate) async fn threads_of(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<Vec<ThreadEntry>> {
        let (t, c, u) = (tenant.as_str(), conversation.as_str(), reader.as_str());
        self.check_membership(t, c, u).await?;
        let buckets = self.bucket_rows(t, c).await?;
        let marks = self.st.thread_marks.all(&self.session, (t, u, c)).await?;
        let mut out = Vec::new();
        for (root_seq, mark) in marks {
            let (root_seq, mark) = (seq_of(root_seq)?, seq_of(mark)?);
            let Some(root) = self.message_by_seq(t, c, &buckets, root_seq).await? else {
                continue;
            };
            let unread = self
                .st
                .thread_replies_after
                .all(
                    &self.session,
                    (
                        t,
                        c,
                        seq_db(root_seq),
                        seq_db(mark),
                        limit_db(MAX_UNREAD_COUNTED as usize),
                    ),
                )
                .await?
                .len() as u64;
            out.push(ThreadEntry { root, unread });
        }
        out.sort_by(|a, b| {
            let last = |e: &ThreadEntry| e.root.thread.as_ref().map(|th| th.last_reply_at);
            last(b).cmp(&last(a)).then(b.root.seq.cmp(&a.root.seq))
        });
        Ok(out)
    }

    /// What `u` would call unread after `read` in a conversation whose
    /// last seq is `last` (`rules::unread`): the `uncounted` rows and the
    /// `sent_by` rows of `u` and of each user they block in between, each
    /// read at most `LOOKED_AT` rows.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn unread_count(
        &self,
        t: &str,
        u: &str,
        c: &str,
        read: u64,
        last: u64,
        blocked: &std::collections::HashSet<String>,
    ) -> StoreResult<u64> {
        use switchboard_store::rules::unread::{LOOKED_AT, unread};
        if last <= read {
            return Ok(0);
        }
        let span = (seq_db(read), seq_db(last), limit_db(LOOKED_AT));
        let uncounted = self
            .st
            .uncounted_between
            .all(&self.session, (t, c, span.0, span.1, span.2));
        let senders = std::iter::once(u).chain(blocked.iter().map(String::as_str));
        let passed_over = futures::future::try_join_all(senders.map(|sender| {
            self.st
                .sent_by_between
                .all(&self.session, (t, sender, c, span.0, span.1, span.2))
        }));
        let (uncounted, passed_over) = futures::try_join!(uncounted, passed_over)?;
        let mut uncounted = uncounted
            .into_iter()
            .map(|(s,)| seq_of(s))
            .collect::<StoreResult<Vec<u64>>>()?;
        uncounted.sort_unstable();
        let passed_over = passed_over
            .into_iter()
            .flatten()
            .map(|(s,)| seq_of(s))
            .collect::<StoreResult<Vec<u64>>>()?;
        Ok(unread(read, last, &uncounted, passed_over))
    }

    /// The users `u` blocks, as a set of ids (for unread counts).
    pub(crate) async fn blocked_set(
        &self,
        t: &str,
        u: &str,
    ) -> StoreResult<std::collections::HashSet<String>> {
        Ok(self
            .block_rows(t, u)
            .await?
            .into_iter()
            .map(|b| b.user_id.as_str().to_owned())
            .collect())
    }

    /// Messages after `read` that mention `user` in the conversation.
    pub(crate) async fn mention_count(
        &self,
        t: &str,
        u: &str,
        c: &str,
        read: u64,
    ) -> StoreResult<u64> {
        Ok(self
            .st
            .mentions_after
            .all(
                &self.session,
                (t, u, c, seq_db(read), limit_db(MAX_UNREAD_COUNTED as usize)),
            )
            .await?
            .len() as u64)
    }

    pub(crate) async fn thread_read(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversation: &ConversationId,
        root: MessageId,
        seq: u64,
    ) -> StoreResult<()> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        let Some((root_seq, _)) = self.seq_and_day(t, c, root).await? else {
            return Err(StoreError::NotFound);
        };
        let key = ConversationKey::new(tenant.clone(), conversation.clone());
        let mut tx = crate::commit::Tx::new(self);
        rules::ack_thread_read(&mut tx, &key, user, seq_of(root_seq)?, seq).await?;
        tx.finish().await
    }
}
