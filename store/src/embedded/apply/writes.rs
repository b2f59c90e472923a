//! The row changes of one group of the commit thread ([`Write`]), in
//! fjall's key layout: each kind of row, put and removed. The reads are
//! in `view.rs`.

use fjall::Keyspace;

use super::*;
use crate::rules::Write;

impl GroupView<'_> {
    /// Makes one row change. Every write goes to the group's batch (and
    /// what later reads of the group need, to its pending rows), so none
    /// waits.
    pub(super) fn apply_write(&mut self, write: Write<'_>) -> StoreResult<()> {
        debug_assert!(write.keys_agree(), "{write:?}");
        match write {
            Write::Conversation { record } => self.insert_conversation(record)?,
            Write::Member { c, user, joined } => match joined {
                Some(at) => self.insert_member(c, user, at)?,
                None => self.remove_member(c, user)?,
            },
            Write::MemberState { c, user, state } => self.put_member_state(c, user, state)?,
            Write::Reaction {
                c,
                seq,
                user,
                emoji,
                at,
            } => self.set_reaction(conversation(c).n(seq).s(user).s(emoji).bytes(), at),
            Write::MessageReactionsGone { c, seq } => {
                for k in self.reaction_keys(&conversation(c).n(seq).bytes())? {
                    self.set_reaction(k, None);
                }
            }
            Write::ReactionsOfGone { c, user } => self.remove_reaction_rows_of(c, user)?,
            Write::Pin { c, message_id, pin } => {
                self.set_pin(conversation(c).n(message_id.as_u64()).bytes(), pin)?
            }
            Write::ThreadReply { c, root_seq, seq } => {
                let k = conversation(c).n(root_seq).n(seq).bytes();
                flag(self.batch, &self.s.thread_replies, k, true)
            }
            Write::ThreadMark {
                c,
                user,
                root_seq,
                seq,
            } => {
                let k = by_user(c, user).n(root_seq).bytes();
                self.batch
                    .insert(&self.s.thread_marks, k.clone(), words([seq]));
                self.pending.thread_marks.insert(k, seq);
            }
            Write::Mention {
                c,
                user,
                seq,
                present,
            } => {
                let k = by_user(c, user).n(seq).bytes();
                flag(self.batch, &self.s.mentions, k, present)
            }
            Write::Speaker { c, user } => {
                let k = conversation(c).s(user).bytes();
                if self.cache.speakers.insert(k.clone()) {
                    self.batch.insert(&self.s.speakers, k, []);
                }
            }
            Write::Unsolicited { c, user, actor, at } => {
                self.record_unsolicited(c, user, actor, at)?
            }
            Write::Message { c, m, placement } => self.put_message(c, m, placement)?,
            Write::Sent { c, m } => self.record_sent(c, m),
            Write::SentGone {
                c,
                sender,
                client_msg_id,
            } => self.remove_sent_key(c, sender, client_msg_id),
            Write::Version { c, seq, v } => self.put_version(c, seq, v)?,
            Write::VersionsGone { c, seq } => self.remove_versions(c, seq)?,
            // A reference outlives the message's deletion: what a member
            // could download stays downloadable (versions of edited media
            // too). One row per referencing message: a blob stays
            // referenced while any of them (or a version of one) carries it.
            Write::MediaRef {
                c,
                seq,
                blob_ref,
                present,
            } => {
                let (t, cid) = parts(c);
                let k = Key::new().s(t).s(blob_ref).s(cid).n(seq).bytes();
                flag(self.batch, &self.s.media_refs, k, present)
            }
            Write::Inbox {
                c,
                user,
                device,
                seq,
                at,
            } => self.insert_inbox_key(by_device(c, user, device).n(seq).bytes(), at),
            Write::InboxGone {
                c,
                user,
                device,
                which,
            } => self.remove_inbox(c, user, device, which)?,
            Write::Marks {
                c,
                user,
                delivered,
                read,
            } => self.raise_marks(c, user, delivered, read)?,
            Write::Cursor {
                c,
                user,
                device,
                seq,
            } => {
                let k = by_device(c, user, device).bytes();
                self.batch
                    .insert(&self.s.device_cursors, k.clone(), words([seq]));
                self.cache.cursors.insert(k, seq);
            }
            // The position is derived from the newest message on read:
            // only the cache records it.
            Write::Position { c, last } => {
                let (t, cid) = parts(c);
                let row = StateRow {
                    last_seq: last.seq,
                    last_activity: last.created_at.unix_ms(),
                };
                self.set_state(t, cid, row);
            }
            Write::Policy { c, settings } => self.write_policy(c, settings)?,
            Write::Ban { c, user, ban } => self.write_ban(c, ban, user)?,
            Write::Listing { c, listing } => self.write_listing(c, listing)?,
            Write::Invite { c, code, invite } => self.write_invite(c, code, invite)?,
            Write::Block {
                tenant,
                user,
                target,
                at,
            } => self.write_block(tenant, user, target, at),
            Write::Expiry {
                c,
                at,
                seq,
                present,
            } => self.write_expiry(c, at, seq, present),
            Write::Report { tenant, report } => self.write_report(tenant, report)?,
            Write::Uncounted { c, seq } => {
                self.batch
                    .insert(&self.s.uncounted, conversation(c).n(seq).bytes(), [])
            }
            Write::Profile { tenant, profile } => {
                let k = Key::new().s(tenant.as_str()).s(profile.user_id.as_str());
                self.batch
                    .insert(&self.s.profiles, k.bytes(), encode(profile)?)
            }
            Write::AnonymisedCreator { c, e } => self.anonymise_meta(c, e)?,
            Write::JoinedGone { c, user } => {
                self.batch.remove(&self.s.joined, by_user(c, user).bytes())
            }
            Write::UserRowsGone { tenant, user } => self.erase_user_keys(tenant, user)?,
            Write::UncountedOf { c, user } => self.uncount_all_of(c, user)?,
            Write::Archived {
                b,
                span,
                newest,
                object,
            } => self.replace_by_archive(b, span, newest, object)?,
        }
        Ok(())
    }

    fn put_member_state(
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

    fn insert_conversation(&mut self, record: &ConversationRecord) -> StoreResult<()> {
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

    fn insert_member(
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

    fn remove_member(&mut self, key: &ConversationKey, user: &str) -> StoreResult<()> {
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

    /// Messages are keyed by seq alone. A day's bucket records the first
    /// seq stored that day; the last is the next bucket's first minus one
    /// (or the conversation's last).
    fn put_message(
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

    fn put_version(
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

    fn remove_versions(&mut self, key: &ConversationKey, seq: u64) -> StoreResult<()> {
        let (t, c) = parts(key);
        let doomed = std::mem::take(self.versions_with_keys(t, c, seq)?);
        for (k, _) in doomed {
            self.batch.remove(&self.s.versions, k);
        }
        Ok(())
    }

    /// A span up to `MAX_POINT_DELETES` is deleted key by key: scanning
    /// would also walk every tombstone earlier acks left in the memtable,
    /// a cost that grows with the conversation. A device that catches up
    /// on a long backlog at once is rare enough to scan for.
    fn remove_inbox(
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

    fn raise_marks(
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
}

/// A conversation's key prefix: tenant, conversation.
fn conversation(c: &ConversationKey) -> Key {
    let (t, cid) = parts(c);
    Key::new().s(t).s(cid)
}

/// A user's key prefix in a conversation, for rows kept by user: tenant,
/// user, conversation.
fn by_user(c: &ConversationKey, user: &str) -> Key {
    let (t, cid) = parts(c);
    Key::new().s(t).s(user).s(cid)
}

/// A device's key prefix in a conversation, for its inbox and cursor:
/// tenant, user, device, conversation.
fn by_device(c: &ConversationKey, user: &str, device: &str) -> Key {
    let (t, cid) = parts(c);
    Key::new().s(t).s(user).s(device).s(cid)
}

/// Writes a row that is all key (a mention, a media reference, a thread
/// reply), or removes it.
fn flag(batch: &mut OwnedWriteBatch, space: &Keyspace, key: Vec<u8>, present: bool) {
    if present {
        batch.insert(space, key, []);
    } else {
        batch.remove(space, key);
    }
}
