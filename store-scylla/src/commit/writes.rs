//! The row changes of one Scylla commit ([`RowWrite`]): the CQL rows each
//! kind of row change becomes, put and removed. The reads are in
//! `view.rs`.

use super::*;
use switchboard_store::rules::Write as RowWrite;

impl Tx<'_> {
    /// Makes one row change: statements added to the commit's batch, and
    /// what later reads of the commit need, to its cache.
    pub(super) async fn apply_write(&mut self, write: RowWrite<'_>) -> StoreResult<()> {
        debug_assert!(write.keys_agree(), "{write:?}");
        match write {
            RowWrite::Conversation { record } => self.insert_conversation(record)?,
            RowWrite::Member { c, user, joined } => match joined {
                Some(at) => self.insert_member(c, user, at).await?,
                None => self.drop_member(c, user).await?,
            },
            RowWrite::MemberState { c, user, state } => {
                self.write_member_state(c, user, state).await?
            }
            RowWrite::Reaction {
                c,
                seq,
                user,
                emoji,
                at,
            } => match at {
                Some(at) => self.add_reaction(c, seq, user, emoji, at).await?,
                None => self.drop_reaction(c, seq, user, emoji).await?,
            },
            RowWrite::MessageReactionsGone { c, seq } => self.drop_reactions(c, seq).await?,
            RowWrite::ReactionsOfGone { c, user } => self.drop_reactions_of(c, user).await?,
            RowWrite::Pin { c, message_id, pin } => match pin {
                Some(pin) => self.add_pin(c, pin).await?,
                None => self.drop_pin(c, message_id).await?,
            },
            RowWrite::ThreadReply { c, root_seq, seq } => {
                self.add_thread_reply(c, root_seq, seq).await?
            }
            RowWrite::ThreadMark {
                c,
                user,
                root_seq,
                seq,
            } => self.write_thread_mark(c, user, root_seq, seq).await?,
            RowWrite::Uncounted { c, seq } => self.write_uncounted(c, seq),
            RowWrite::Mention {
                c,
                user,
                seq,
                present,
            } => match present {
                true => self.add_mention(c, user, seq).await?,
                false => self.drop_mention(c, user, seq).await?,
            },
            RowWrite::Speaker { c, user } => {
                let (t, c) = ck(c);
                let ts = self.ts();
                self.push(&self.store.st.insert_speaker, (t, c, user.to_owned(), ts));
            }
            RowWrite::Unsolicited { c, user, actor, at } => {
                self.insert_unsolicited(c, user, actor, at)?
            }
            RowWrite::Message { c, m, placement } => self.put_message(c, m, placement).await?,
            RowWrite::Sent { c, m } => self.insert_sent(c, m)?,
            RowWrite::SentGone {
                c,
                sender,
                client_msg_id,
            } => self.drop_sent(c, sender, client_msg_id)?,
            RowWrite::Version { c, seq, v } => self.put_version(c, seq, v)?,
            RowWrite::VersionsGone { c, seq } => self.remove_versions(c, seq)?,
            RowWrite::MediaRef {
                c,
                seq,
                blob_ref,
                present,
            } => self.media_ref(c, seq, blob_ref, present),
            RowWrite::Inbox {
                c,
                user,
                device,
                seq,
                at,
            } => {
                let k = ck(c);
                let day = self.day_of(&k, seq)?;
                self.inbox_row(&k, user, device, seq, day, at);
            }
            RowWrite::InboxGone {
                c,
                user,
                device,
                which,
            } => self.remove_inbox(c, user, device, which)?,
            RowWrite::Marks {
                c,
                user,
                delivered,
                read,
            } => {
                let k = ck(c);
                if let Some(seq) = delivered {
                    self.set_mark(&k, user, DELIVERED, seq);
                }
                if let Some(seq) = read {
                    self.set_mark(&k, user, READ, seq);
                }
            }
            RowWrite::Cursor {
                c,
                user,
                device,
                seq,
            } => self.set_cursor(c, user, device, seq)?,
            RowWrite::Position { c, last } => self.set_position(c, last).await?,
            RowWrite::Policy { c, settings } => self.write_policy(c, settings)?,
            RowWrite::Ban { c, user, ban } => self.write_ban(c, ban, user)?,
            RowWrite::Listing { c, listing } => self.write_listing(c, listing)?,
            RowWrite::Invite { c, code, invite } => self.write_invite(c, code, invite)?,
            RowWrite::Block {
                tenant,
                user,
                target,
                at,
            } => self.write_block(tenant, user, target, at),
            RowWrite::Expiry {
                c,
                at,
                seq,
                present,
            } => self.write_expiry(c, at, seq, present),
            RowWrite::Report { tenant, report } => self.write_report(tenant, report)?,
            RowWrite::Profile { tenant, profile } => self.write_profile(tenant, profile)?,
            RowWrite::AnonymisedCreator { c, e } => self.rename_creator(c, e).await?,
            RowWrite::JoinedGone { c, user } => self.drop_joined(c, user)?,
            RowWrite::UserRowsGone { tenant, user } => self.erase_user(tenant, user).await?,
            RowWrite::UncountedOf { c, user } => self.uncount_all_of(c, user).await?,
            RowWrite::Archived {
                b,
                span,
                newest,
                object,
            } => self.replace_by_archive(b, span, newest, object).await?,
        }
        Ok(())
    }

    fn insert_conversation(&mut self, record: &ConversationRecord) -> StoreResult<()> {
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

    /// Written with a day's TTL: nothing else removes them.
    fn insert_unsolicited(
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

    fn insert_sent(&mut self, c: &ConversationKey, m: &Message) -> StoreResult<()> {
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

    fn put_version(
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

    fn remove_versions(&mut self, c: &ConversationKey, seq: u64) -> StoreResult<()> {
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

    /// A range is one range tombstone.
    fn remove_inbox(
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

    fn set_cursor(
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

    /// A removal is a tombstone: its timestamp is later than any write
    /// before it in this commit, so it also wins over a reference made
    /// there.
    fn media_ref(&mut self, c: &ConversationKey, seq: u64, blob_ref: &str, present: bool) {
        let (t, c) = ck(c);
        let ts = self.ts();
        let st = &self.store.st;
        if present {
            self.push(
                &st.insert_media_ref,
                (t, blob_ref.to_owned(), c, seq_db(seq), ts),
            );
        } else {
            self.push(
                &st.delete_media_ref,
                (ts, t, blob_ref.to_owned(), c, seq_db(seq)),
            );
        }
    }
}
