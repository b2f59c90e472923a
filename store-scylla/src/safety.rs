//! Reads of the v1.2 safety rows on Scylla: a conversation's policy and
//! bans, a user's blocks.

use std::collections::{BTreeMap, BTreeSet};

use futures::TryStreamExt;
use switchboard_protocol::Message;
use switchboard_protocol::profile::Profile;
use switchboard_protocol::reports::{Report, ReportStatus};
use switchboard_protocol::safety::{Ban, Block, ConversationPolicy};
use switchboard_protocol::{ConversationKind, MessageId, Role, TenantId, Timestamp, UserId};
use switchboard_store::{
    ConversationKey, ConversationScan, ConversationSettings, ExpiredScan, PolicyScan, StoreResult,
    day_bucket,
};

use crate::cursor::{cursor_decode, cursor_encode};

use crate::client::ScyllaStore;
use crate::rows::{
    conversation_id, day_db, decode, id_db, limit_db, seq_db, seq_of, tenant_id, user_id,
};

impl ScyllaStore {
    /// The conversation's settings: its policy and custom fields.
    pub(crate) async fn settings_of(&self, t: &str, c: &str) -> StoreResult<ConversationSettings> {
        match self.st.policy.one(&self.session, (t, c)).await? {
            Some((settings,)) => decode(&settings),
            None => Ok(ConversationSettings::default()),
        }
    }

    /// Newest first.
    pub(crate) async fn ban_rows(&self, t: &str, c: &str) -> StoreResult<Vec<Ban>> {
        let mut bans = self
            .st
            .bans
            .all(&self.session, (t, c))
            .await?
            .into_iter()
            .map(|(ban,)| decode::<Ban>(&ban))
            .collect::<StoreResult<Vec<_>>>()?;
        bans.sort_by(|a, b| {
            b.banned_at
                .cmp(&a.banned_at)
                .then(a.user_id.cmp(&b.user_id))
        });
        Ok(bans)
    }

