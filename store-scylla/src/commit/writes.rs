//! The row changes of one Scylla commit ([`RowWrite`]): the CQL rows each
//! kind of row change becomes, put and removed. The reads are in
//! `view.rs`.

use super::*;
use switchboard_protocol::reports::Report;
use switchboard_protocol::safety::{Ban, ConversationPolicy as Policy};
use switchboard_store::erasure::Erasure;
use switchboard_store::rules::Write as RowWrite;

impl Tx<'_> {
    /// Makes one row change: each kind, and its put or removal, in
    /// the methods below.
    pub(super) async fn apply_write(&mut self, write: RowWrite<'_>) -> StoreResult<()> {
        match write {
            RowWrite::Conversation { record } => self.insert_conversation(record).await,
            RowWrite::Member {
                c,
                user,
                joined: Some(at),
            } => self.insert_member(c, user, at).await,
            RowWrite::Member {
                c,
                user,
                joined: None,
            } => self.remove_member(c, user).await,
            RowWrite::MemberState { c, user, state } => self.put_member_state(c, user, state).await,
            RowWrite::Reaction {
                c,
                seq,
                user,
                emoji,
                at: Some(at),
            } => self.insert_reaction(c, seq, user, emoji, at).await,
            RowWrite::Reaction {
                c,
                seq,
                user,
                emoji,
                at: None,
            } => self.remove_reaction(c, seq, user, emoji).await,
            RowWrite::MessageReactionsGone { c, seq } => self.remove_reactions(c, seq).await,
            RowWrite::ReactionsOfGone { c, user } => self.remove_reactions_of(c, user).await,
            RowWrite::Pin {
                c, pin: Some(pin), ..
            } => self.insert_pin(c, pin).await,
            RowWrite::Pin {
                c,
                message_id,
                pin: None,
            } => self.remove_pin(c, message_id).await,
            RowWrite::ThreadReply { c, root_seq, seq } => {
                self.insert_thread_reply(c, root_seq, seq).await
            }
            RowWrite::ThreadMark {
                c,
                user,
                root_seq,
                seq,
            } => self.set_thread_mark(c, user, root_seq, seq).await,
            RowWrite::Mention {
                c,
                user,
                seq,
                present: true,
            } => self.insert_mention(c, user, seq).await,
            RowWrite::Mention {
                c,
                user,
                seq,
                present: false,
            } => self.remove_mention(c, user, seq).await,
            RowWrite::Speaker { c, user } => self.insert_speaker(c, user).await,
            RowWrite::Unsolicited { c, user, actor, at } => {
                self.insert_unsolicited(c, user, actor, at).await
            }
            RowWrite::Message { c, m, placement } => self.put_message(c, m, placement).await,
            RowWrite::Sent { c, m } => self.insert_sent(c, m).await,
            RowWrite::SentGone {
                c,
                sender,
                client_msg_id,
            } => self.remove_sent(c, sender, client_msg_id).await,
            RowWrite::Version { c, seq, v } => self.put_version(c, seq, v).await,
            RowWrite::VersionsGone { c, seq } => self.remove_versions(c, seq).await,
            RowWrite::MediaRef {
                c,
                seq,
                blob_ref,
                present: true,
            } => self.reference_media(c, seq, blob_ref).await,
            RowWrite::MediaRef {
                c,
                seq,
                blob_ref,
                present: false,
            } => self.unreference_media(c, seq, blob_ref).await,
            RowWrite::Inbox {
                c,
                user,
                device,
                seq,
                at,
            } => self.insert_inbox(c, user, device, seq, at).await,
            RowWrite::InboxGone {
                c,
                user,
                device,
                which,
            } => self.remove_inbox(c, user, device, which).await,
            RowWrite::Marks {
                c,
                user,
                delivered,
                read,
            } => self.raise_marks(c, user, delivered, read).await,
            RowWrite::Cursor {
                c,
                user,
                device,
                seq,
            } => self.set_cursor(c, user, device, seq).await,
            RowWrite::Position { c, last } => self.set_position(c, last).await,
            RowWrite::Policy { c, policy } => self.put_policy(c, policy).await,
            RowWrite::Ban {
                c, ban: Some(ban), ..
            } => self.put_ban(c, ban).await,
            RowWrite::Ban { c, user, ban: None } => self.remove_ban(c, user).await,
            RowWrite::Block {
                tenant,
                user,
                target,
                at,
            } => self.put_block(tenant, user, target, at).await,
            RowWrite::Expiry {
                c,
                at,
                seq,
                present,
            } => self.set_expiry(c, at, seq, present).await,
            RowWrite::Report { tenant, report } => self.put_report(tenant, report).await,
            RowWrite::AnonymisedCreator { c, e } => self.anonymise_creator(c, e).await,
            RowWrite::JoinedGone { c, user } => self.remove_joined(c, user).await,
            RowWrite::UserRowsGone { tenant, user } => self.erase_user_rows(tenant, user).await,
            RowWrite::Archived {
                b,
                span,
                newest,
                object,
            } => self.archive_rows(b, span, newest, object).await,
        }
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
