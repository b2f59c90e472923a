//! The [`Store`] trait on ScyllaDB, over the handle in `client.rs`; a
//! commit's checks and writes are in `commit.rs`.

use std::collections::BTreeSet;

use async_trait::async_trait;
use futures::StreamExt;
use switchboard_protocol::channels::Invite;
use switchboard_protocol::profile::Profile;
use switchboard_protocol::reports::{Report, ReportStatus};
use switchboard_protocol::safety::{Ban, Block};
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, MessageId, MessageVersion, TenantId,
    Timestamp, UserId,
};
use switchboard_store::{
    ArchiveScan, ArchivedBucket, BucketContents, BucketKey, Consent, ConsentQuery,
    ConversationDetail, ConversationKey, ConversationScan, ConversationSummary, ExpiredScan,
    HistoryQuery, InboxCursor, InboxSweep, ListQuery, Listing, MarkChange, MessageKey, Mutation,
    PolicyScan, SentBy, SentKey, SequencerState, Store, StoreError, StoreResult, WriterClaim,
};

use crate::client::ScyllaStore;
use crate::commit::Tx;
use crate::cursor::{cursor_decode, cursor_encode, page_size};
use crate::rows::{day_db, limit_db, seq_db, seq_of, user_id};
use switchboard_store::{Answer, Read, Reads, reads, rules};

/// Inbox entries looked up per round of message reads.
const INBOX_CHUNK: usize = 64;

#[async_trait]
impl Store for ScyllaStore {
    async fn ping(&self) -> StoreResult<()> {
        self.st
            .schema_version
            .one(&self.session, ("store",))
            .await
            .map(|_| ())
    }

    async fn commit(&self, mutations: Vec<Mutation>) -> StoreResult<()> {
        self.commit_fenced(None, mutations).await
    }

    async fn claim_writer(&self, partition: u16) -> StoreResult<WriterClaim> {
        self.claim(partition).await
    }

    async fn commit_as(&self, claim: WriterClaim, mutations: Vec<Mutation>) -> StoreResult<()> {
        self.commit_fenced(Some(claim), mutations).await
    }

    async fn read(&self, read: Read) -> StoreResult<Answer> {
        reads::serve(self, read).await
    }

    async fn ack_delivered(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        conversation: &ConversationId,
        seq: u64,
    ) -> StoreResult<MarkChange> {
        let c = ConversationKey::new(tenant.clone(), conversation.clone());
        let mut tx = Tx::new(self);
        let change = rules::ack_delivered(&mut tx, &c, user, device, seq).await?;
        tx.finish().await?;
        Ok(change)
    }

    async fn ack_read(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversation: &ConversationId,
        seq: u64,
    ) -> StoreResult<MarkChange> {
        let c = ConversationKey::new(tenant.clone(), conversation.clone());
        let mut tx = Tx::new(self);
        let change = rules::ack_read(&mut tx, &c, user, seq).await?;
        tx.finish().await?;
        Ok(change)
    }

