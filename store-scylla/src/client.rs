//! The Scylla store's handle, [`ScyllaStore`]: connecting (session,
//! schema, prepared statements) and the row reads that both the
//! [`Store`](switchboard_store::Store) methods (`store.rs`) and a commit's view (`commit.rs`) build
//! on. Imports neither of them.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt, TryStreamExt};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::load_balancing::DefaultPolicy;
use scylla::policies::speculative_execution::{
    SimpleSpeculativeExecutionPolicy, SpeculativeExecutionPolicy,
};
use switchboard_protocol::{Message, MessageId, MessageVersion};
use switchboard_store::{
    ArchiveScan, ArchivedBucket, BucketContents, BucketKey, ConversationKey, StoreError,
    StoreResult,
};

use crate::config::ScyllaConfig;
use crate::cql::{Clock, unavailable};
use crate::cursor::{cursor_decode, cursor_encode, page_size};
use crate::fence::FenceStatements;
use crate::rows::{
    Bucket, Conv, bucket_last, conversation_id, day_db, decode, id_db, limit_db, marks, seq_db,
    seq_of, tenant_id,
};
use crate::schema;
use crate::statements::Statements;

/// Requests one read fans out to at once (the conversations of a user,
/// the messages of an inbox page, the keys of a lookup).
const FAN_OUT: usize = 32;

/// The Scylla [`Store`](switchboard_store::Store).
pub struct ScyllaStore {
    pub(crate) session: Arc<Session>,
    pub(crate) st: Statements,
    pub(crate) fence: FenceStatements,
    pub(crate) clock: Clock,
    /// The inbox lifetime, seconds (`USING TTL`).
    pub(crate) inbox_ttl: i32,
    pub(crate) inbox_sweep: bool,
    pub(crate) max_batch_bytes: usize,
    keyspace: String,
}

impl ScyllaStore {
    /// Connects, creates or migrates the schema (when `create_schema`) and
    /// prepares every statement.
    pub async fn connect(config: &ScyllaConfig) -> StoreResult<Self> {
        config.validate()?;
        // Token-aware: a request goes straight to a replica of its
        // partition, and (the driver is shard-aware) to the shard that owns
        // it on that node. With a local datacenter, replicas there come
        // first and requests never cross to another one: LOCAL_*
        // consistency only counts local replicas anyway.
        let mut policy = DefaultPolicy::builder().token_aware(true);
        if let Some(dc) = &config.local_dc {
            policy = policy
                .prefer_datacenter(dc.clone())
                .permit_dc_failover(false);
        }
        let speculative = config.speculative_after().map(|after| {
            Arc::new(SimpleSpeculativeExecutionPolicy {
                max_retry_count: 1,
                retry_interval: after,
            }) as Arc<dyn SpeculativeExecutionPolicy>
        });
        let profile = ExecutionProfile::builder()
            .consistency(config.consistency_level()?)
            .request_timeout(Some(config.request_timeout()))
            .load_balancing_policy(policy.build())
            .speculative_execution_policy(speculative)
            .build();
        let mut builder = SessionBuilder::new()
            .known_nodes(&config.nodes)
            .default_execution_profile_handle(profile.into_handle());
        if let (Some(user), Some(password)) = (&config.username, &config.password) {
            builder = builder.user(user, password);
        }
        let session = Arc::new(builder.build().await.map_err(unavailable)?);
        crate::metrics::watch_nodes(&session);
        crate::server::check_batch_threshold(&session, config.max_batch_bytes).await;
        if config.create_schema {
            schema::create(&session, config).await?;
        } else {
            schema::use_keyspace(&session, config).await?;
        }
        let clock = Clock::new();
        schema::migrate(&session, &clock, config.create_schema).await?;
        let st = Statements::prepare(&session).await?;
        let fence = FenceStatements::prepare(&session, config.local_dc.is_some()).await?;
        tracing::info!(
            keyspace = %config.keyspace,
            nodes = ?config.nodes,
            local_dc = ?config.local_dc,
            consistency = %config.consistency,
            "scylla store connected"
        );
        Ok(Self {
            session,
            st,
            fence,
            clock,
            inbox_ttl: i32::try_from(config.inbox_ttl_secs).unwrap_or(i32::MAX),
            inbox_sweep: config.inbox_sweep,
            max_batch_bytes: config.max_batch_bytes.max(1024),
            keyspace: config.keyspace.clone(),
        })
    }

    /// The driver session (for operations outside the store, such as a
    /// test dropping its keyspace).
    pub fn session(&self) -> &Session {
        &self.session
    }

    pub fn keyspace(&self) -> &str {
        &self.keyspace
    }

