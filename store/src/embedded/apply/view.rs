//! The `Commit` trait over one group of the commit thread: each read the
//! store's rules (`crate::rules`) make, in fjall's key layout; the row
//! changes they make are in `writes.rs`.
//! The group's own helpers and the cache it reads through are in
//! `apply.rs`.

use super::*;
use switchboard_protocol::safety::Ban;

use crate::rules::Write;

impl Commit for GroupView<'_> {
    async fn last_seq(&mut self, c: &ConversationKey) -> StoreResult<Option<u64>> {
        let (t, c) = parts(c);
        Ok(self.state(t, c)?.map(|row| row.last_seq))
    }

    async fn kind(&mut self, key: &ConversationKey) -> StoreResult<ConversationKind> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).bytes();
        if let Some(kind) = self.cache.kinds.get(&k) {
            return Ok(*kind);
        }
        let meta = self
            .snap
            .get(&self.s.conversations, &k)
            .map_err(storage)?
            .ok_or(StoreError::NotFound)?;
        let kind = decode::<ConversationMeta>(&meta)?.kind;
        self.cache.kinds.insert(k, kind);
        Ok(kind)
    }

    async fn title(&mut self, key: &ConversationKey) -> StoreResult<Option<String>> {
        let (t, c) = parts(key);
        let meta = self
            .snap
            .get(&self.s.conversations, Key::new().s(t).s(c).bytes())
            .map_err(storage)?
            .ok_or(StoreError::NotFound)?;
        Ok(decode::<ConversationMeta>(&meta)?.title)
    }

    async fn invites(
        &mut self,
        key: &ConversationKey,
    ) -> StoreResult<Vec<switchboard_protocol::channels::Invite>> {
        self.invite_rows(key)
    }

    async fn members(&mut self, c: &ConversationKey) -> StoreResult<Vec<String>> {
        let (t, c) = parts(c);
        Ok(self.member_list(t, c)?.clone())
    }

    async fn member_count(&mut self, c: &ConversationKey) -> StoreResult<usize> {
        let (t, c) = parts(c);
        Ok(self.member_list(t, c)?.len())
    }

    async fn is_member(&mut self, c: &ConversationKey, user: &str) -> StoreResult<bool> {
        let (t, c) = parts(c);
        Ok(self.member(t, c, user)?.is_some())
    }

    async fn devices(&mut self, tenant: &TenantId, user: &str) -> StoreResult<Vec<String>> {
        Ok(self.device_list(tenant.as_str(), user)?.clone())
    }

    async fn recipients(&mut self, c: &ConversationKey) -> StoreResult<Vec<(String, Vec<String>)>> {
        let mut out = Vec::new();
        for user in self.members(c).await? {
            let devices = self.device_list(c.tenant.as_str(), &user)?.clone();
            out.push((user, devices));
        }
        Ok(out)
    }

    async fn sent_exists(
        &mut self,
        key: &ConversationKey,
        keys: &[(&str, &str)],
    ) -> StoreResult<Vec<bool>> {
        let (t, c) = parts(key);
        keys.iter()
            .map(|(sender, id)| {
                let sent_key = Key::new().s(t).s(c).s(sender).s(id).bytes();
                Ok(self.pending.sent.contains(&sent_key)
                    || sent_seq(self.snap, self.s, t, c, sender, id)?.is_some())
            })
            .collect()
    }

    async fn message(&mut self, key: &ConversationKey, seq: u64) -> StoreResult<Option<Message>> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).n(seq).bytes();
        if let Some(m) = self.pending.messages.get(&k) {
            return Ok(Some(m.clone()));
        }
        match self.snap.get(&self.s.messages, &k).map_err(storage)? {
            Some(bytes) => Ok(Some(decode(&bytes)?)),
            None => Ok(None),
        }
    }

    async fn versions(
        &mut self,
        key: &ConversationKey,
        seq: u64,
    ) -> StoreResult<Vec<MessageVersion>> {
        let (t, c) = parts(key);
        Ok(self
            .versions_with_keys(t, c, seq)?
            .iter()
            .map(|(_, v)| v.clone())
            .collect())
    }

    async fn bucket(&mut self, b: &BucketKey) -> StoreResult<Option<BucketSpan>> {
        let (t, c) = (b.tenant.as_str(), b.conversation_id.as_str());
        Ok(
            bucket_span(self.snap, self.s, t, c, b.day)?.map(|(first, last, archived)| {
                BucketSpan {
                    first,
                    last,
                    archived: archived.is_some(),
                }
            }),
        )
    }

    fn touched(&self, key: &ConversationKey) -> bool {
        let (t, c) = parts(key);
        let prefix = Key::new().s(t).s(c).bytes();
        self.pending.messages.keys().any(|k| k.starts_with(&prefix))
    }

    fn archived_here(&self, key: &ConversationKey) -> bool {
        let (t, c) = parts(key);
        self.pending
            .archived
            .contains(&Key::new().s(t).s(c).bytes())
    }

    async fn ack_reads(
        &mut self,
        key: &ConversationKey,
        user: &str,
        device: Option<&str>,
    ) -> StoreResult<MarkReads> {
        let (t, c) = parts(key);
        let last_seq = self.state(t, c)?.map(|row| row.last_seq);
        let marks = self.member(t, c, user)?.map(|row| Marks {
            delivered: row.delivered,
            read: row.read,
        });
        let cursor = match device {
            Some(d) => self.cursor(&Key::new().s(t).s(user).s(d).s(c).bytes())?,
            None => 0,
        };
        Ok(MarkReads {
            last_seq,
            marks,
            cursor,
        })
    }

    async fn member_state(
        &mut self,
        key: &ConversationKey,
        user: &str,
    ) -> StoreResult<MemberState> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).s(user).bytes();
        if let Some(state) = self.pending.member_states.get(&k) {
            return Ok(state.clone().unwrap_or_default());
        }
        member_state(self.snap, self.s, t, c, user)
    }

    async fn reactions_of(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        user: &str,
    ) -> StoreResult<Vec<String>> {
        let (t, c) = parts(key);
        let prefix = Key::new().s(t).s(c).n(seq).s(user).bytes();
        self.reaction_keys(&prefix)?
            .iter()
            .map(|k| str_after(k, &prefix).map(str::to_owned))
            .collect()
    }

    async fn pins(&mut self, key: &ConversationKey) -> StoreResult<Vec<PinRow>> {
        let (t, c) = parts(key);
        self.pin_rows(t, c)
    }

    async fn thread_mark(
        &mut self,
        key: &ConversationKey,
        user: &str,
        root_seq: u64,
    ) -> StoreResult<Option<u64>> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(user).s(c).n(root_seq).bytes();
        if let Some(mark) = self.pending.thread_marks.get(&k) {
            return Ok(Some(*mark));
        }
        self.snap
            .get(&self.s.thread_marks, &k)
            .map_err(storage)?
            .map(|v| read_words::<1>(&v).map(|[m]| m))
            .transpose()
    }

    async fn unsolicited_since(
        &mut self,
        tenant: &TenantId,
        user: &str,
        since: Timestamp,
    ) -> StoreResult<u32> {
        self.unsolicited_count(tenant, user, since)
    }

    async fn bans(&mut self, key: &ConversationKey) -> StoreResult<Vec<Ban>> {
        self.ban_rows(key)
    }

    async fn write(&mut self, write: Write<'_>) -> StoreResult<()> {
        self.apply_write(write)
    }
}