    /// Inbox entries expire by their TTL. With `inbox_sweep` on, one step
    /// also deletes the entries of one page of a full scan that are older
    /// than `before`, each with its own write time as the delete's
    /// timestamp, so an entry refreshed meanwhile (an edit) survives.
    async fn expire_inbox(
        &self,
        before: Timestamp,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<InboxSweep> {
        if !self.inbox_sweep {
            return Ok(InboxSweep::default());
        }
        let from = cursor_decode(cursor)?;
        let (rows, next) = self
            .st
            .scan_inbox
            .page(&self.session, (), from, page_size(budget))
            .await?;
        let cutoff = before.unix_ms();
        let seen = rows.len();
        let doomed: Vec<_> = rows
            .into_iter()
            .filter(|r| r.5.unwrap_or(0) < cutoff)
            .collect();
        let removed = doomed.len();
        self.each(doomed, |(t, u, d, c, seq, _, written)| async move {
            let ts = written.unwrap_or_else(|| self.clock.next());
            self.st
                .delete_inbox
                .run(&self.session, (ts, t, u, d, c, seq))
                .await
        })
        .await?;
        Ok(InboxSweep {
            seen: Some(seen),
            removed,
            next: cursor_encode(next),
        })
    }

    async fn ack_thread_read(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversation: &ConversationId,
        root: MessageId,
        seq: u64,
    ) -> StoreResult<()> {
        self.thread_read(tenant, user, conversation, root, seq)
            .await
    }

    async fn register_device(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
    ) -> StoreResult<()> {
        let (t, u, d) = (tenant.as_str(), user.as_str(), device.as_str());
        if self
            .st
            .device
            .one(&self.session, (t, u, d))
            .await?
            .is_some()
        {
            return Ok(());
        }
        let mut tx = Tx::new(self);
        tx.register_device(t, u, d);
        tx.finish().await
    }
}

#[async_trait]
impl Reads for ScyllaStore {
    async fn sequencer_states(
        &self,
        keys: Vec<ConversationKey>,
    ) -> StoreResult<Vec<Option<SequencerState>>> {
        self.each(keys, |k| async move {
            let (t, c) = (k.tenant.as_str(), k.conversation_id.as_str());
            let (conv, states, settings) = futures::try_join!(
                self.conv_row(t, c),
                self.states_of(t, c),
                self.settings_of(t, c)
            )?;
            let Some(conv) = conv else {
                return Ok(None);
            };
            let created_by = user_id(conv.created_by)?;
            let roles = self.roles_of(t, c, conv.kind, &created_by, &states).await?;
            let blocked_by = self.blocked_by(t, conv.kind, &roles).await?;
            Ok(Some(SequencerState {
                kind: conv.kind,
                title: conv.title,
                members: roles.keys().cloned().collect::<BTreeSet<_>>(),
                created_by,
                last_seq: conv.last_seq,
                roles,
                states: states
                    .into_iter()
                    .map(|(u, state)| Ok((user_id(u)?, state)))
                    .collect::<StoreResult<_>>()?,
                policy: settings.policy,
                custom: settings.custom,
                channel: settings.channel,
                blocked_by,
                mutes: settings.mutes,
            }))
        })
        .await
    }

    async fn find_sent(&self, keys: Vec<SentKey>) -> StoreResult<Vec<Option<Message>>> {
        self.each(keys, |k| async move {
            let (t, c) = (k.tenant.as_str(), k.conversation_id.as_str());
            let found = self
                .sent_row(t, c, k.sender.as_str(), k.client_msg_id.as_str())
                .await?;
            self.message_from_index(t, c, found).await
        })
        .await
    }

    async fn find_messages(&self, keys: Vec<MessageKey>) -> StoreResult<Vec<Option<Message>>> {
        self.each(keys, |k| async move {
            let (t, c) = (k.tenant.as_str(), k.conversation_id.as_str());
            let found = self.seq_and_day(t, c, k.message_id).await?;
            self.message_from_index(t, c, found).await
        })
        .await
    }

    async fn versions(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        message_id: MessageId,
    ) -> StoreResult<Vec<MessageVersion>> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        self.check_membership(t, c, reader.as_str()).await?;
        let (seq, day) = self
            .seq_and_day(t, c, message_id)
            .await?
            .ok_or(StoreError::NotFound)?;
        self.versions_at(t, c, crate::rows::day_of(day)?, seq_of(seq)?)
            .await
    }

    async fn conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<ConversationDetail> {
        self.conversation_detail(tenant, conversation, reader).await
    }

    async fn members(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<(ConversationKind, Vec<UserId>)> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        self.check_membership(t, c, reader.as_str()).await?;
        let (conv, members) = futures::try_join!(self.conv_row(t, c), self.member_ids(t, c))?;
        let conv = conv.ok_or(StoreError::NotFound)?;
        let members = members
            .into_iter()
            .map(user_id)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((conv.kind, members))
    }

    async fn media_referenced(&self, tenant: &TenantId, blob_ref: &str) -> StoreResult<bool> {
        self.media_is_referenced(tenant.as_str(), blob_ref).await
    }

    async fn media_readable(
        &self,
        tenant: &TenantId,
        blob_ref: &str,
        reader: &UserId,
    ) -> StoreResult<bool> {
        self.media_is_readable(tenant.as_str(), blob_ref, reader.as_str())
            .await
    }

    async fn contacts(&self, tenant: &TenantId, user: &UserId) -> StoreResult<Vec<UserId>> {
        self.presence_audience(tenant, user).await
    }

    async fn consent(&self, queries: Vec<ConsentQuery>) -> StoreResult<Vec<Consent>> {
        self.consent_of(queries).await
    }