    /// `f` of every item, at most [`FAN_OUT`] at once, in order.
    pub(crate) async fn each<I, F, Fut, T>(&self, items: I, f: F) -> StoreResult<Vec<T>>
    where
        I: IntoIterator,
        F: FnMut(I::Item) -> Fut,
        Fut: Future<Output = StoreResult<T>>,
    {
        futures::stream::iter(items)
            .map(f)
            .buffered(FAN_OUT)
            .try_collect()
            .await
    }

    // --- reads shared with commits

    pub(crate) async fn conv_row(&self, t: &str, c: &str) -> StoreResult<Option<Conv>> {
        self.st
            .conversation
            .one(&self.session, (t, c))
            .await?
            .map(Conv::from_row)
            .transpose()
    }

    /// Member ids in id order. A conversation's members are one partition
    /// the driver pages through.
    pub(crate) async fn member_ids(&self, t: &str, c: &str) -> StoreResult<Vec<String>> {
        self.st
            .members
            .stream(&self.session, (t, c))
            .await?
            .map_ok(|(u, _)| u)
            .try_collect()
            .await
    }

    pub(crate) async fn device_ids(&self, t: &str, u: &str) -> StoreResult<Vec<String>> {
        Ok(self
            .st
            .devices
            .all(&self.session, (t, u))
            .await?
            .into_iter()
            .map(|(d,)| d)
            .collect())
    }

    /// The conversation's buckets, newest day first (the table keeps them
    /// oldest first). One small partition: a row per day with messages.
    pub(crate) async fn bucket_rows(&self, t: &str, c: &str) -> StoreResult<Vec<Bucket>> {
        self.st
            .buckets
            .all(&self.session, (t, c))
            .await?
            .into_iter()
            .rev()
            .map(Bucket::from_row)
            .collect()
    }

    pub(crate) async fn message_at(
        &self,
        t: &str,
        c: &str,
        day: u32,
        seq: u64,
    ) -> StoreResult<Option<Message>> {
        self.st
            .message
            .one(&self.session, (t, c, day_db(day), seq_db(seq)))
            .await?
            .map(|(body,)| decode(&body))
            .transpose()
    }

    /// The message a `seq`/`day` pair from an index row names.
    pub(crate) async fn message_from_index(
        &self,
        t: &str,
        c: &str,
        found: Option<(i64, i32)>,
    ) -> StoreResult<Option<Message>> {
        match found {
            Some((seq, day)) => {
                self.message_at(t, c, crate::rows::day_of(day)?, seq_of(seq)?)
                    .await
            }
            None => Ok(None),
        }
    }

    pub(crate) async fn versions_at(
        &self,
        t: &str,
        c: &str,
        day: u32,
        seq: u64,
    ) -> StoreResult<Vec<MessageVersion>> {
        self.st
            .versions
            .all(&self.session, (t, c, day_db(day), seq_db(seq)))
            .await?
            .into_iter()
            .map(|(body,)| decode(&body))
            .collect()
    }

    pub(crate) async fn sent_row(
        &self,
        t: &str,
        c: &str,
        sender: &str,
        client_msg_id: &str,
    ) -> StoreResult<Option<(i64, i32)>> {
        self.st
            .sent
            .one(&self.session, (t, c, sender, client_msg_id))
            .await
    }

    pub(crate) async fn bucket_messages(
        &self,
        t: &str,
        c: &str,
        day: u32,
    ) -> StoreResult<Vec<Message>> {
        let rows = self
            .st
            .bucket_messages
            .stream(&self.session, (t, c, day_db(day)))
            .await?;
        collect_messages(rows).await
    }

    /// The reader's membership, telling a missing conversation
    /// (`NotFound`) from a foreign one (`NotAMember`); conversation ids are
    /// not secret within a tenant. Returns when the reader joined.
    pub(crate) async fn check_membership(
        &self,
        t: &str,
        c: &str,
        reader: &str,
    ) -> StoreResult<i64> {
        if let Some((joined,)) = self.st.member.one(&self.session, (t, c, reader)).await? {
            return Ok(joined);
        }
        if self.conv_row(t, c).await?.is_some() {
            Err(StoreError::NotAMember)
        } else {
            Err(StoreError::NotFound)
        }
    }

    pub(crate) async fn my_marks(&self, t: &str, c: &str, u: &str) -> StoreResult<(u64, u64)> {
        marks(self.st.marks_of.all(&self.session, (t, c, u)).await?)
    }

    pub(crate) async fn conversation_ids_of(&self, t: &str, u: &str) -> StoreResult<Vec<String>> {
        self.st
            .user_conversations
            .stream(&self.session, (t, u))
            .await?
            .map_ok(|(c,)| c)
            .try_collect()
            .await
    }

    pub(crate) async fn seq_and_day(
        &self,
        t: &str,
        c: &str,
        id: MessageId,
    ) -> StoreResult<Option<(i64, i32)>> {
        self.st.index.one(&self.session, (t, c, id_db(id))).await
    }

