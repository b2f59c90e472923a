//! Every call of the [`Store`] trait, listed once. From the list,
//! `store_calls!` makes:
//! - `Request`, the call on the wire: `{"op": "<method>", <arguments>}`,
//!   each argument owned and named as in the trait;
//! - `dispatch`, which runs a request on the served store;
//! - `impl Store for RemoteStore`, each method sending its request.
//!
//! An argument's type is written in brackets as the trait has it: a
//! borrowed one (`[&TenantId]`, `[&str]`) travels owned. A `paged` call
//! may answer more than one NATS message holds: `RemoteStore` asks for it
//! in parts through its own `<method>_in_parts`, in `remote.rs`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, MessageId, MessageVersion, TenantId,
    Timestamp, UserId,
};
use switchboard_store::{
    ArchiveScan, ArchivedBucket, BucketContents, BucketKey, Consent, ConsentQuery,
    ConversationDetail, ConversationKey, ConversationSummary, HistoryQuery, InboxCursor,
    InboxSweep, ListQuery, MarkChange, MessageKey, Mutation, SentKey, SequencerState, Store,
    StoreResult,
};

use crate::remote::RemoteStore;

/// The owned type an argument travels as.
macro_rules! owned {
    (& $($t:tt)+) => { <$($t)+ as ToOwned>::Owned };
    ($($t:tt)+) => { $($t)+ };
}