    async fn memberships(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> StoreResult<Vec<(ConversationId, ConversationKind, usize)>> {
        self.membership_list(tenant.as_str(), user.as_str()).await
    }

    async fn conversation_page(
        &self,
        tenant: &TenantId,
        user: &UserId,
        query: ListQuery,
    ) -> StoreResult<Vec<ConversationSummary>> {
        self.page_of_conversations(tenant, user, query).await
    }

    async fn history(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        query: HistoryQuery,
    ) -> StoreResult<Vec<Message>> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        let (member, buckets) = futures::join!(
            self.check_membership(t, c, reader.as_str()),
            self.bucket_rows(t, c)
        );
        member?;
        let buckets = buckets?;
        let low = query.after_seq.map_or(1, |a| a.saturating_add(1));
        let high = query.before_seq.unwrap_or(u64::MAX);
        if low >= high || query.limit == 0 {
            return Ok(Vec::new());
        }
        if let Some(root) = query.thread_root {
            return self.thread_page(t, c, root, low, high, query.limit).await;
        }
        let mut out = Vec::with_capacity(query.limit.min(256));
        // Newest bucket first; archived ones too, for messages restored
        // into them.
        for b in &buckets {
            if b.first >= high {
                continue;
            }
            let remaining = query.limit - out.len();
            let rows = self
                .st
                .newest_first
                .stream(
                    &self.session,
                    (
                        t,
                        c,
                        day_db(b.day),
                        seq_db(low),
                        seq_db(high),
                        limit_db(remaining),
                    ),
                )
                .await?;
            Self::bodies(rows, query.limit, &mut out).await?;
            if out.len() >= query.limit || b.first <= low {
                break;
            }
        }
        Ok(out)
    }

    async fn replay(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        let (member, buckets) = futures::join!(
            self.check_membership(t, c, reader.as_str()),
            self.bucket_rows(t, c)
        );
        member?;
        let buckets = buckets?;
        let mut out = Vec::with_capacity(limit.min(256));
        // Oldest bucket first, skipping those that end at or before
        // `after_seq`.
        for index in (0..buckets.len()).rev() {
            if out.len() >= limit {
                break;
            }
            let upper = match index.checked_sub(1).and_then(|i| buckets.get(i)) {
                Some(newer) => newer.first.saturating_sub(1),
                None => u64::MAX,
            };
            if upper <= after_seq {
                continue;
            }
            let remaining = limit - out.len();
            let rows = self
                .st
                .oldest_first
                .stream(
                    &self.session,
                    (
                        t,
                        c,
                        day_db(buckets[index].day),
                        seq_db(after_seq),
                        seq_db(upper),
                        limit_db(remaining),
                    ),
                )
                .await?;
            Self::bodies(rows, limit, &mut out).await?;
        }
        Ok(out)
    }

    async fn inbox(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        after: Option<InboxCursor>,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        let (t, u, d) = (tenant.as_str(), user.as_str(), device.as_str());
        let mut out = Vec::with_capacity(limit.min(256));
        if limit == 0 {
            return Ok(out);
        }
        let entries = match &after {
            None => self
                .st
                .inbox
                .stream(&self.session, (t, u, d))
                .await?
                .boxed(),
            Some(cursor) => self
                .st
                .inbox_after
                .stream(
                    &self.session,
                    (t, u, d, cursor.conversation_id.as_str(), seq_db(cursor.seq)),
                )
                .await?
                .boxed(),
        };
        let mut entries = entries.ready_chunks(INBOX_CHUNK);
        // An entry whose message row is gone (archived, or written ahead
        // of a commit that failed) is skipped.
        while out.len() < limit {
            let Some(chunk) = entries.next().await else {
                break;
            };
            let chunk = chunk.into_iter().collect::<StoreResult<Vec<_>>>()?;
            let messages = self
                .each(chunk, |(c, seq, day)| async move {
                    self.message_at(t, &c, crate::rows::day_of(day)?, seq_of(seq)?)
                        .await
                })
                .await?;
            for m in messages.into_iter().flatten() {
                if out.len() == limit {
                    break;
                }
                out.push(m);
            }
        }
        Ok(out)
    }

    async fn message_seqs(&self, keys: Vec<MessageKey>) -> StoreResult<Vec<Option<u64>>> {
        self.each(keys, |k| async move {
            self.seq_and_day(k.tenant.as_str(), k.conversation_id.as_str(), k.message_id)
                .await?
                .map(|(seq, _)| seq_of(seq))
                .transpose()
        })
        .await
    }

