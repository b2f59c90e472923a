//! The store as a NATS service.
//!
//! The embedded store lives in one process (fjall allows one per directory).
//! That process serves it on `sb.store` and every other process uses
//! [`RemoteStore`], a [`Store`] that forwards each call as a request. With
//! Scylla every process talks to the database directly and this service is
//! not needed. The integration tests run the store conformance suite
//! through it, so both paths are held to the same contract.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, MessageId, MessageVersion, TenantId,
    Timestamp, UserId,
};
use switchboard_store::{
    ArchiveScan, ArchivedBucket, BucketContents, BucketKey, ConversationDetail, ConversationKey,
    ConversationSummary, HistoryQuery, InboxCursor, InboxSweep, MarkChange, MessageKey, Mutation,
    SentKey, SequencerState, Store, StoreError, StoreResult,
};

use crate::subject::{STORE_QUEUE_GROUP, STORE_SERVICE};

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Request {
    Ping,
    Commit {
        mutations: Vec<Mutation>,
    },
    SequencerStates {
        keys: Vec<ConversationKey>,
    },
    FindSent {
        keys: Vec<SentKey>,
    },
    FindMessages {
        keys: Vec<MessageKey>,
    },
    Versions {
        tenant: TenantId,
        conversation: ConversationId,
        reader: UserId,
        message_id: MessageId,
    },
    Conversation {
        tenant: TenantId,
        conversation: ConversationId,
        reader: UserId,
    },
    Members {
        tenant: TenantId,
        conversation: ConversationId,
        reader: UserId,
    },
    MediaReadable {
        tenant: TenantId,
        blob_ref: String,
        reader: UserId,
    },
    MediaReferenced {
        tenant: TenantId,
        blob_ref: String,
    },
    Contacts {
        tenant: TenantId,
        user: UserId,
    },
    Memberships {
        tenant: TenantId,
        user: UserId,
    },
    ConversationsOf {
        tenant: TenantId,
        user: UserId,
    },
    History {
        tenant: TenantId,
        conversation: ConversationId,
        reader: UserId,
        query: HistoryQuery,
    },
    Replay {
        tenant: TenantId,
        conversation: ConversationId,
        reader: UserId,
        after_seq: u64,
        limit: usize,
    },
    Inbox {
        tenant: TenantId,
        user: UserId,
        device: DeviceId,
        #[serde(default)]
        after: Option<InboxCursor>,
        limit: usize,
    },
    AckDelivered {
        tenant: TenantId,
        user: UserId,
        device: DeviceId,
        conversation: ConversationId,
        seq: u64,
    },
    AckRead {
        tenant: TenantId,
        user: UserId,
        conversation: ConversationId,
        seq: u64,
    },
    RegisterDevice {
        tenant: TenantId,
        user: UserId,
        device: DeviceId,
    },
    ExpireInbox {
        before: Timestamp,
        cursor: Option<String>,
        budget: usize,
    },
    MessageSeqs {
        keys: Vec<MessageKey>,
    },
    ArchiveCandidates {
        before_day: u32,
        cursor: Option<String>,
        budget: usize,
    },
    BucketContents {
        bucket: BucketKey,
        after_seq: u64,
        limit: usize,
    },
    ArchivedBuckets {
        key: ConversationKey,
        after_seq: u64,
        before_seq: u64,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply<T> {
    Ok(T),
    Err(StoreError),
}

fn reply<T: Serialize>(result: StoreResult<T>) -> Vec<u8> {
    let encoded = match result {
        Ok(v) => serde_json::to_vec(&Reply::Ok(v)),
        Err(e) => serde_json::to_vec(&Reply::<()>::Err(e)),
    };
    encoded.unwrap_or_else(|e| {
        serde_json::to_vec(&Reply::<()>::Err(StoreError::Corrupt(format!(
            "encode reply: {e}"
        ))))
        .unwrap_or_default()
    })
}

async fn handle(store: &dyn Store, payload: &[u8]) -> Vec<u8> {
    let request: Request = match serde_json::from_slice(payload) {
        Ok(r) => r,
        Err(e) => {
            return reply::<()>(Err(StoreError::Corrupt(format!("bad store request: {e}"))));
        }
    };
    match request {
        Request::Ping => reply(store.ping().await),
        Request::Commit { mutations } => reply(store.commit(mutations).await),
        Request::SequencerStates { keys } => reply(store.sequencer_states(keys).await),
        Request::FindSent { keys } => reply(store.find_sent(keys).await),
        Request::FindMessages { keys } => reply(store.find_messages(keys).await),
        Request::Versions {
            tenant,
            conversation,
            reader,
            message_id,
        } => reply(
            store
                .versions(&tenant, &conversation, &reader, message_id)
                .await,
        ),
        Request::Conversation {
            tenant,
            conversation,
            reader,
        } => reply(store.conversation(&tenant, &conversation, &reader).await),
        Request::Members {
            tenant,
            conversation,
            reader,
        } => reply(store.members(&tenant, &conversation, &reader).await),
        Request::MediaReadable {
            tenant,
            blob_ref,
            reader,
        } => reply(store.media_readable(&tenant, &blob_ref, &reader).await),
        Request::MediaReferenced { tenant, blob_ref } => {
            reply(store.media_referenced(&tenant, &blob_ref).await)
        }
        Request::Contacts { tenant, user } => reply(store.contacts(&tenant, &user).await),
        Request::Memberships { tenant, user } => reply(store.memberships(&tenant, &user).await),
        Request::ConversationsOf { tenant, user } => {
            reply(store.conversations_of(&tenant, &user).await)
        }
        Request::History {
            tenant,
            conversation,
            reader,
            query,
        } => reply(store.history(&tenant, &conversation, &reader, query).await),
        Request::Replay {
            tenant,
            conversation,
            reader,
            after_seq,
            limit,
        } => reply(
            store
                .replay(&tenant, &conversation, &reader, after_seq, limit)
                .await,
        ),
        Request::Inbox {
            tenant,
            user,
            device,
            after,
            limit,
        } => reply(store.inbox(&tenant, &user, &device, after, limit).await),
        Request::AckDelivered {
            tenant,
            user,
            device,
            conversation,
            seq,
        } => reply(
            store
                .ack_delivered(&tenant, &user, &device, &conversation, seq)
                .await,
        ),
        Request::AckRead {
            tenant,
            user,
            conversation,
            seq,
        } => reply(store.ack_read(&tenant, &user, &conversation, seq).await),
        Request::RegisterDevice {
            tenant,
            user,
            device,
        } => reply(store.register_device(&tenant, &user, &device).await),
        Request::ExpireInbox {
            before,
            cursor,
            budget,
        } => reply(store.expire_inbox(before, cursor, budget).await),
        Request::MessageSeqs { keys } => reply(store.message_seqs(keys).await),
        Request::ArchiveCandidates {
            before_day,
            cursor,
            budget,
        } => reply(store.archive_candidates(before_day, cursor, budget).await),
        Request::BucketContents {
            bucket,
            after_seq,
            limit,
        } => reply(store.bucket_contents(&bucket, after_seq, limit).await),
        Request::ArchivedBuckets {
            key,
            after_seq,
            before_seq,
        } => reply(store.archived_buckets(&key, after_seq, before_seq).await),
    }
}

/// Serves `store` on `sb.store` until the subscription ends. Each request
/// runs in its own task, so a slow read never holds up a commit.
pub async fn serve(
    client: async_nats::Client,
    store: Arc<dyn Store>,
) -> Result<(), crate::BackboneError> {
    let mut requests = client
        .queue_subscribe(STORE_SERVICE, STORE_QUEUE_GROUP.to_owned())
        .await
        .map_err(|e| crate::BackboneError::Nats(format!("subscribe {STORE_SERVICE}: {e}")))?;
    tracing::info!(subject = STORE_SERVICE, "serving the store over NATS");
    while let Some(msg) = requests.next().await {
        let Some(reply_to) = msg.reply.clone() else {
            continue;
        };
        let (store, client) = (store.clone(), client.clone());
        tokio::spawn(async move {
            let mut body = handle(store.as_ref(), &msg.payload).await;
            // NATS refuses a message over the server's max_payload, and the
            // caller would only see a timeout: answer why, at once.
            let max = client.server_info().max_payload;
            if body.len() > max {
                body = reply::<()>(Err(StoreError::AnswerTooLarge {
                    bytes: body.len(),
                    max,
                }));
            }
            if let Err(e) = client.publish(reply_to, body.into()).await {
                tracing::warn!(error = %e, "store service reply failed");
            }
        });
    }
    Ok(())
}

/// Reads up to `limit` messages with `read(last, n)`, which reads `n`
/// continuing after `last` (the last message read so far; `None` at the
/// start). One NATS message holds at most the server's `max_payload`: when
/// an answer is too large the part is halved, and parts follow each other
/// until `limit` messages are read or a part comes back short.
async fn in_parts<F, Fut>(limit: usize, read: F) -> StoreResult<Vec<Message>>
where
    F: Fn(Option<&Message>, usize) -> Fut,
    Fut: std::future::Future<Output = StoreResult<Vec<Message>>>,
{
    let mut out: Vec<Message> = Vec::new();
    let mut part = limit;
    while out.len() < limit {
        let want = part.min(limit - out.len());
        match read(out.last(), want).await {
            Ok(messages) => {
                let short = messages.len() < want;
                out.extend(messages);
                if short {
                    break;
                }
            }
            Err(StoreError::AnswerTooLarge { .. }) if want > 1 => part = want / 2,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// A [`Store`] in another process, reached over NATS.
#[derive(Clone)]
pub struct RemoteStore {
    client: async_nats::Client,
    timeout: Duration,
}

impl RemoteStore {
    pub fn new(client: async_nats::Client, timeout: Duration) -> Self {
        Self { client, timeout }
    }

    async fn call<T: DeserializeOwned>(&self, request: Request) -> StoreResult<T> {
        let payload = serde_json::to_vec(&request)
            .map_err(|e| StoreError::Corrupt(format!("encode store request: {e}")))?;
        let req = async_nats::Request::new()
            .payload(payload.into())
            .timeout(Some(self.timeout));
        // A reply sent while this connection was down never arrives: give
        // up on a reconnect rather than wait out the timeout (callers
        // retry, and every request is safe to repeat).
        let epoch = crate::connection_epoch();
        let reconnected = async {
            while crate::connection_epoch() == epoch {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let msg = tokio::select! {
            msg = self.client.send_request(STORE_SERVICE, req) => {
                msg.map_err(|e| StoreError::Unavailable(format!("store service: {e}")))?
            }
            () = reconnected => {
                return Err(StoreError::Unavailable(
                    "store service: NATS reconnected while waiting for the answer; retry".into(),
                ));
            }
        };
        match serde_json::from_slice::<Reply<T>>(&msg.payload) {
            Ok(Reply::Ok(v)) => Ok(v),
            Ok(Reply::Err(e)) => Err(e),
            Err(e) => Err(StoreError::Corrupt(format!("bad store reply: {e}"))),
        }
    }
}

#[async_trait]
impl Store for RemoteStore {
    async fn ping(&self) -> StoreResult<()> {
        self.call(Request::Ping).await
    }

    async fn commit(&self, mutations: Vec<Mutation>) -> StoreResult<()> {
        self.call(Request::Commit { mutations }).await
    }

    async fn sequencer_states(
        &self,
        keys: Vec<ConversationKey>,
    ) -> StoreResult<Vec<Option<SequencerState>>> {
        self.call(Request::SequencerStates { keys }).await
    }

    async fn find_sent(&self, keys: Vec<SentKey>) -> StoreResult<Vec<Option<Message>>> {
        self.call(Request::FindSent { keys }).await
    }

    async fn find_messages(&self, keys: Vec<MessageKey>) -> StoreResult<Vec<Option<Message>>> {
        self.call(Request::FindMessages { keys }).await
    }

    async fn versions(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        message_id: MessageId,
    ) -> StoreResult<Vec<MessageVersion>> {
        self.call(Request::Versions {
            tenant: tenant.clone(),
            conversation: conversation.clone(),
            reader: reader.clone(),
            message_id,
        })
        .await
    }

    async fn conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<ConversationDetail> {
        self.call(Request::Conversation {
            tenant: tenant.clone(),
            conversation: conversation.clone(),
            reader: reader.clone(),
        })
        .await
    }

    async fn members(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<(ConversationKind, Vec<UserId>)> {
        self.call(Request::Members {
            tenant: tenant.clone(),
            conversation: conversation.clone(),
            reader: reader.clone(),
        })
        .await
    }

    async fn media_readable(
        &self,
        tenant: &TenantId,
        blob_ref: &str,
        reader: &UserId,
    ) -> StoreResult<bool> {
        self.call(Request::MediaReadable {
            tenant: tenant.clone(),
            blob_ref: blob_ref.to_owned(),
            reader: reader.clone(),
        })
        .await
    }

    async fn media_referenced(&self, tenant: &TenantId, blob_ref: &str) -> StoreResult<bool> {
        self.call(Request::MediaReferenced {
            tenant: tenant.clone(),
            blob_ref: blob_ref.to_owned(),
        })
        .await
    }

    async fn contacts(&self, tenant: &TenantId, user: &UserId) -> StoreResult<Vec<UserId>> {
        self.call(Request::Contacts {
            tenant: tenant.clone(),
            user: user.clone(),
        })
        .await
    }

    async fn memberships(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> StoreResult<Vec<(ConversationId, ConversationKind, usize)>> {
        self.call(Request::Memberships {
            tenant: tenant.clone(),
            user: user.clone(),
        })
        .await
    }

    async fn conversations_of(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> StoreResult<Vec<ConversationSummary>> {
        self.call(Request::ConversationsOf {
            tenant: tenant.clone(),
            user: user.clone(),
        })
        .await
    }

    async fn history(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        query: HistoryQuery,
    ) -> StoreResult<Vec<Message>> {
        // Newest first: each part continues below the oldest so far.
        in_parts(query.limit, |after: Option<&Message>, limit| {
            self.call(Request::History {
                tenant: tenant.clone(),
                conversation: conversation.clone(),
                reader: reader.clone(),
                query: HistoryQuery {
                    before_seq: after.map(|m| m.seq).or(query.before_seq),
                    limit,
                    ..query
                },
            })
        })
        .await
    }

    async fn replay(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        in_parts(limit, |after: Option<&Message>, limit| {
            self.call(Request::Replay {
                tenant: tenant.clone(),
                conversation: conversation.clone(),
                reader: reader.clone(),
                after_seq: after.map_or(after_seq, |m| m.seq),
                limit,
            })
        })
        .await
    }

    async fn inbox(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        after: Option<InboxCursor>,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        in_parts(limit, |last: Option<&Message>, limit| {
            self.call(Request::Inbox {
                tenant: tenant.clone(),
                user: user.clone(),
                device: device.clone(),
                after: last.map(InboxCursor::of).or_else(|| after.clone()),
                limit,
            })
        })
        .await
    }

    async fn ack_delivered(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        conversation: &ConversationId,
        seq: u64,
    ) -> StoreResult<MarkChange> {
        self.call(Request::AckDelivered {
            tenant: tenant.clone(),
            user: user.clone(),
            device: device.clone(),
            conversation: conversation.clone(),
            seq,
        })
        .await
    }

    async fn ack_read(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversation: &ConversationId,
        seq: u64,
    ) -> StoreResult<MarkChange> {
        self.call(Request::AckRead {
            tenant: tenant.clone(),
            user: user.clone(),
            conversation: conversation.clone(),
            seq,
        })
        .await
    }

    async fn expire_inbox(
        &self,
        before: Timestamp,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<InboxSweep> {
        self.call(Request::ExpireInbox {
            before,
            cursor,
            budget,
        })
        .await
    }

    async fn message_seqs(&self, keys: Vec<MessageKey>) -> StoreResult<Vec<Option<u64>>> {
        self.call(Request::MessageSeqs { keys }).await
    }

    async fn archive_candidates(
        &self,
        before_day: u32,
        cursor: Option<String>,
        budget: usize,
    ) -> StoreResult<ArchiveScan> {
        self.call(Request::ArchiveCandidates {
            before_day,
            cursor,
            budget,
        })
        .await
    }

    /// A part too large for one NATS message comes back as
    /// `AnswerTooLarge`; the archiver reads smaller parts then.
    async fn bucket_contents(
        &self,
        bucket: &BucketKey,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<BucketContents> {
        self.call(Request::BucketContents {
            bucket: bucket.clone(),
            after_seq,
            limit,
        })
        .await
    }

    async fn archived_buckets(
        &self,
        key: &ConversationKey,
        after_seq: u64,
        before_seq: u64,
    ) -> StoreResult<Vec<ArchivedBucket>> {
        self.call(Request::ArchivedBuckets {
            key: key.clone(),
            after_seq,
            before_seq,
        })
        .await
    }

    async fn register_device(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
    ) -> StoreResult<()> {
        self.call(Request::RegisterDevice {
            tenant: tenant.clone(),
            user: user.clone(),
            device: device.clone(),
        })
        .await
    }
}