    /// Messages of the rows a stream yields, decoded, at most `limit`.
    pub(crate) async fn bodies(
        rows: impl Stream<Item = StoreResult<(String,)>>,
        limit: usize,
        out: &mut Vec<Message>,
    ) -> StoreResult<()> {
        let mut rows = std::pin::pin!(rows);
        while out.len() < limit {
            match rows.next().await {
                Some(row) => out.push(decode(&row?.0)?),
                None => break,
            }
        }
        Ok(())
    }

    /// Every row of one bucket that is not archived, from `after_seq` on,
    /// at most `limit` messages, with their versions.
    pub async fn bucket_part(
        &self,
        bucket: &BucketKey,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<BucketContents> {
        let (t, c) = (bucket.tenant.as_str(), bucket.conversation_id.as_str());
        let (buckets, conv) = futures::try_join!(self.bucket_rows(t, c), self.conv_row(t, c))?;
        let index = buckets
            .iter()
            .position(|b| b.day == bucket.day)
            .ok_or(StoreError::NotFound)?;
        if buckets[index].archived.is_some() {
            return Err(StoreError::Conflict("the bucket is archived".into()));
        }
        let first = buckets[index].first;
        let last = bucket_last(&buckets, index, conv.map_or(0, |c| c.last_seq));
        let from = first.max(after_seq.saturating_add(1));
        let mut messages = Vec::new();
        let mut versions = Vec::new();
        if from <= last && limit > 0 {
            let day = day_db(bucket.day);
            let rows = self
                .st
                .oldest_first
                .stream(
                    &self.session,
                    (t, c, day, seq_db(from - 1), seq_db(last), limit_db(limit)),
                )
                .await?;
            Self::bodies(rows, limit, &mut messages).await?;
            if let Some(newest) = messages.last().map(|m| m.seq) {
                let mut by_seq: BTreeMap<u64, Vec<MessageVersion>> = BTreeMap::new();
                let mut rows = self
                    .st
                    .versions_between
                    .stream(&self.session, (t, c, day, seq_db(from - 1), seq_db(newest)))
                    .await?;
                while let Some(row) = rows.next().await {
                    let (seq, body) = row?;
                    by_seq.entry(seq_of(seq)?).or_default().push(decode(&body)?);
                }
                versions = by_seq.into_iter().collect();
            }
        }
        Ok(BucketContents {
            bucket: bucket.clone(),
            first_seq: first,
            last_seq: last,
            messages,
            versions,
        })
    }

    /// A step of the archiver's scan: buckets older than `before_day` not
    /// archived yet.
    pub(crate) async fn unarchived_before(
        &self,
        before_day: u32,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<ArchiveScan> {
        let from = cursor_decode(cursor)?;
        let (rows, next) = self
            .st
            .scan_buckets
            .page(&self.session, (), from, page_size(budget))
            .await?;
        let mut buckets = Vec::new();
        for (t, c, day, object) in rows {
            let day = crate::rows::day_of(day)?;
            if day >= before_day || object.is_some() {
                continue;
            }
            buckets.push(BucketKey {
                tenant: tenant_id(t)?,
                conversation_id: conversation_id(c)?,
                day,
            });
        }
        Ok(ArchiveScan {
            buckets,
            next: cursor_encode(next),
        })
    }

    /// The conversation's archived buckets that hold a seq in
    /// `after_seq < seq < before_seq`, newest first, as the buckets come.
    pub(crate) async fn archived_between(
        &self,
        key: &ConversationKey,
        after_seq: u64,
        before_seq: u64,
    ) -> StoreResult<Vec<ArchivedBucket>> {
        let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
        let buckets = self.bucket_rows(t, c).await?;
        let unindexed: Vec<u32> = if buckets.iter().any(|b| b.archived.is_some()) {
            let days = self.st.unindexed_buckets.all(&self.session, (t, c)).await?;
            days.into_iter()
                .map(|(d,)| crate::rows::day_of(d))
                .collect::<StoreResult<_>>()?
        } else {
            Vec::new()
        };
        Ok(buckets
            .into_iter()
            .filter_map(|b| {
                let (last, object) = b.archived?;
                (b.first < before_seq && last > after_seq).then_some(ArchivedBucket {
                    day: b.day,
                    first_seq: b.first,
                    last_seq: last,
                    object,
                    senders_indexed: !unindexed.contains(&b.day),
                })
            })
            .collect())
    }
}

/// Reads every message row of one bucket (for an archive mark).
async fn collect_messages(
    rows: impl futures::Stream<Item = StoreResult<(String,)>>,
) -> StoreResult<Vec<Message>> {
    let mut out = Vec::new();
    let mut rows = std::pin::pin!(rows);
    while let Some(row) = rows.next().await {
        out.push(decode(&row?.0)?);
    }
    Ok(out)
}
