//! An erasure's rows (v1.2) in one Scylla commit: an idempotency key, the
//! bans and creator that name the user, the conversations they joined,
//! and every row kept under the user. The `Commit` methods in `view.rs`
//! hand their work here.
//!
//! The rows under the user are found through the lists that lead to
//! them (their devices, the conversations they ever joined) and removed
//! a partition at a time. Others' unsolicited adds by the user (the
//! `unsolicited_adds` rows of other users that name them as `actor`) are
//! not looked for: no key leads to them, and they expire by their TTL a
//! day after they were written.

use switchboard_store::erasure::Erasure;

use super::*;
use crate::rows::user_id;

impl Tx<'_> {
    /// The row of a new message in its sender's index (`senders.rs`).
    pub(super) fn index_sender(&mut self, k: &Ck, m: &Message, day: u32) {
        let ts = self.ts();
        let (sender, seq) = (m.sender_id.as_str().to_owned(), seq_db(m.seq));
        let row = (k.0.clone(), sender, k.1.clone(), seq, day_db(day), ts);
        self.push(&self.store.st.insert_sent_by, row);
    }

    /// The key goes. A stored one still answers `sent_exists` within this
    /// commit, which no rule asks after erasing.
    pub(super) fn drop_sent(
        &mut self,
        c: &ConversationKey,
        sender: &str,
        client_msg_id: &str,
    ) -> StoreResult<()> {
        let k = ck(c);
        let (sender, client_msg_id) = (sender.to_owned(), client_msg_id.to_owned());
        self.sent
            .remove(&(k.clone(), sender.clone(), client_msg_id.clone()));
        let ts = self.ts();
        self.push(
            &self.store.st.delete_sent,
            (ts, k.0, k.1, sender, client_msg_id),
        );
        Ok(())
    }

    /// The stored bans, with this commit's writes over them (an erasure
    /// lifts the user's own ban, then reads the others).
    pub(super) async fn ban_list(&mut self, c: &ConversationKey) -> StoreResult<Vec<Ban>> {
        let k = ck(c);
        let stored = self.store.ban_rows(&k.0, &k.1).await?;
        let mut bans: Vec<Ban> = stored
            .into_iter()
            .filter(|b| {
                !self
                    .bans
                    .contains_key(&(k.clone(), b.user_id.as_str().to_owned()))
            })
            .collect();
        bans.extend(
            self.bans
                .iter()
                .filter(|(written, _)| written.0 == k)
                .filter_map(|(_, ban)| ban.clone()),
        );
        Ok(bans)
    }

    /// The conversation row names the pseudonym as its creator when it
    /// named the user; the commit's view of the row follows.
    pub(super) async fn rename_creator(
        &mut self,
        c: &ConversationKey,
        e: Erasure<'_>,
    ) -> StoreResult<()> {
        let k = ck(c);
        let Some(mut conv) = self.conv(&k).await? else {
            return Ok(());
        };
        let mut creator = user_id(conv.created_by.clone())?;
        if !e.creator(&mut creator) {
            return Ok(());
        }
        conv.created_by = creator.into_string();
        let ts = self.ts();
        self.push(
            &self.store.st.set_creator,
            (ts, conv.created_by.clone(), k.0.clone(), k.1.clone()),
        );
        self.convs.insert(k, Some(conv));
        Ok(())
    }

    /// The user's list of the conversations they joined is `joined` and,
    /// for memberships from before that table, `user_conversations`
    /// (`ScyllaStore::joined_ids`): the conversation leaves both.
    pub(super) fn drop_joined(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()> {
        let k = ck(c);
        let st = &self.store.st;
        let (t, c, u) = (k.0, k.1, user.to_owned());
        let ts = self.ts();
        self.push(&st.delete_joined, (ts, t.clone(), u.clone(), c.clone()));
        let ts = self.ts();
        self.push(
            &st.delete_user_conversation,
            (ts, t.clone(), u.clone(), c.clone()),
        );
        // Their thread marks, mentions and messages sent here: once the
        // conversation is off both lists, the user's last step no longer
        // finds them.
        for partition in [
            &st.delete_thread_marks_of,
            &st.delete_mentions_of,
            &st.delete_sent_by_of,
        ] {
            let ts = self.ts();
            self.push(partition, (ts, t.clone(), u.clone(), c.clone()));
        }
        Ok(())
    }

    /// `user`'s messages in the conversation, archived ones included, in
    /// the unread index as not counting: found through the user's
    /// `sent_by` partition here (one read), which archiving keeps.
    pub(super) async fn uncount_all_of(
        &mut self,
        c: &ConversationKey,
        user: &str,
    ) -> StoreResult<()> {
        let k = ck(c);
        let store = self.store;
        let seqs = store
            .st
            .sent_by_seqs
            .all(&store.session, (k.0.as_str(), user, k.1.as_str()))
            .await?;
        for (seq,) in seqs {
            let ts = self.ts();
            self.push(
                &store.st.insert_uncounted,
                (k.0.clone(), k.1.clone(), seq, ts),
            );
        }
        Ok(())
    }

    /// Every reaction row of `user` in the conversation, day by day (the
    /// reactions' partition), archived days included: one read of each
    /// day's reactions.
    pub(super) async fn drop_reactions_of(
        &mut self,
        c: &ConversationKey,
        user: &str,
    ) -> StoreResult<()> {
        let k = ck(c);
        let store = self.store;
        for bucket in store.bucket_rows(&k.0, &k.1).await? {
            let day = crate::rows::day_db(bucket.day);
            let rows = store
                .st
                .reactions_of_day
                .all(&store.session, (k.0.as_str(), k.1.as_str(), day))
                .await?;
            for (seq, who, emoji) in rows {
                if who == user {
                    let ts = self.ts();
                    self.push(
                        &store.st.delete_reaction,
                        (ts, k.0.clone(), k.1.clone(), day, seq, who, emoji),
                    );
                }
            }
        }
        Ok(())
    }

    /// Every row kept under the user: each device's inbox and cursors,
    /// each joined conversation's thread marks and mentions, and others'
    /// blocks of the user, then the lists that led to them (devices,
    /// joined and listed conversations), their unsolicited adds and their
    /// own blocks. When the commit is split, the rows found through a
    /// list go ahead of the commit's batch and the lists in it, so a
    /// commit that fails half-way leaves the lists for the next attempt.
    pub(super) async fn erase_user(&mut self, tenant: &TenantId, user: &str) -> StoreResult<()> {
        let (t, u) = (tenant.as_str().to_owned(), user.to_owned());
        let store = self.store;
        let st = &store.st;
        let devices = self.device_list(&t, &u).await?;
        let (joined, listed, blockers) = futures::try_join!(
            store.joined_all(&t, &u),
            store.conversation_ids_of(&t, &u),
            store.blockers_of(&t, &u),
        )?;
        let conversations: BTreeSet<String> = joined.into_iter().chain(listed).collect();
        for d in devices {
            let ts = self.ts();
            self.push_as(
                &st.delete_device_inbox,
                (ts, t.clone(), u.clone(), d.clone()),
                Phase::Before,
            );
            let ts = self.ts();
            self.push_as(
                &st.delete_device_cursors,
                (ts, t.clone(), u.clone(), d),
                Phase::Before,
            );
        }
        for c in conversations {
            for partition in [
                &st.delete_thread_marks_of,
                &st.delete_mentions_of,
                &st.delete_sent_by_of,
            ] {
                let ts = self.ts();
                self.push_as(
                    partition,
                    (ts, t.clone(), u.clone(), c.clone()),
                    Phase::Before,
                );
            }
        }
        for blocker in blockers {
            let ts = self.ts();
            self.push_as(
                &st.delete_block,
                (ts, t.clone(), blocker, u.clone()),
                Phase::Before,
            );
        }
        for partition in [
            &st.delete_devices_of,
            &st.delete_joined_of,
            &st.delete_user_conversations_of,
            &st.delete_unsolicited_of,
            &st.delete_blocks_of,
            &st.delete_profile,
        ] {
            let ts = self.ts();
            self.push(partition, (ts, t.clone(), u.clone()));
        }
        // Later reads of this commit find none of them either.
        self.devices.insert((t.clone(), u.clone()), Vec::new());
        self.thread_marks
            .retain(|((of_tenant, _), of_user, _), _| !(*of_tenant == t && *of_user == u));
        self.unsolicited.remove(&(t, u));
        Ok(())
    }
}