    async fn archive_candidates(
        &self,
        before_day: u32,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<ArchiveScan> {
        self.unarchived_before(before_day, cursor, budget).await
    }

    async fn bucket_contents(
        &self,
        bucket: &BucketKey,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<BucketContents> {
        self.bucket_part(bucket, after_seq, limit).await
    }

    async fn archived_buckets(
        &self,
        key: &ConversationKey,
        after_seq: u64,
        before_seq: u64,
    ) -> StoreResult<Vec<ArchivedBucket>> {
        self.archived_between(key, after_seq, before_seq).await
    }

    async fn sent_by(
        &self,
        key: &ConversationKey,
        sender: &UserId,
        before_seq: Option<u64>,
        limit: usize,
    ) -> StoreResult<Vec<SentBy>> {
        self.sent_by_rows(key, sender, before_seq, limit).await
    }

    async fn user_reactions(
        &self,
        key: &ConversationKey,
        user: &UserId,
        seqs: Vec<u64>,
    ) -> StoreResult<Vec<Vec<String>>> {
        self.user_reactions_of(key, user, seqs).await
    }

    async fn threads(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<Vec<switchboard_store::ThreadEntry>> {
        self.threads_of(tenant, conversation, reader).await
    }

    async fn bans(&self, key: &ConversationKey) -> StoreResult<Vec<Ban>> {
        self.ban_rows(key.tenant.as_str(), key.conversation_id.as_str())
            .await
    }

    async fn profiles(
        &self,
        tenant: &TenantId,
        users: Vec<UserId>,
    ) -> StoreResult<Vec<Option<Profile>>> {
        self.profile_rows(tenant.as_str(), &users).await
    }

    async fn directory(
        &self,
        tenant: &TenantId,
        after: Option<ConversationId>,
        limit: usize,
    ) -> StoreResult<Vec<(ConversationId, Listing)>> {
        self.directory_rows(tenant, after.as_ref(), limit).await
    }

    async fn member_counts(&self, keys: Vec<ConversationKey>) -> StoreResult<Vec<u64>> {
        self.member_count_rows(keys).await
    }

    async fn invites(&self, key: &ConversationKey) -> StoreResult<Vec<Invite>> {
        let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
        self.invite_rows(t, c).await
    }

    async fn invite_by_code(&self, tenant: &TenantId, code: &str) -> StoreResult<Option<Invite>> {
        self.invite_row(tenant, code).await
    }

    async fn history_floors(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversations: Vec<ConversationId>,
    ) -> StoreResult<Vec<u64>> {
        self.floors(tenant, user, conversations).await
    }

    async fn blocks(&self, tenant: &TenantId, user: &UserId) -> StoreResult<Vec<Block>> {
        self.block_rows(tenant.as_str(), user.as_str()).await
    }

    async fn reports(
        &self,
        tenant: &TenantId,
        status: ReportStatus,
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<Report>> {
        self.report_rows(tenant.as_str(), status, before, limit)
            .await
    }

    async fn report(&self, tenant: &TenantId, id: MessageId) -> StoreResult<Option<Report>> {
        self.report_row(tenant.as_str(), id).await
    }

    async fn open_reports(&self) -> StoreResult<Vec<(TenantId, u64)>> {
        self.open_report_counts().await
    }

    async fn expiring(&self, cursor: Option<String>, budget: usize) -> StoreResult<PolicyScan> {
        self.policy_scan(cursor, page_size(budget)).await
    }

    async fn tenant_conversations(
        &self,
        tenant: &TenantId,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<ConversationScan> {
        self.tenant_conversation_scan(tenant, cursor, page_size(budget))
            .await
    }

    async fn due(
        &self,
        key: &ConversationKey,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<(Timestamp, u64)>> {
        self.due_rows(key, now, limit).await
    }

    async fn expired(
        &self,
        key: &ConversationKey,
        after_seq: u64,
        cutoff: Timestamp,
        limit: usize,
    ) -> StoreResult<ExpiredScan> {
        self.expired_rows(key, after_seq, cutoff, limit.max(1))
            .await
    }

    async fn joined(
        &self,
        tenant: &TenantId,
        user: &UserId,
        after: Option<ConversationId>,
        limit: usize,
    ) -> StoreResult<Vec<ConversationId>> {
        self.joined_ids(tenant.as_str(), user.as_str(), after.as_ref(), limit)
            .await
    }

    async fn naming(
        &self,
        key: &ConversationKey,
        user: &UserId,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<ExpiredScan> {
        self.naming_rows(key, user, after_seq, limit.max(1)).await
    }

    async fn pins(&self, key: &ConversationKey) -> StoreResult<Vec<switchboard_store::PinRow>> {
        self.pins_newest_first(key.tenant.as_str(), key.conversation_id.as_str())
            .await
    }
}