/// An argument as the trait method takes it, from the owned value.
macro_rules! lend {
    ($arg:ident; & $($t:tt)+) => {
        &$arg
    };
    ($arg:ident; $($t:tt)+) => {
        $arg
    };
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

macro_rules! store_calls {
    (
        calls { $( $call:ident ( $($arg:ident : [$($ty:tt)+]),* ) -> $ret:ty; )* }
        paged { $( $paged:ident ( $($parg:ident : [$($pty:tt)+]),* ) -> $pret:ty; )* }
    ) => {
        /// A call to the served store. Variants are named as the methods
        /// (and so serialised as they were when written by hand).
        #[allow(non_camel_case_types)]
        #[derive(Debug, Serialize, Deserialize)]
        #[serde(tag = "op")]
        pub(crate) enum Request {
            $( $call { $($arg: owned!($($ty)+)),* }, )*
            $( $paged { $($parg: owned!($($pty)+)),* }, )*
        }

        /// Runs `request` on `store`, and encodes the answer.
        pub(crate) async fn dispatch(store: &dyn Store, request: Request) -> Vec<u8> {
            match request {
                $( Request::$call { $($arg),* } => {
                    crate::service::reply(store.$call($(lend!($arg; $($ty)+)),*).await)
                } )*
                $( Request::$paged { $($parg),* } => {
                    crate::service::reply(store.$paged($(lend!($parg; $($pty)+)),*).await)
                } )*
            }
        }

        #[async_trait]
        impl Store for RemoteStore {
            $(
                async fn $call(&self, $($arg: $($ty)+),*) -> StoreResult<$ret> {
                    self.call(Request::$call { $($arg: own!($arg; $($ty)+)),* }).await
                }
            )*
            $(
                async fn $paged(&self, $($parg: $($pty)+),*) -> StoreResult<$pret> {
                    paste_in_parts!(self, $paged, $($parg),*)
                }
            )*
        }
    };
}

/// `RemoteStore::<method>_in_parts`, named from the method.
macro_rules! paste_in_parts {
    ($self:ident, history, $($arg:ident),*) => { $self.history_in_parts($($arg),*).await };
    ($self:ident, replay, $($arg:ident),*) => { $self.replay_in_parts($($arg),*).await };
    ($self:ident, inbox, $($arg:ident),*) => { $self.inbox_in_parts($($arg),*).await };
    ($self:ident, conversation_page, $($arg:ident),*) => {
        $self.conversation_page_in_parts($($arg),*).await
    };
}

store_calls! {
    calls {
        ping() -> ();
        commit(mutations: [Vec<Mutation>]) -> ();
        sequencer_states(keys: [Vec<ConversationKey>]) -> Vec<Option<SequencerState>>;
        find_sent(keys: [Vec<SentKey>]) -> Vec<Option<Message>>;
        find_messages(keys: [Vec<MessageKey>]) -> Vec<Option<Message>>;
        versions(
            tenant: [&TenantId],
            conversation: [&ConversationId],
            reader: [&UserId],
            message_id: [MessageId]
        ) -> Vec<MessageVersion>;
        conversation(
            tenant: [&TenantId],
            conversation: [&ConversationId],
            reader: [&UserId]
        ) -> ConversationDetail;
        members(
            tenant: [&TenantId],
            conversation: [&ConversationId],
            reader: [&UserId]
        ) -> (ConversationKind, Vec<UserId>);
        media_readable(tenant: [&TenantId], blob_ref: [&str], reader: [&UserId]) -> bool;
        media_referenced(tenant: [&TenantId], blob_ref: [&str]) -> bool;
        contacts(tenant: [&TenantId], user: [&UserId]) -> Vec<UserId>;
        consent(queries: [Vec<ConsentQuery>]) -> Vec<Consent>;
        memberships(
            tenant: [&TenantId],
            user: [&UserId]
        ) -> Vec<(ConversationId, ConversationKind, usize)>;
        ack_delivered(
            tenant: [&TenantId],
            user: [&UserId],
            device: [&DeviceId],
            conversation: [&ConversationId],
            seq: [u64]
        ) -> MarkChange;
        ack_read(
            tenant: [&TenantId],
            user: [&UserId],
            conversation: [&ConversationId],
            seq: [u64]
        ) -> MarkChange;
        register_device(tenant: [&TenantId], user: [&UserId], device: [&DeviceId]) -> ();
        expire_inbox(before: [Timestamp], cursor: [Option<String>], budget: [usize]) -> InboxSweep;
        message_seqs(keys: [Vec<MessageKey>]) -> Vec<Option<u64>>;
        archive_candidates(
            before_day: [u32],
            cursor: [Option<String>],
            budget: [usize]
        ) -> ArchiveScan;
        // A part too large for one NATS message comes back as
        // `AnswerTooLarge`; the archiver reads smaller parts then.
        bucket_contents(bucket: [&BucketKey], after_seq: [u64], limit: [usize]) -> BucketContents;
        archived_buckets(
            key: [&ConversationKey],
            after_seq: [u64],
            before_seq: [u64]
        ) -> Vec<ArchivedBucket>;
    }
    paged {
        conversation_page(
            tenant: [&TenantId],
            user: [&UserId],
            query: [ListQuery]
        ) -> Vec<ConversationSummary>;
        history(
            tenant: [&TenantId],
            conversation: [&ConversationId],
            reader: [&UserId],
            query: [HistoryQuery]
        ) -> Vec<Message>;
        replay(
            tenant: [&TenantId],
            conversation: [&ConversationId],
            reader: [&UserId],
            after_seq: [u64],
            limit: [usize]
        ) -> Vec<Message>;
        inbox(
            tenant: [&TenantId],
            user: [&UserId],
            device: [&DeviceId],
            after: [Option<InboxCursor>],
            limit: [usize]
        ) -> Vec<Message>;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    /// Processes of two releases talk during a rolling upgrade: the
    /// requests keep the shape they had when written by hand.
    #[test]
    fn requests_keep_their_wire_format() {
        let ping = serde_json::to_value(Request::ping {}).unwrap();
        assert_eq!(ping, json!({"op": "ping"}));
        let referenced = Request::media_referenced {
            tenant: TenantId::new("acme").unwrap(),
            blob_ref: "b1".into(),
        };
        assert_eq!(
            serde_json::to_value(referenced).unwrap(),
            json!({"op": "media_referenced", "tenant": "acme", "blob_ref": "b1"})
        );
        // An inbox request without `after` (older callers) reads from the start.
        let inbox: Request = serde_json::from_value(json!({
            "op": "inbox", "tenant": "acme", "user": "u", "device": "d", "limit": 5
        }))
        .unwrap();
        assert!(matches!(
            inbox,
            Request::inbox {
                after: None,
                limit: 5,
                ..
            }
        ));
    }
}
