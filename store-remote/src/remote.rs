//! The calling side: [`RemoteStore`], its `Store` methods made from the
//! list of calls, and the reads it asks for in parts.

use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use switchboard_nats::{connection_epoch, reconnected_since};
use switchboard_protocol::reports::{Report, ReportStatus};
use switchboard_protocol::safety::{Ban, Block};
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, MessageId, MessageVersion, TenantId,
    Timestamp, UserId,
};
use switchboard_store::{
    ArchiveScan, ArchivedBucket, BucketContents, BucketKey, Consent, ConsentQuery,
    ConversationDetail, ConversationKey, ConversationSummary, ExpiredScan, HistoryQuery,
    InboxCursor, InboxSweep, ListCursor, ListQuery, MarkChange, MessageKey, Mutation, PinRow,
    PolicyScan, SentBy, SentKey, SequencerState, Store, StoreError, StoreResult, ThreadEntry,
};

use crate::calls::store_calls;
use crate::wire::{Request, decode_reply};

/// A [`Store`](switchboard_store::Store) in another process, reached over
/// NATS. Its `Store` methods are made from the list in `calls.rs`.
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
        let subject = request.access().subject();
        let payload = serde_json::to_vec(&request)
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
        decode_reply(&msg.payload)
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
            self.call(Request::history {
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

    pub(crate) async fn replay_in_parts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        in_parts(limit, |after: Option<&Message>, limit| {
            self.call(Request::replay {
                tenant: tenant.clone(),
                conversation: conversation.clone(),
                reader: reader.clone(),
                after_seq: after.map_or(after_seq, |m| m.seq),
                limit,
            })
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
            self.call(Request::conversation_page {
                tenant: tenant.clone(),
                user: user.clone(),
                query: ListQuery {
                    after: last
                        .map(|s| ListCursor::of(&s.record))
                        .or_else(|| query.after.clone()),
                    limit,
                },
            })
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
            self.call(Request::inbox {
                tenant: tenant.clone(),
                user: user.clone(),
                device: device.clone(),
                after: last.map(InboxCursor::of).or_else(|| after.clone()),
                limit,
            })
        })
        .await
    }
}

/// An argument made owned, for the wire.
macro_rules! own {
    ($arg:ident; & $($t:tt)+) => {
        $arg.to_owned()
    };
    ($arg:ident; $($t:tt)+) => {
        $arg
    };
}

/// `RemoteStore::<method>_in_parts`, named from the method.
macro_rules! in_parts_of {
    ($self:ident, history, $($arg:ident),*) => { $self.history_in_parts($($arg),*).await };
    ($self:ident, replay, $($arg:ident),*) => { $self.replay_in_parts($($arg),*).await };
    ($self:ident, inbox, $($arg:ident),*) => { $self.inbox_in_parts($($arg),*).await };
    ($self:ident, conversation_page, $($arg:ident),*) => {
        $self.conversation_page_in_parts($($arg),*).await
    };
}

macro_rules! remote_store {
    (
        read { $( $read:ident ( $($rarg:ident : [$($rty:tt)+]),* ) -> $rret:ty; )* }
        marks { $( $mark:ident ( $($marg:ident : [$($mty:tt)+]),* ) -> $mret:ty; )* }
        write { $( $write:ident ( $($warg:ident : [$($wty:tt)+]),* ) -> $wret:ty; )* }
        paged { $( $paged:ident ( $($parg:ident : [$($pty:tt)+]),* ) -> $pret:ty; )* }
    ) => {
        #[async_trait]
        impl Store for RemoteStore {
            $(
                async fn $read(&self, $($rarg: $($rty)+),*) -> StoreResult<$rret> {
                    self.call(Request::$read { $($rarg: own!($rarg; $($rty)+)),* }).await
                }
            )*
            $(
                async fn $mark(&self, $($marg: $($mty)+),*) -> StoreResult<$mret> {
                    self.call(Request::$mark { $($marg: own!($marg; $($mty)+)),* }).await
                }
            )*
            $(
                async fn $write(&self, $($warg: $($wty)+),*) -> StoreResult<$wret> {
                    self.call(Request::$write { $($warg: own!($warg; $($wty)+)),* }).await
                }
            )*
            $(
                async fn $paged(&self, $($parg: $($pty)+),*) -> StoreResult<$pret> {
                    in_parts_of!(self, $paged, $($parg),*)
                }
            )*
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
