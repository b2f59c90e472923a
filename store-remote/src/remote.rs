//! The calling side: [`RemoteStore`], its `Store` methods made from the
//! list of calls, its reads passed on as they are, and the reads it asks
//! for in parts.

use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use switchboard_nats::{connection_epoch, reconnected_since};
use switchboard_protocol::{
    ConversationId, DeviceId, Message, MessageId, TenantId, Timestamp, UserId,
};
use switchboard_store::{
    Answer, ConversationSummary, HistoryQuery, InboxCursor, InboxSweep, ListCursor, ListQuery,
    MarkChange, Mutation, Read, Store, StoreError, StoreResult,
};

use crate::calls::store_calls;
use crate::wire::{Access, Call, Request, decode_answer, decode_reply};

/// A [`Store`](switchboard_store::Store) in another process, reached over
/// NATS. Its `Store` methods are made from the list in `calls.rs`, but
/// `read`, which forwards a [`Read`] (some in parts).
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
        decode_reply(&self.ask(request.access(), &request).await?)
    }

    /// Sends `request` to the endpoint of `access`; the reply's payload.
    async fn ask(
        &self,
        access: Access,
        request: &impl serde::Serialize,
    ) -> StoreResult<bytes::Bytes> {
        let subject = access.subject();
        let payload = serde_json::to_vec(request)
            .map_err(|e| StoreError::Corrupt(format!("encode store request: {e}")))?;
        let req = async_nats::Request::new()
            .payload(payload.into())
            .timeout(Some(self.timeout));
        // A reply sent while this connection was down never arrives: give
        // up on a reconnect rather than wait out the timeout (callers
        // retry, and every request is safe to repeat).
        let epoch = connection_epoch();
        let msg = tokio::select! {
            msg = self.client.send_request(subject, req) => {
                msg.map_err(|e| StoreError::Unavailable(format!("store service: {e}")))?
            }
            () = reconnected_since(epoch) => {
                return Err(StoreError::Unavailable(
                    "store service: NATS reconnected while waiting for the answer; retry".into(),
                ));
            }
        };
        Ok(msg.payload)
    }

    /// Newest first: each part continues below the oldest so far.
    pub(crate) async fn history_in_parts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        query: HistoryQuery,
    ) -> StoreResult<Vec<Message>> {
        in_parts(query.limit, |after: Option<&Message>, limit| {
            self.call(Request::Read(Read::History {
                tenant: tenant.clone(),
                conversation: conversation.clone(),
                reader: reader.clone(),
                query: HistoryQuery {
                    before_seq: after.map(|m| m.seq).or(query.before_seq),
                    limit,
                    ..query
                },
            }))
        })
        .await
    }

    pub(crate) async fn replay_in_parts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        in_parts(limit, |after: Option<&Message>, limit| {
            self.call(Request::Read(Read::Replay {
                tenant: tenant.clone(),
                conversation: conversation.clone(),
                reader: reader.clone(),
                after_seq: after.map_or(after_seq, |m| m.seq),
                limit,
            }))
        })
        .await
    }

    /// List order: each part continues after the last entry so far. An
    /// entry holds one preview (a message within the content limits) and
    /// its member ids; one entry alone too large for a NATS message (a
    /// channel of tens of thousands of members) still fails the page.
    pub(crate) async fn conversation_page_in_parts(
        &self,
        tenant: &TenantId,
        user: &UserId,
        query: ListQuery,
    ) -> StoreResult<Vec<ConversationSummary>> {
        in_parts(query.limit, |last: Option<&ConversationSummary>, limit| {
            self.call(Request::Read(Read::ConversationPage {
                tenant: tenant.clone(),
                user: user.clone(),
                query: ListQuery {
                    after: last
                        .map(|s| ListCursor::of(&s.record))
                        .or_else(|| query.after.clone()),
                    limit,
                },
            }))
        })
        .await
    }

    pub(crate) async fn inbox_in_parts(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        after: Option<InboxCursor>,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        in_parts(limit, |last: Option<&Message>, limit| {
            self.call(Request::Read(Read::Inbox {
                tenant: tenant.clone(),
                user: user.clone(),
                device: device.clone(),
                after: last.map(InboxCursor::of).or_else(|| after.clone()),
                limit,
            }))
        })
        .await
    }
}

macro_rules! remote_store {
    (
        read { $( $read:ident ( $($rarg:ident : [$($rty:tt)+]),* ) -> $rret:ty; )* }
        marks { $( $mark:ident ( $($marg:ident : [$($mty:tt)+]),* ) -> $mret:ty; )* }
        write { $( $write:ident ( $($warg:ident : [$($wty:tt)+]),* ) -> $wret:ty; )* }
    ) => {
        #[async_trait]
        impl Store for RemoteStore {
            $(
                async fn $read(&self, $($rarg: $($rty)+),*) -> StoreResult<$rret> {
                    self.call(Request::Call(Call::$read { $($rarg: ::switchboard_store::arg_owned!($rarg; $($rty)+)),* })).await
                }
            )*
            $(
                async fn $mark(&self, $($marg: $($mty)+),*) -> StoreResult<$mret> {
                    self.call(Request::Call(Call::$mark { $($marg: ::switchboard_store::arg_owned!($marg; $($mty)+)),* })).await
                }
            )*
            $(
                async fn $write(&self, $($warg: $($wty)+),*) -> StoreResult<$wret> {
                    self.call(Request::Call(Call::$write { $($warg: ::switchboard_store::arg_owned!($warg; $($wty)+)),* })).await
                }
            )*

            /// A read whose answer may not fit one NATS message is asked
            /// in parts; every other read is asked as it is.
            async fn read(&self, read: Read) -> StoreResult<Answer> {
                match read {
                    Read::History { tenant, conversation, reader, query } => self
                        .history_in_parts(&tenant, &conversation, &reader, query)
                        .await
                        .map(Answer::History),
                    Read::Replay { tenant, conversation, reader, after_seq, limit } => self
                        .replay_in_parts(&tenant, &conversation, &reader, after_seq, limit)
                        .await
                        .map(Answer::Replay),
                    Read::ConversationPage { tenant, user, query } => self
                        .conversation_page_in_parts(&tenant, &user, query)
                        .await
                        .map(Answer::ConversationPage),
                    Read::Inbox { tenant, user, device, after, limit } => self
                        .inbox_in_parts(&tenant, &user, &device, after, limit)
                        .await
                        .map(Answer::Inbox),
                    // A part too large for one NATS message comes back as
                    // `AnswerTooLarge`: the archiver reads smaller parts
                    // of a bucket then.
                    read => decode_answer(&read, &self.ask(Access::Read, &read).await?),
                }
            }
        }
    };
}

store_calls!(remote_store);

/// Reads up to `limit` items with `read(last, n)`, which reads `n`
/// continuing after `last` (the last item read so far; `None` at the
/// start). One NATS message holds at most the server's `max_payload`: when
/// an answer is too large the part is halved, and parts follow each other
/// until `limit` items are read or a part comes back short.
async fn in_parts<T, F, Fut>(limit: usize, read: F) -> StoreResult<Vec<T>>
where
    F: Fn(Option<&T>, usize) -> Fut,
    Fut: std::future::Future<Output = StoreResult<Vec<T>>>,
{
    let mut out: Vec<T> = Vec::new();
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
