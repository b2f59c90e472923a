//! The `Commit` trait over one Scylla commit: each read the store's rules
//! make (through the commit's cache); the CQL rows each row change
//! becomes are in `writes.rs`.
//! The commit's cache, its statements and how they are sent are in
//! `commit.rs`.

use super::*;
use switchboard_protocol::safety::Ban;
use switchboard_store::rules::Write as RowWrite;

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

    async fn title(&mut self, c: &ConversationKey) -> StoreResult<Option<String>> {
        match self.conv(&ck(c)).await? {
            Some(conv) => Ok(conv.title),
            None => Err(StoreError::NotFound),
        }
    }

    async fn invites(
        &mut self,
        c: &ConversationKey,
    ) -> StoreResult<Vec<switchboard_protocol::channels::Invite>> {
        self.store
            .invite_rows(c.tenant.as_str(), c.conversation_id.as_str())
            .await
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

    async fn member_state(&mut self, c: &ConversationKey, user: &str) -> StoreResult<MemberState> {
        let k = ck(c);
        if let Some(state) = self.states.get(&(k.clone(), user.to_owned())) {
            return Ok(state.clone().unwrap_or_default());
        }
        self.store.state_of(&k.0, &k.1, user).await
    }

    async fn unsolicited_since(
        &mut self,
        tenant: &TenantId,
        user: &str,
        since: Timestamp,
    ) -> StoreResult<u32> {
        self.unsolicited_total(tenant, user, since).await
    }

    async fn bans(&mut self, c: &ConversationKey) -> StoreResult<Vec<Ban>> {
        self.ban_list(c).await
    }

    async fn write(&mut self, write: RowWrite<'_>) -> StoreResult<()> {
        // Boxed: the future of the largest row change (an erasure's, an
        // archive's) would otherwise sit inside every rule that writes a
        // row, and the rules' futures nest.
        Box::pin(self.apply_write(write)).await
    }
}
