//! The `Commit` trait over one Scylla commit: each read the store's rules
//! make (through the commit's cache) and the CQL rows each write becomes.
//! The commit's cache, its statements and how they are sent are in
//! `commit.rs`.

use super::*;
use switchboard_protocol::reports::Report;
use switchboard_protocol::safety::{Ban, ConversationPolicy as Policy};
use switchboard_store::erasure::Erasure;

impl Commit for Tx<'_> {
    async fn last_seq(&mut self, c: &ConversationKey) -> StoreResult<Option<u64>> {
        Ok(self.conv(&ck(c)).await?.map(|conv| conv.last_seq))
    }

    async fn kind(&mut self, c: &ConversationKey) -> StoreResult<ConversationKind> {
        match self.conv(&ck(c)).await? {
            Some(conv) => Ok(conv.kind),
            None => Err(StoreError::NotFound),
        }
    }

    async fn members(&mut self, c: &ConversationKey) -> StoreResult<Vec<String>> {
        Ok(self.member_set(&ck(c)).await?.iter().cloned().collect())
    }

    async fn member_count(&mut self, c: &ConversationKey) -> StoreResult<usize> {
        Ok(self.member_set(&ck(c)).await?.len())
    }

    async fn is_member(&mut self, c: &ConversationKey, user: &str) -> StoreResult<bool> {
        Ok(self.member_set(&ck(c)).await?.contains(user))
    }

    async fn devices(&mut self, tenant: &TenantId, user: &str) -> StoreResult<Vec<String>> {
        self.device_list(tenant.as_str(), user).await
    }

    async fn recipients(&mut self, c: &ConversationKey) -> StoreResult<Vec<(String, Vec<String>)>> {
        self.recipient_list(&ck(c)).await
    }

    /// This commit's keys are known; the stored ones are read together.
    async fn sent_exists(
        &mut self,
        c: &ConversationKey,
        keys: &[(&str, &str)],
    ) -> StoreResult<Vec<bool>> {
        let k = ck(c);
        let written: Vec<bool> = keys
            .iter()
            .map(|(sender, id)| {
                self.sent
                    .contains(&(k.clone(), (*sender).to_owned(), (*id).to_owned()))
            })
            .collect();
        let store = self.store;
        let (t, cid) = (k.0.as_str(), k.1.as_str());
        // Only the keys this commit did not write are read, together.
        // Owned, so that the futures hold no borrowed key (they must be
        // `Send` for any lifetime).
        let unknown: Vec<(String, String)> = keys
            .iter()
            .zip(&written)
            .filter(|(_, w)| !**w)
            .map(|((sender, id), _)| ((*sender).to_owned(), (*id).to_owned()))
            .collect();
        let mut stored = store
            .each(unknown, |(sender, id)| async move {
                store.sent_row(t, cid, &sender, &id).await
            })
            .await?
            .into_iter();
        // `||` takes a read answer only for a key that was read.
        Ok(written
            .into_iter()
            .map(|w| w || stored.next().flatten().is_some())
            .collect())
    }

    async fn message(&mut self, c: &ConversationKey, seq: u64) -> StoreResult<Option<Message>> {
        Ok(self.live_message(&ck(c), seq).await?.map(|(_, m)| m))
    }

    async fn versions(
        &mut self,
        c: &ConversationKey,
        seq: u64,
    ) -> StoreResult<Vec<MessageVersion>> {
        let k = ck(c);
        match self.live_message(&k, seq).await? {
            Some((day, _)) => self.versions_of(&k, day, seq).await,
            None => Ok(Vec::new()),
        }
    }

    async fn bucket(&mut self, b: &BucketKey) -> StoreResult<Option<BucketSpan>> {
        let k = ck(&b.conversation());
        let newest = self.conv(&k).await?.map_or(0, |c| c.last_seq);
        let buckets = self.buckets(&k).await?;
        Ok(buckets
            .iter()
            .position(|bucket| bucket.day == b.day)
            .map(|index| BucketSpan {
                first: buckets[index].first,
                last: bucket_last(buckets, index, newest),
                archived: buckets[index].archived.is_some(),
            }))
    }

    fn touched(&self, c: &ConversationKey) -> bool {
        self.touched.contains(&ck(c))
    }

    fn archived_here(&self, c: &ConversationKey) -> bool {
        self.archived.contains(&ck(c))
    }

    /// An ack's rows are read together, from the database (an ack is a
    /// commit of its own).
    async fn ack_reads(
        &mut self,
        c: &ConversationKey,
        user: &str,
        device: Option<&str>,
    ) -> StoreResult<MarkReads> {
        let k = ck(c);
        let s = self.store;
        let cursor = async {
            match device {
                Some(d) => s.st.cursor.one(&s.session, (&k.0, user, d, &k.1)).await,
                None => Ok(None),
            }
        };
        let (conv, member, cursor, my_marks) = futures::try_join!(
            s.conv_row(&k.0, &k.1),
            s.st.member.one(&s.session, (&k.0, &k.1, user)),
            cursor,
            s.st.marks_of.all(&s.session, (&k.0, &k.1, user)),
        )?;
        let last_seq = conv.as_ref().map(|conv| conv.last_seq);
        self.convs.insert(k.clone(), conv);
        let marks = match member {
            Some(_) => {
                let (delivered, read) = marks(my_marks)?;
                Some(Marks { delivered, read })
            }
            None => None,
        };
        Ok(MarkReads {
            last_seq,
            marks,
            cursor: cursor.map(|(v,)| seq_of(v)).transpose()?.unwrap_or(0),
        })
    }

    async fn insert_conversation(&mut self, record: &ConversationRecord) -> StoreResult<()> {
        let k = ck(&record.key());
        let last_message = record.last_message.as_ref().map(encode).transpose()?;
        let ts = self.ts();
        self.push(
            &self.store.st.insert_conversation,
            (
                k.0.clone(),
                k.1.clone(),
                record.kind.as_str().to_owned(),
                record.title.clone(),
                record.created_at.unix_ms(),
                record.created_by.as_str().to_owned(),
                seq_db(record.last_seq),
                last_message,
                record.last_activity.unix_ms(),
                ts,
            ),
        );
        self.convs.insert(k.clone(), Some(Conv::of_record(record)));
        // A new conversation has no members yet: nothing to read.
        self.members.insert(k, BTreeSet::new());
        Ok(())
    }

    async fn insert_member(
        &mut self,
        c: &ConversationKey,
        user: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        let k = ck(c);
        let st = &self.store.st;
        let ts = self.ts();
        self.push(
            &st.insert_member,
            (k.0.clone(), k.1.clone(), user.to_owned(), at.unix_ms(), ts),
        );
        let ts = self.ts();
        self.push(
            &st.insert_user_conversation,
            (k.0.clone(), user.to_owned(), k.1.clone(), ts),
        );
        // Kept when they leave: what an erasure of the user visits.
        let ts = self.ts();
        self.push(
            &st.insert_joined,
            (k.0.clone(), user.to_owned(), k.1.clone(), ts),
        );
        self.member_set(&k).await?.insert(user.to_owned());
        Ok(())
    }

    async fn remove_member(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()> {
        self.drop_member(c, user).await
    }

    async fn reactions_of(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        user: &str,
    ) -> StoreResult<Vec<String>> {
        Ok(self
            .my_reactions(&ck(c), seq, user)
            .await?
            .iter()
            .cloned()
            .collect())
    }

    async fn pins(&mut self, c: &ConversationKey) -> StoreResult<Vec<PinRow>> {
        Ok(self.pin_list(&ck(c)).await?.clone())
    }

    async fn thread_mark(
        &mut self,
        c: &ConversationKey,
        user: &str,
        root_seq: u64,
    ) -> StoreResult<Option<u64>> {
        self.load_thread_mark(c, user, root_seq).await
    }

    async fn insert_thread_reply(
        &mut self,
        c: &ConversationKey,
        root_seq: u64,
        seq: u64,
    ) -> StoreResult<()> {
        self.add_thread_reply(c, root_seq, seq).await
    }

    async fn set_thread_mark(
        &mut self,
        c: &ConversationKey,
        user: &str,
        root_seq: u64,
        seq: u64,
    ) -> StoreResult<()> {
        self.write_thread_mark(c, user, root_seq, seq).await
    }

    async fn insert_mention(
        &mut self,
        c: &ConversationKey,
        user: &str,
        seq: u64,
    ) -> StoreResult<()> {
        self.add_mention(c, user, seq).await
    }

    async fn remove_mention(
        &mut self,
        c: &ConversationKey,
        user: &str,
        seq: u64,
    ) -> StoreResult<()> {
        self.drop_mention(c, user, seq).await
    }

    async fn insert_reaction(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        user: &str,
        emoji: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        self.add_reaction(c, seq, user, emoji, at).await
    }

    async fn remove_reaction(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        user: &str,
        emoji: &str,
    ) -> StoreResult<()> {
        self.drop_reaction(c, seq, user, emoji).await
    }

    async fn remove_reactions(&mut self, c: &ConversationKey, seq: u64) -> StoreResult<()> {
        self.drop_reactions(c, seq).await
    }

    async fn insert_pin(&mut self, c: &ConversationKey, pin: &PinRow) -> StoreResult<()> {
        self.add_pin(c, pin).await
    }

    async fn remove_pin(&mut self, c: &ConversationKey, message_id: MessageId) -> StoreResult<()> {
        self.drop_pin(c, message_id).await
    }

    async fn member_state(&mut self, c: &ConversationKey, user: &str) -> StoreResult<MemberState> {
        let k = ck(c);
        if let Some(state) = self.states.get(&(k.clone(), user.to_owned())) {
            return Ok(state.clone().unwrap_or_default());
        }
        self.store.state_of(&k.0, &k.1, user).await
    }

    async fn put_member_state(
        &mut self,
        c: &ConversationKey,
        user: &str,
        state: &MemberState,
    ) -> StoreResult<()> {
        self.write_member_state(c, user, state).await
    }

    async fn insert_speaker(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()> {
        let (t, c) = ck(c);
        let ts = self.ts();
        self.push(&self.store.st.insert_speaker, (t, c, user.to_owned(), ts));
        Ok(())
    }

    async fn unsolicited_since(
        &mut self,
        tenant: &TenantId,
        user: &str,
        since: Timestamp,
    ) -> StoreResult<u32> {
        self.unsolicited_total(tenant, user, since).await
    }

    /// Written with a day's TTL: nothing else removes them.
    async fn insert_unsolicited(
        &mut self,
        c: &ConversationKey,
        user: &str,
        actor: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        let (t, c) = ck(c);
        let ttl = i32::try_from(UNSOLICITED_WINDOW_MS / 1000).unwrap_or(i32::MAX);
        let ts = self.ts();
        self.push(
            &self.store.st.insert_unsolicited,
            (
                t.clone(),
                user.to_owned(),
                at.unix_ms(),
                c,
                actor.to_owned(),
                ttl,
                ts,
            ),
        );
        self.unsolicited
            .entry((t, user.to_owned()))
            .or_default()
            .push(at.unix_ms());
        Ok(())
    }

    /// A new message opens or joins a day bucket (`assign_day`); a changed
    /// one stays in its bucket and refreshes the conversation's preview
    /// when it is the newest; a restored one goes back to the bucket that
    /// holds its seq.
    async fn put_message(
        &mut self,
        c: &ConversationKey,
        m: &Message,
        placement: Placement,
    ) -> StoreResult<()> {
        let k = ck(c);
        let day = match placement {
            Placement::New => self.assign_day(&k, m).await?,
            Placement::Changed => self.day_of(&k, m.seq)?,
            Placement::Restored => match self.bucket_of(&k, m.seq).await? {
                Some(b) => b.day,
                None => day_bucket(m.created_at),
            },
        };
        self.insert_message(&k, day, m)?;
        if placement == Placement::Changed
            && let Some(mut conv) = self.conv(&k).await?
            && conv.last_seq == m.seq
        {
            let ts = self.ts();
            self.push(
                &self.store.st.set_last_message,
                (ts, encode(m)?, k.0.clone(), k.1.clone()),
            );
            conv.last_message = Some(m.clone());
            self.convs.insert(k, Some(conv));
        }
        Ok(())
    }

    async fn insert_sent(&mut self, c: &ConversationKey, m: &Message) -> StoreResult<()> {
        let k = ck(c);
        let day = self.day_of(&k, m.seq)?;
        let (sender, client_msg_id) = (
            m.sender_id.as_str().to_owned(),
            m.client_msg_id.as_str().to_owned(),
        );
        let ts = self.ts();
        self.push(
            &self.store.st.insert_sent,
            (
                k.0.clone(),
                k.1.clone(),
                sender.clone(),
                client_msg_id.clone(),
                seq_db(m.seq),
                day_db(day),
                ts,
            ),
        );
        let ts = self.ts();
        self.push(
            &self.store.st.insert_index,
            (
                k.0.clone(),
                k.1.clone(),
                id_db(m.message_id),
                seq_db(m.seq),
                day_db(day),
                ts,
            ),
        );
        self.index_sender(&k, m, day);
        self.sent.insert((k, sender, client_msg_id));
        Ok(())
    }

    async fn put_version(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        v: &MessageVersion,
    ) -> StoreResult<()> {
        let k = ck(c);
        let day = self.day_of(&k, seq)?;
        self.insert_version(&k, day, seq, v)?;
        let versions = self.versions.entry((k, seq)).or_default();
        versions.retain(|known| known.version != v.version);
        versions.push(v.clone());
        Ok(())
    }

    async fn remove_versions(&mut self, c: &ConversationKey, seq: u64) -> StoreResult<()> {
        let k = ck(c);
        let day = self.day_of(&k, seq)?;
        let ts = self.ts();
        self.push(
            &self.store.st.delete_versions,
            (ts, k.0.clone(), k.1.clone(), day_db(day), seq_db(seq)),
        );
        self.versions.insert((k, seq), Vec::new());
        Ok(())
    }

    async fn reference_media(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        blob_ref: &str,
    ) -> StoreResult<()> {
        let k = ck(c);
        let ts = self.ts();
        self.push(
            &self.store.st.insert_media_ref,
            (k.0, blob_ref.to_owned(), k.1, seq_db(seq), ts),
        );
        Ok(())
    }

    /// A tombstone: its timestamp is later than any write before it in
    /// this commit, so it also wins over a reference made there.
    async fn unreference_media(
        &mut self,
        c: &ConversationKey,
        seq: u64,
        blob_ref: &str,
    ) -> StoreResult<()> {
        let k = ck(c);
        let ts = self.ts();
        self.push(
            &self.store.st.delete_media_ref,
            (ts, k.0, blob_ref.to_owned(), k.1, seq_db(seq)),
        );
        Ok(())
    }

    async fn insert_inbox(
        &mut self,
        c: &ConversationKey,
        user: &str,
        device: &str,
        seq: u64,
        at: Timestamp,
    ) -> StoreResult<()> {
        let k = ck(c);
        let day = self.day_of(&k, seq)?;
        self.inbox_row(&k, user, device, seq, day, at);
        Ok(())
    }

    /// A range is one range tombstone.
    async fn remove_inbox(
        &mut self,
        c: &ConversationKey,
        user: &str,
        device: &str,
        which: InboxEntries,
    ) -> StoreResult<()> {
        let k = ck(c);
        let st = &self.store.st;
        let (t, c, u, d) = (k.0, k.1, user.to_owned(), device.to_owned());
        let ts = self.ts();
        match which {
            InboxEntries::One(seq) => self.push_as(
                &st.delete_inbox,
                (ts, t, u, d, c, seq_db(seq)),
                Phase::After,
            ),
            // The statement removes `low < seq <= high`.
            InboxEntries::Through { from, to } => self.push_as(
                &st.delete_inbox_between,
                (ts, t, u, d, c, seq_db(from.saturating_sub(1)), seq_db(to)),
                Phase::After,
            ),
            InboxEntries::All => self.push_as(
                &st.delete_inbox_conversation,
                (ts, t, u, d, c),
                Phase::After,
            ),
        }
        Ok(())
    }

    async fn raise_marks(
        &mut self,
        c: &ConversationKey,
        user: &str,
        delivered: Option<u64>,
        read: Option<u64>,
    ) -> StoreResult<()> {
        let k = ck(c);
        if let Some(seq) = delivered {
            self.set_mark(&k, user, DELIVERED, seq);
        }
        if let Some(seq) = read {
            self.set_mark(&k, user, READ, seq);
        }
        Ok(())
    }

    async fn set_cursor(
        &mut self,
        c: &ConversationKey,
        user: &str,
        device: &str,
        seq: u64,
    ) -> StoreResult<()> {
        let k = ck(c);
        let ts = self.ts();
        self.push(
            &self.store.st.set_cursor,
            (
                k.0,
                user.to_owned(),
                device.to_owned(),
                k.1,
                seq_db(seq),
                ts,
            ),
        );
        Ok(())
    }

    async fn set_position(&mut self, c: &ConversationKey, last: &Message) -> StoreResult<()> {
        let k = ck(c);
        let ts = self.ts();
        self.push(
            &self.store.st.set_position,
            (
                ts,
                seq_db(last.seq),
                encode(last)?,
                last.created_at.unix_ms(),
                k.0.clone(),
                k.1.clone(),
            ),
        );
        if let Some(mut conv) = self.conv(&k).await? {
            conv.last_seq = last.seq;
            conv.last_message = Some(last.clone());
            conv.last_activity = last.created_at.unix_ms();
            self.convs.insert(k, Some(conv));
        }
        Ok(())
    }

    async fn archive_rows(
        &mut self,
        b: &BucketKey,
        span: &BucketSpan,
        newest: u64,
        object: &str,
    ) -> StoreResult<()> {
        self.replace_by_archive(b, span, newest, object).await
    }

    async fn put_policy(&mut self, c: &ConversationKey, policy: &Policy) -> StoreResult<()> {
        self.write_policy(c, policy)
    }

    async fn put_ban(&mut self, c: &ConversationKey, ban: &Ban) -> StoreResult<()> {
        self.write_ban(c, Some(ban), ban.user_id.as_str())
    }

    async fn remove_ban(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()> {
        self.write_ban(c, None, user)
    }

    async fn put_report(&mut self, tenant: &TenantId, report: &Report) -> StoreResult<()> {
        self.write_report(tenant, report)
    }

    async fn set_expiry(
        &mut self,
        c: &ConversationKey,
        at: Timestamp,
        seq: u64,
        present: bool,
    ) -> StoreResult<()> {
        self.write_expiry(c, at, seq, present);
        Ok(())
    }

    async fn put_block(
        &mut self,
        tenant: &TenantId,
        user: &str,
        target: &str,
        at: Option<Timestamp>,
    ) -> StoreResult<()> {
        self.write_block(tenant, user, target, at);
        Ok(())
    }

    async fn remove_sent(
        &mut self,
        c: &ConversationKey,
        sender: &str,
        client_msg_id: &str,
    ) -> StoreResult<()> {
        self.drop_sent(c, sender, client_msg_id)
    }

    async fn bans(&mut self, c: &ConversationKey) -> StoreResult<Vec<Ban>> {
        self.ban_list(c).await
    }

    async fn anonymise_creator(&mut self, c: &ConversationKey, e: Erasure<'_>) -> StoreResult<()> {
        self.rename_creator(c, e).await
    }

    async fn remove_joined(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()> {
        self.drop_joined(c, user)
    }

    async fn remove_reactions_of(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()> {
        self.drop_reactions_of(c, user).await
    }

    async fn erase_user_rows(&mut self, tenant: &TenantId, user: &str) -> StoreResult<()> {
        self.erase_user(tenant, user).await
    }
}
