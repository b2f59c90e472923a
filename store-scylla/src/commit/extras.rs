//! The rows of the v1.1 conversation features in one Scylla commit:
//! reactions, pins, thread replies and read marks, mentions, and member
//! states (role and settings). The `Commit` methods in `view.rs` hand
//! their writes here, keeping the commit's cache in step.

use super::*;

impl Tx<'_> {
    pub(super) async fn load_thread_mark(
        &mut self,
        c: &ConversationKey,
        user: &str,
        root_seq: u64,
    ) -> StoreResult<Option<u64>> {
        let k = ck(c);
        let key = (k.clone(), user.to_owned(), root_seq);
        if let Some(mark) = self.thread_marks.get(&key) {
            return Ok(*mark);
        }
        let mark = self
            .store
            .st
            .thread_mark
            .one(
                &self.store.session,
                (k.0.as_str(), user, k.1.as_str(), seq_db(root_seq)),
            )
            .await?
            .map(|(m,)| seq_of(m))
            .transpose()?;
        self.thread_marks.insert(key, mark);
        Ok(mark)
    }

    pub(super) async fn add_thread_reply(
        &mut self,
        c: &ConversationKey,
        root_seq: u64,
        seq: u64,
    ) -> StoreResult<()> {
        let k = ck(c);
        let ts = self.ts();
        self.push(
            &self.store.st.insert_thread_reply,
            (k.0.clone(), k.1.clone(), seq_db(root_seq), seq_db(seq), ts),
        );
        Ok(())
    }

    pub(super) async fn write_thread_mark(
        &mut self,
        c: &ConversationKey,
        user: &str,
        root_seq: u64,
        seq: u64,
    ) -> StoreResult<()> {
        let k = ck(c);
        self.thread_marks
            .insert((k.clone(), user.to_owned(), root_seq), Some(seq));
        let ts = self.ts();
        self.push(
            &self.store.st.insert_thread_mark,
            (
                k.0.clone(),
                user.to_owned(),
                k.1.clone(),
                seq_db(root_seq),
                seq_db(seq),
                ts,
            ),
        );
        Ok(())
    }

    /// Message `seq` does not count toward unread counts.
    pub(super) fn write_uncounted(&mut self, c: &ConversationKey, seq: u64) {
        let (t, c) = ck(c);
        let ts = self.ts();
        self.push(&self.store.st.insert_uncounted, (t, c, seq_db(seq), ts));
    }

    pub(super) async fn add_mention(
        &mut self,
        c: &ConversationKey,
        user: &str,
        seq: u64,
    ) -> StoreResult<()> {
        let k = ck(c);
        let ts = self.ts();
        self.push(
            &self.store.st.insert_mention,
            (k.0.clone(), user.to_owned(), k.1.clone(), seq_db(seq), ts),
        );
        Ok(())
    }

    /// A member leaves: their rows of the conversation go, their marks,
    /// settings and mentions included.
    pub(super) async fn drop_member(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()> {
        let k = ck(c);
        let st = &self.store.st;
        let (t, c, u) = (k.0.clone(), k.1.clone(), user.to_owned());
        let ts = self.ts();
        self.push(&st.delete_member, (ts, t.clone(), c.clone(), u.clone()));
        let ts = self.ts();
        self.push(
            &st.delete_user_conversation,
            (ts, t.clone(), u.clone(), c.clone()),
        );
        let ts = self.ts();
        self.push(&st.delete_speaker, (ts, t.clone(), c.clone(), u.clone()));
        let ts = self.ts();
        self.push(&st.delete_marks_of, (ts, t.clone(), c.clone(), u.clone()));
        let ts = self.ts();
        self.push(
            &st.delete_member_state,
            (ts, t.clone(), c.clone(), u.clone()),
        );
        // Their mentions here go too: one who comes back reads from 0.
        let ts = self.ts();
        self.push(&st.delete_mentions_of, (ts, t, u, c));
        self.states.insert((k.clone(), user.to_owned()), None);
        self.member_set(&k).await?.remove(user);
        Ok(())
    }

    /// The unsolicited adds of `user` since `since`: those stored and
    /// those of this commit.
    pub(super) async fn unsolicited_total(
        &mut self,
        tenant: &TenantId,
        user: &str,
        since: Timestamp,
    ) -> StoreResult<u32> {
        let (t, u) = (tenant.as_str().to_owned(), user.to_owned());
        let stored = self.store.unsolicited_count(&t, &u, since).await?;
        let here = self.unsolicited.get(&(t, u)).map_or(0, |ats| {
            ats.iter().filter(|at| **at >= since.unix_ms()).count()
        });
        Ok(u32::try_from(stored + here).unwrap_or(u32::MAX))
    }

    pub(super) async fn drop_mention(
        &mut self,
        c: &ConversationKey,
        user: &str,
        seq: u64,
    ) -> StoreResult<()> {
        let k = ck(c);
        let ts = self.ts();
        self.push(
            &self.store.st.delete_mention,
            (ts, k.0.clone(), user.to_owned(), k.1.clone(), seq_db(seq)),
        );
        Ok(())
    }

    pub(super) async fn add_reaction(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        user: &str,
        emoji: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        let k = ck(c);
        let day = self.day_of(&k, seq)?;
        self.my_reactions(&k, seq, user)
            .await?
            .insert(emoji.to_owned());
        let ts = self.ts();
        self.push(
            &self.store.st.insert_reaction,
            (
                k.0.clone(),
                k.1.clone(),
                day_db(day),
                seq_db(seq),
                user.to_owned(),
                emoji.to_owned(),
                at.unix_ms(),
                ts,
            ),
        );
        Ok(())
    }

    pub(super) async fn drop_reaction(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        user: &str,
        emoji: &str,
    ) -> StoreResult<()> {
        let k = ck(c);
        let day = self.day_of(&k, seq)?;
        self.my_reactions(&k, seq, user).await?.remove(emoji);
        let ts = self.ts();
        self.push(
            &self.store.st.delete_reaction,
            (
                ts,
                k.0.clone(),
                k.1.clone(),
                day_db(day),
                seq_db(seq),
                user.to_owned(),
                emoji.to_owned(),
            ),
        );
        Ok(())
    }

    pub(super) async fn drop_reactions(
        &mut self,
        c: &ConversationKey,
        seq: u64,
    ) -> StoreResult<()> {
        let k = ck(c);
        // Unlike a single reaction, all of a message's go also when it has
        // no live row to read (expiry of an archived message): its bucket
        // says which partition they would be in.
        let day = match self.messages.get(&(k.clone(), seq)) {
            Some(Some((day, _))) => *day,
            _ => match self.bucket_of(&k, seq).await? {
                Some(bucket) => bucket.day,
                None => return Ok(()),
            },
        };
        self.reactions
            .retain(|(kk, s, _), _| !(*kk == k && *s == seq));
        let ts = self.ts();
        self.push(
            &self.store.st.delete_reactions_of,
            (ts, k.0.clone(), k.1.clone(), day_db(day), seq_db(seq)),
        );
        Ok(())
    }

    pub(super) async fn add_pin(&mut self, c: &ConversationKey, pin: &PinRow) -> StoreResult<()> {
        let k = ck(c);
        let list = self.pin_list(&k).await?;
        list.retain(|p| p.message_id != pin.message_id);
        list.push(pin.clone());
        let ts = self.ts();
        self.push(
            &self.store.st.insert_pin,
            (
                k.0.clone(),
                k.1.clone(),
                id_db(pin.message_id),
                pin.by.as_str().to_owned(),
                pin.at.unix_ms(),
                ts,
            ),
        );
        Ok(())
    }

    pub(super) async fn drop_pin(
        &mut self,
        c: &ConversationKey,
        message_id: MessageId,
    ) -> StoreResult<()> {
        let k = ck(c);
        self.pin_list(&k)
            .await?
            .retain(|p| p.message_id != message_id);
        let ts = self.ts();
        self.push(
            &self.store.st.delete_pin,
            (ts, k.0.clone(), k.1.clone(), id_db(message_id)),
        );
        Ok(())
    }

    pub(super) async fn write_member_state(
        &mut self,
        c: &ConversationKey,
        user: &str,
        state: &MemberState,
    ) -> StoreResult<()> {
        let k = ck(c);
        let st = &self.store.st;
        let ts = self.ts();
        if state.is_default() {
            self.push(
                &st.delete_member_state,
                (ts, k.0.clone(), k.1.clone(), user.to_owned()),
            );
            self.states.insert((k, user.to_owned()), None);
        } else {
            self.push(
                &st.insert_member_state,
                (
                    k.0.clone(),
                    k.1.clone(),
                    user.to_owned(),
                    encode(state)?,
                    ts,
                ),
            );
            self.states
                .insert((k, user.to_owned()), Some(state.clone()));
        }
        Ok(())
    }
}