    /// Newest first.
    pub(crate) async fn block_rows(&self, t: &str, u: &str) -> StoreResult<Vec<Block>> {
        let mut blocks = self
            .st
            .blocks
            .all(&self.session, (t, u))
            .await?
            .into_iter()
            .map(|(blocked, at)| {
                Ok(Block {
                    user_id: user_id(blocked)?,
                    blocked_at: Timestamp::from_unix_ms(at),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        blocks.sort_by(|a, b| {
            b.blocked_at
                .cmp(&a.blocked_at)
                .then(a.user_id.cmp(&b.user_id))
        });
        Ok(blocks)
    }

    /// A tenant's reports with `status`, newest first, below `before`: the
    /// open ones through their index, the resolved ones skipping the open.
    pub(crate) async fn report_rows(
        &self,
        t: &str,
        status: ReportStatus,
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<Report>> {
        let mut below = before.map_or(i64::MAX, id_db);
        let mut out = Vec::new();
        let page = limit_db(limit.clamp(1, 200));
        loop {
            let ids: Vec<i64> = match status {
                ReportStatus::Open => self
                    .st
                    .open_reports_before
                    .all(&self.session, (t, below, page))
                    .await?
                    .into_iter()
                    .map(|(id,)| id)
                    .collect(),
                ReportStatus::Resolved => {
                    let rows = self
                        .st
                        .reports_before
                        .all(&self.session, (t, below, page))
                        .await?;
                    let mut ids = Vec::with_capacity(rows.len());
                    for (body,) in rows {
                        let report: Report = decode(&body)?;
                        ids.push(id_db(report.report_id));
                        if report.status == status && out.len() < limit {
                            out.push(report);
                        }
                    }
                    ids
                }
            };
            if status == ReportStatus::Open {
                for id in &ids {
                    if out.len() == limit {
                        break;
                    }
                    if let Some((body,)) = self.st.report.one(&self.session, (t, *id)).await? {
                        out.push(decode(&body)?);
                    }
                }
            }
            match ids.last() {
                Some(last) if out.len() < limit && ids.len() == page as usize => below = *last,
                _ => return Ok(out),
            }
        }
    }

    pub(crate) async fn report_row(&self, t: &str, id: MessageId) -> StoreResult<Option<Report>> {
        match self.st.report.one(&self.session, (t, id_db(id))).await? {
            Some((body,)) => decode(&body).map(Some),
            None => Ok(None),
        }
    }

    /// Open reports per tenant: a scan of the open index, which holds only
    /// reports waiting for an admin.
    pub(crate) async fn open_report_counts(&self) -> StoreResult<Vec<(TenantId, u64)>> {
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let mut rows = std::pin::pin!(self.st.scan_open_reports.stream(&self.session, ()).await?);
        while let Some((tenant, _)) = rows.try_next().await? {
            *counts.entry(tenant).or_default() += 1;
        }
        counts
            .into_iter()
            .map(|(t, n)| Ok((tenant_id(t)?, n)))
            .collect()
    }

    /// One page of the conversations with a lifetime.
    pub(crate) async fn policy_scan(
        &self,
        cursor: Option<String>,
        page: i32,
    ) -> StoreResult<PolicyScan> {
        let from = cursor_decode(cursor)?;
        let (rows, next) = self
            .st
            .scan_policies
            .page(&self.session, (), from, page)
            .await?;
        let mut conversations = Vec::new();
        for (t, c, policy) in rows {
            let policy: ConversationPolicy = decode(&policy)?;
            if policy.lifetime_ms().is_some() {
                let key = ConversationKey::new(tenant_id(t)?, conversation_id(c)?);
                conversations.push((key, policy));
            }
        }
        Ok(PolicyScan {
            conversations,
            next: cursor_encode(next),
        })
    }

    /// One page of a tenant's conversations: a page of the whole table
    /// (its partitions are keyed by tenant and conversation, so no query
    /// reads one tenant's alone), the other tenants' rows passed over.
    pub(crate) async fn tenant_conversation_scan(
        &self,
        tenant: &TenantId,
        cursor: Option<String>,
        page: i32,
    ) -> StoreResult<ConversationScan> {
        let from = cursor_decode(cursor)?;
        let (rows, next) = self
            .st
            .scan_conversations
            .page(&self.session, (), from, page)
            .await?;
        let conversations = rows
            .into_iter()
            .filter(|(t, _)| t == tenant.as_str())
            .map(|(_, c)| conversation_id(c))
            .collect::<StoreResult<_>>()?;
        Ok(ConversationScan {
            conversations,
            next: cursor_encode(next),
        })
    }

    /// Messages whose `expires_at` is at or before `now`, by it.
    pub(crate) async fn due_rows(
        &self,
        key: &ConversationKey,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<(Timestamp, u64)>> {
        let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
        self.st
            .due
            .all(&self.session, (t, c, now.unix_ms(), limit_db(limit)))
            .await?
            .into_iter()
            .map(|(at, seq)| Ok((Timestamp::from_unix_ms(at), seq_of(seq)?)))
            .collect()
    }

    /// Live messages after `after_seq` created at or before `cutoff`,
    /// bucket by bucket from the oldest that may hold one; archived
    /// buckets are passed over.
    pub(crate) async fn expired_rows(
        &self,
        key: &ConversationKey,
        after_seq: u64,
        cutoff: Timestamp,
        limit: usize,
    ) -> StoreResult<ExpiredScan> {
        let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
        let mut buckets = self.bucket_rows(t, c).await?;
        buckets.reverse();
        let mut scan = ExpiredScan {
            last_seen: after_seq,
            ..Default::default()
        };
        let mut seen = 0;
        for (i, bucket) in buckets.iter().enumerate() {
            let wholly_seen = buckets
                .get(i + 1)
                .is_some_and(|next| next.first <= scan.last_seen.saturating_add(1));
            // An archived day is read too: its live rows (the newest
            // message, messages restored to be changed) win over the
            // archive, and the archive object is rewritten apart.
            if wholly_seen {
                continue;
            }
            if bucket.day > day_bucket(cutoff) {
                break;
            }
            let rows = self
                .st
                .oldest_first
                .all(
                    &self.session,
                    (
                        t,
                        c,
                        day_db(bucket.day),
                        seq_db(scan.last_seen),
                        i64::MAX,
                        limit_db(limit - seen),
                    ),
                )
                .await?;
            for (body,) in rows {
                let m: Message = decode(&body)?;
                seen += 1;
                if m.created_at > cutoff {
                    scan.done = true;
                    return Ok(scan);
                }
                scan.last_seen = m.seq;
                if m.deleted_at.is_none() {
                    scan.seqs.push(m.seq);
                }
                if seen == limit {
                    return Ok(scan);
                }
            }
        }
        scan.done = true;
        Ok(scan)
    }

    /// In a direct conversation, the members who block the other.
    pub(crate) async fn blocked_by(
        &self,
        t: &str,
        kind: ConversationKind,
        members: &BTreeMap<UserId, Role>,
    ) -> StoreResult<BTreeSet<UserId>> {
        let mut out = BTreeSet::new();
        if kind != ConversationKind::Direct {
            return Ok(out);
        }
        for (user, other) in members.keys().zip(members.keys().rev()) {
            if user != other && self.blocks_user(t, user.as_str(), other.as_str()).await? {
                out.insert(user.clone());
            }
        }
        Ok(out)
    }

    /// Each user's profile, in the order asked (v1.3): one partition
    /// each, read at once.
    pub(crate) async fn profile_rows(
        &self,
        t: &str,
        users: &[UserId],
    ) -> StoreResult<Vec<Option<Profile>>> {
        futures::future::try_join_all(users.iter().map(|u| async move {
            self.st
                .profile
                .one(&self.session, (t, u.as_str()))
                .await?
                .map(|(json,)| decode(&json))
                .transpose()
        }))
        .await
    }

    pub(crate) async fn blocks_user(&self, t: &str, u: &str, target: &str) -> StoreResult<bool> {
        Ok(self
            .st
            .block
            .one(&self.session, (t, u, target))
            .await?
            .is_some())
    }
}
