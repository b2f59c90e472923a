//! The row changes of one group of the commit thread ([`Write`]), in
//! fjall's key layout: each kind of row, put and removed. The reads are
//! in `view.rs`.

use super::*;
use crate::erasure::Erasure;
use crate::rules::Write;
use switchboard_protocol::reports::Report;
use switchboard_protocol::safety::{Ban, ConversationPolicy as Policy};

impl GroupView<'_> {
    /// Makes one row change: each kind, and its put or removal, in
    /// the methods below.
    pub(super) async fn apply_write(&mut self, write: Write<'_>) -> StoreResult<()> {
        match write {
            Write::Conversation { record } => self.insert_conversation(record).await,
            Write::Member {
                c,
                user,
                joined: Some(at),
            } => self.insert_member(c, user, at).await,
            Write::Member {
                c,
                user,
                joined: None,
            } => self.remove_member(c, user).await,
            Write::MemberState { c, user, state } => self.put_member_state(c, user, state).await,
            Write::Reaction {
                c,
                seq,
                user,
                emoji,
                at: Some(at),
            } => self.insert_reaction(c, seq, user, emoji, at).await,
            Write::Reaction {
                c,
                seq,
                user,
                emoji,
                at: None,
            } => self.remove_reaction(c, seq, user, emoji).await,
            Write::MessageReactionsGone { c, seq } => self.remove_reactions(c, seq).await,
            Write::ReactionsOfGone { c, user } => self.remove_reactions_of(c, user).await,
            Write::Pin {
                c, pin: Some(pin), ..
            } => self.insert_pin(c, pin).await,
            Write::Pin {
                c,
                message_id,
                pin: None,
            } => self.remove_pin(c, message_id).await,
            Write::ThreadReply { c, root_seq, seq } => {
                self.insert_thread_reply(c, root_seq, seq).await
            }
            Write::ThreadMark {
                c,
                user,
                root_seq,
                seq,
            } => self.set_thread_mark(c, user, root_seq, seq).await,
            Write::Mention {
                c,
                user,
                seq,
                present: true,
            } => self.insert_mention(c, user, seq).await,
            Write::Mention {
                c,
                user,
                seq,
                present: false,
            } => self.remove_mention(c, user, seq).await,
            Write::Speaker { c, user } => self.insert_speaker(c, user).await,
            Write::Unsolicited { c, user, actor, at } => {
                self.insert_unsolicited(c, user, actor, at).await
            }
            Write::Message { c, m, placement } => self.put_message(c, m, placement).await,
            Write::Sent { c, m } => self.insert_sent(c, m).await,
            Write::SentGone {
                c,
                sender,
                client_msg_id,
            } => self.remove_sent(c, sender, client_msg_id).await,
            Write::Version { c, seq, v } => self.put_version(c, seq, v).await,
            Write::VersionsGone { c, seq } => self.remove_versions(c, seq).await,
            Write::MediaRef {
                c,
                seq,
                blob_ref,
                present: true,
            } => self.reference_media(c, seq, blob_ref).await,
            Write::MediaRef {
                c,
                seq,
                blob_ref,
                present: false,
            } => self.unreference_media(c, seq, blob_ref).await,
            Write::Inbox {
                c,
                user,
                device,
                seq,
                at,
            } => self.insert_inbox(c, user, device, seq, at).await,
            Write::InboxGone {
                c,
                user,
                device,
                which,
            } => self.remove_inbox(c, user, device, which).await,
            Write::Marks {
                c,
                user,
                delivered,
                read,
            } => self.raise_marks(c, user, delivered, read).await,
            Write::Cursor {
                c,
                user,
                device,
                seq,
            } => self.set_cursor(c, user, device, seq).await,
            Write::Position { c, last } => self.set_position(c, last).await,
            Write::Policy { c, policy } => self.put_policy(c, policy).await,
            Write::Ban {
                c, ban: Some(ban), ..
            } => self.put_ban(c, ban).await,
            Write::Ban { c, user, ban: None } => self.remove_ban(c, user).await,
            Write::Block {
                tenant,
                user,
                target,
                at,
            } => self.put_block(tenant, user, target, at).await,
            Write::Expiry {
                c,
                at,
                seq,
                present,
            } => self.set_expiry(c, at, seq, present).await,
            Write::Report { tenant, report } => self.put_report(tenant, report).await,
            Write::AnonymisedCreator { c, e } => self.anonymise_creator(c, e).await,
            Write::JoinedGone { c, user } => self.remove_joined(c, user).await,
            Write::UserRowsGone { tenant, user } => self.erase_user_rows(tenant, user).await,
            Write::Archived {
                b,
                span,
                newest,
                object,
            } => self.archive_rows(b, span, newest, object).await,
        }
    }
    async fn put_member_state(
        &mut self,
        key: &ConversationKey,
        user: &str,
        state: &MemberState,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).s(user).bytes();
        if state.is_default() {
            self.batch.remove(&self.s.member_states, k.clone());
            self.pending.member_states.insert(k, None);
        } else {
            self.batch
                .insert(&self.s.member_states, k.clone(), encode(state)?);
            self.pending.member_states.insert(k, Some(state.clone()));
        }
        Ok(())
    }

    async fn insert_conversation(&mut self, record: &ConversationRecord) -> StoreResult<()> {
        let (t, c) = (record.tenant.as_str(), record.conversation_id.as_str());
        let meta = encode(&ConversationMeta::of(record))?;
        self.batch
            .insert(&self.s.conversations, Key::new().s(t).s(c).bytes(), meta);
        let row = StateRow {
            last_seq: record.last_seq,
            last_activity: record.last_activity.unix_ms(),
        };
        self.set_state(t, c, row);
        Ok(())
    }

    async fn insert_member(
        &mut self,
        key: &ConversationKey,
        user: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let row = MemberRow {
            joined: at.unix_ms(),
            delivered: 0,
            read: 0,
        };
        let member_key = Key::new().s(t).s(c).s(user).bytes();
        self.batch
            .insert(&self.s.members, member_key.clone(), row.encode_joined());
        self.batch
            .insert(&self.s.member_marks, member_key.clone(), row.encode_marks());
        let listed = Key::new().s(t).s(user).s(c).bytes();
        self.batch.insert(&self.s.joined, listed.clone(), []);
        self.batch.insert(&self.s.user_conversations, listed, []);
        self.cache.member_rows.insert(member_key, Some(row));
        self.member_list(t, c)?.push(user.to_owned());
        Ok(())
    }

    async fn remove_member(&mut self, key: &ConversationKey, user: &str) -> StoreResult<()> {
        let (t, c) = parts(key);
        let member_key = Key::new().s(t).s(c).s(user).bytes();
        self.batch.remove(&self.s.members, member_key.clone());
        self.batch.remove(&self.s.member_marks, member_key.clone());
        self.batch.remove(&self.s.speakers, member_key.clone());
        self.cache.speakers.remove(&member_key);
        self.batch.remove(&self.s.member_states, member_key.clone());
        self.pending.member_states.insert(member_key.clone(), None);
        self.batch.remove(
            &self.s.user_conversations,
            Key::new().s(t).s(user).s(c).bytes(),
        );
        self.cache.member_rows.insert(member_key, None);
        self.member_list(t, c)?.retain(|m| m != user);
        // Their mentions here go too: one who comes back reads from 0 and
        // must not find old ones counted. (Committed rows: a mention this
        // same group wrote stays; a group rarely both names and removes.)
        let mentions = Key::new().s(t).s(user).s(c).bytes();
        for kv in scan(self.snap, &self.s.mentions, mentions) {
            self.batch.remove(&self.s.mentions, kv?.0.to_vec());
        }
        Ok(())
    }

    async fn insert_speaker(&mut self, key: &ConversationKey, user: &str) -> StoreResult<()> {
        let (t, c) = parts(key);
        let speaker_key = Key::new().s(t).s(c).s(user).bytes();
        if self.cache.speakers.insert(speaker_key.clone()) {
            self.batch.insert(&self.s.speakers, speaker_key, []);
        }
        Ok(())
    }

    async fn insert_unsolicited(
        &mut self,
        key: &ConversationKey,
        user: &str,
        actor: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        self.record_unsolicited(key, user, actor, at)
    }

    async fn insert_reaction(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        user: &str,
        emoji: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.set_reaction(
            Key::new().s(t).s(c).n(seq).s(user).s(emoji).bytes(),
            Some(at),
        );
        Ok(())
    }

    async fn remove_reaction(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        user: &str,
        emoji: &str,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.set_reaction(Key::new().s(t).s(c).n(seq).s(user).s(emoji).bytes(), None);
        Ok(())
    }

    async fn remove_reactions(&mut self, key: &ConversationKey, seq: u64) -> StoreResult<()> {
        let (t, c) = parts(key);
        for k in self.reaction_keys(&Key::new().s(t).s(c).n(seq).bytes())? {
            self.set_reaction(k, None);
        }
        Ok(())
    }

    async fn insert_thread_reply(
        &mut self,
        key: &ConversationKey,
        root_seq: u64,
        seq: u64,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.batch.insert(
            &self.s.thread_replies,
            Key::new().s(t).s(c).n(root_seq).n(seq).bytes(),
            [],
        );
        Ok(())
    }

    async fn set_thread_mark(
        &mut self,
        key: &ConversationKey,
        user: &str,
        root_seq: u64,
        seq: u64,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(user).s(c).n(root_seq).bytes();
        self.batch
            .insert(&self.s.thread_marks, k.clone(), words([seq]));
        self.pending.thread_marks.insert(k, seq);
        Ok(())
    }

    async fn insert_mention(
        &mut self,
        key: &ConversationKey,
        user: &str,
        seq: u64,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.batch.insert(
            &self.s.mentions,
            Key::new().s(t).s(user).s(c).n(seq).bytes(),
            [],
        );
        Ok(())
    }

    async fn remove_mention(
        &mut self,
        key: &ConversationKey,
        user: &str,
        seq: u64,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.batch.remove(
            &self.s.mentions,
            Key::new().s(t).s(user).s(c).n(seq).bytes(),
        );
        Ok(())
    }

    async fn put_policy(&mut self, key: &ConversationKey, policy: &Policy) -> StoreResult<()> {
        self.write_policy(key, policy)
    }

    async fn put_ban(&mut self, key: &ConversationKey, ban: &Ban) -> StoreResult<()> {
        self.write_ban(key, Some(ban), ban.user_id.as_str())
    }

    async fn remove_ban(&mut self, key: &ConversationKey, user: &str) -> StoreResult<()> {
        self.write_ban(key, None, user)
    }

    async fn put_report(&mut self, tenant: &TenantId, report: &Report) -> StoreResult<()> {
        self.write_report(tenant, report)
    }

    async fn set_expiry(
        &mut self,
        key: &ConversationKey,
        at: Timestamp,
        seq: u64,
        present: bool,
    ) -> StoreResult<()> {
        self.write_expiry(key, at, seq, present);
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

    async fn insert_pin(&mut self, key: &ConversationKey, pin: &PinRow) -> StoreResult<()> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).n(pin.message_id.as_u64()).bytes();
        self.set_pin(k, Some(pin))
    }

    async fn remove_pin(
        &mut self,
        key: &ConversationKey,
        message_id: MessageId,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.set_pin(Key::new().s(t).s(c).n(message_id.as_u64()).bytes(), None)
    }

    /// Messages are keyed by seq alone. A day's bucket records the first
    /// seq stored that day; the last is the next bucket's first minus one
    /// (or the conversation's last).
    async fn put_message(
        &mut self,
        key: &ConversationKey,
        m: &Message,
        placement: Placement,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let message_key = Key::new().s(t).s(c).n(m.seq).bytes();
        self.batch
            .insert(&self.s.messages, message_key.clone(), encode(m)?);
        self.pending.messages.insert(message_key, m.clone());
        if placement == Placement::New {
            let bucket = Key::new().s(t).s(c).day(day_bucket(m.created_at)).bytes();
            if !self.cache.days.contains(&bucket) {
                if !self
                    .snap
                    .contains_key(&self.s.buckets, &bucket)
                    .map_err(storage)?
                {
                    self.batch
                        .insert(&self.s.buckets, bucket.clone(), BucketRow::live(m.seq));
                }
                self.cache.days.insert(bucket);
            }
        }
        Ok(())
    }

    async fn insert_sent(&mut self, key: &ConversationKey, m: &Message) -> StoreResult<()> {
        self.record_sent(key, m);
        Ok(())
    }

    async fn put_version(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        v: &MessageVersion,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).n(seq).n(u64::from(v.version)).bytes();
        self.batch.insert(&self.s.versions, k.clone(), encode(v)?);
        let versions = self.versions_with_keys(t, c, seq)?;
        versions.retain(|(known, _)| *known != k);
        versions.push((k, v.clone()));
        Ok(())
    }

    async fn remove_versions(&mut self, key: &ConversationKey, seq: u64) -> StoreResult<()> {
        let (t, c) = parts(key);
        let doomed = std::mem::take(self.versions_with_keys(t, c, seq)?);
        for (k, _) in doomed {
            self.batch.remove(&self.s.versions, k);
        }
        Ok(())
    }

    /// A reference outlives the message's deletion: what a member could
    /// download stays downloadable (versions of edited media too).
    /// One row per referencing message: a blob stays referenced while
    /// any of them (or a version of one) carries it.
    async fn reference_media(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        blob_ref: &str,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.batch.insert(
            &self.s.media_refs,
            Key::new().s(t).s(blob_ref).s(c).n(seq).bytes(),
            [],
        );
        Ok(())
    }

    async fn unreference_media(
        &mut self,
        key: &ConversationKey,
        seq: u64,
        blob_ref: &str,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.batch.remove(
            &self.s.media_refs,
            Key::new().s(t).s(blob_ref).s(c).n(seq).bytes(),
        );
        Ok(())
    }

    async fn insert_inbox(
        &mut self,
        key: &ConversationKey,
        user: &str,
        device: &str,
        seq: u64,
        at: Timestamp,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.insert_inbox_key(Key::new().s(t).s(user).s(device).s(c).n(seq).bytes(), at);
        Ok(())
    }

    /// A span up to `MAX_POINT_DELETES` is deleted key by key: scanning
    /// would also walk every tombstone earlier acks left in the memtable,
    /// a cost that grows with the conversation. A device that catches up
    /// on a long backlog at once is rare enough to scan for.
    async fn remove_inbox(
        &mut self,
        key: &ConversationKey,
        user: &str,
        device: &str,
        which: InboxEntries,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let entry = |seq: u64| Key::new().s(t).s(user).s(device).s(c).n(seq).bytes();
        match which {
            InboxEntries::One(seq) => self.remove_inbox_key(entry(seq)),
            InboxEntries::Through { from, to } if to.saturating_sub(from) < MAX_POINT_DELETES => {
                for seq in from..=to {
                    self.remove_inbox_key(entry(seq));
                }
            }
            InboxEntries::Through { from, to } => {
                self.remove_inbox_between(entry(from), entry(to))?
            }
            InboxEntries::All => {
                self.remove_inbox_prefix(Key::new().s(t).s(user).s(device).s(c).bytes())?
            }
        }
        Ok(())
    }

    async fn raise_marks(
        &mut self,
        key: &ConversationKey,
        user: &str,
        delivered: Option<u64>,
        read: Option<u64>,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        if let Some(mut row) = self.member(t, c, user)? {
            row.delivered = row.delivered.max(delivered.unwrap_or(0));
            row.read = row.read.max(read.unwrap_or(0));
            self.set_marks(t, c, user, row);
        }
        Ok(())
    }

    async fn set_cursor(
        &mut self,
        key: &ConversationKey,
        user: &str,
        device: &str,
        seq: u64,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let cursor_key = Key::new().s(t).s(user).s(device).s(c).bytes();
        self.batch
            .insert(&self.s.device_cursors, cursor_key.clone(), words([seq]));
        self.cache.cursors.insert(cursor_key, seq);
        Ok(())
    }

    /// The position is derived from the newest message on read: only the
    /// cache records it.
    async fn set_position(&mut self, key: &ConversationKey, last: &Message) -> StoreResult<()> {
        let (t, c) = parts(key);
        let row = StateRow {
            last_seq: last.seq,
            last_activity: last.created_at.unix_ms(),
        };
        self.set_state(t, c, row);
        Ok(())
    }

    async fn remove_sent(
        &mut self,
        key: &ConversationKey,
        sender: &str,
        id: &str,
    ) -> StoreResult<()> {
        self.remove_sent_key(key, sender, id);
        Ok(())
    }

    async fn anonymise_creator(
        &mut self,
        key: &ConversationKey,
        e: Erasure<'_>,
    ) -> StoreResult<()> {
        self.anonymise_meta(key, e)
    }

    async fn remove_reactions_of(&mut self, key: &ConversationKey, user: &str) -> StoreResult<()> {
        self.remove_reaction_rows_of(key, user)
    }

    async fn remove_joined(&mut self, key: &ConversationKey, user: &str) -> StoreResult<()> {
        let (t, c) = parts(key);
        self.batch
            .remove(&self.s.joined, Key::new().s(t).s(user).s(c).bytes());
        Ok(())
    }

    async fn erase_user_rows(&mut self, tenant: &TenantId, user: &str) -> StoreResult<()> {
        self.erase_user_keys(tenant, user)
    }

    async fn archive_rows(
        &mut self,
        b: &BucketKey,
        span: &BucketSpan,
        newest: u64,
        object: &str,
    ) -> StoreResult<()> {
        self.replace_by_archive(b, span, newest, object)
    }
}
