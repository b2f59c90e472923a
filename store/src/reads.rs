//! Every read of the store, listed once.
//!
//! A read is a [`Read`] (a plain value: what to read) answered by an
//! [`Answer`] of the matching variant. From the one list in this file
//! the macro makes:
//! - [`Read`] and [`Answer`], which `Store::read` speaks and which travel
//!   as they are over NATS (`switchboard-store-remote`: a read is
//!   `{"op": "<name>", <arguments>}`, its answer the value alone);
//! - [`Reads`], the typed methods a backend implements (the embedded
//!   store and Scylla), and [`serve`], which answers a `Read` from them;
//! - the same typed methods on `dyn Store`, which is how callers read
//!   (`typed.rs`).
//!
//! So a new read is one line here and one method per backend: the
//! archive wrapper ([`crate::archive::Tiered`]) and the remote store pass
//! every read they do not change through untouched.
//!
//! An argument's type is written in brackets as the methods take it; a
//! borrowed one (`[&TenantId]`, `[&str]`) is owned in a [`Read`].

use async_trait::async_trait;
use serde::{Deserialize, Deserializer, Serialize};
use switchboard_protocol::channels::Invite;
use switchboard_protocol::profile::Profile;
use switchboard_protocol::reports::{Report, ReportStatus};
use switchboard_protocol::safety::{Ban, Block};
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, MessageId, MessageVersion, TenantId,
    Timestamp, UserId,
};

use crate::error::StoreResult;
use crate::settings::Listing;
use crate::types::{
    ArchiveScan, ArchivedBucket, BucketContents, BucketKey, Consent, ConsentQuery,
    ConversationDetail, ConversationKey, ConversationScan, ConversationSummary, ExpiredScan,
    HistoryQuery, InboxCursor, ListQuery, MessageKey, PinRow, PolicyScan, SentBy, SentKey,
    SequencerState, ThreadEntry,
};

macro_rules! reads_types {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident $method:ident ( $($arg:ident : [$($ty:tt)+]),* ) -> $ret:ty;
    )*) => {
        /// One read of the store: which, and its arguments. Serialised as
        /// `{"op": "<method>", <arguments>}`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "op", rename_all = "snake_case")]
        pub enum Read {
            $( $(#[doc = $doc])* $variant { $($arg: arg_type!($($ty)+)),* }, )*
        }

        /// The answer to a [`Read`], of the same variant. Serialised as
        /// the value alone: who asked knows which read it was
        /// ([`Read::answer_from`]).
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum Answer {
            $( $variant($ret), )*
        }

        impl Read {
            /// The read's name, as its method is named.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Read::$variant { .. } => stringify!($method), )*
                }
            }

            /// Decodes the answer to this read.
            pub fn answer_from<'de, D: Deserializer<'de>>(
                &self,
                from: D,
            ) -> Result<Answer, D::Error> {
                match self {
                    $( Read::$variant { .. } => <$ret>::deserialize(from).map(Answer::$variant), )*
                }
            }
        }

        /// The reads a backend implements, one method per [`Read`].
        #[async_trait]
        pub trait Reads: Send + Sync {
            $(
                $(#[doc = $doc])*
                async fn $method(&self, $($arg: $($ty)+),*) -> StoreResult<$ret>;
            )*
        }

        /// Answers `read` from `backend`'s methods.
        pub async fn serve<B: Reads + ?Sized>(backend: &B, read: Read) -> StoreResult<Answer> {
            match read {
                $(
                    Read::$variant { $($arg),* } => backend
                        .$method($(arg_lent!($arg; $($ty)+)),*)
                        .await
                        .map(Answer::$variant),
                )*
            }
        }
    };
}

/// Calls `$then!` with the list of the store's reads.
macro_rules! store_reads {
    ($then:ident) => {
        $then! {
            /// The sequencer's view of each conversation (`None` if it does not
            /// exist).
            SequencerStates sequencer_states(keys: [Vec<ConversationKey>]) -> Vec<Option<SequencerState>>;
            /// Messages already stored under each idempotency key. Idempotency
            /// keys go with their bucket: a retry older than the archive age is a
            /// new message.
            FindSent find_sent(keys: [Vec<SentKey>]) -> Vec<Option<Message>>;
            /// Messages by id, as they are now (for the sequencer; no membership
            /// check).
            FindMessages find_messages(keys: [Vec<MessageKey>]) -> Vec<Option<Message>>;
            /// Every version of an edited message, the original first, for a
            /// member. Empty for a message never edited, or deleted.
            Versions versions(
                tenant: [&TenantId],
                conversation: [&ConversationId],
                reader: [&UserId],
                message_id: [MessageId]
            ) -> Vec<MessageVersion>;
            /// One conversation with all its members, for a member.
            Conversation conversation(
                tenant: [&TenantId],
                conversation: [&ConversationId],
                reader: [&UserId]
            ) -> ConversationDetail;
            /// The conversation's kind and members, for a member (to address an
            /// ephemeral event such as typing).
            Members members(
                tenant: [&TenantId],
                conversation: [&ConversationId],
                reader: [&UserId]
            ) -> (ConversationKind, Vec<UserId>);
            /// Whether `reader` is a member of a conversation with a message that
            /// references blob `blob_ref` (F13: who may download an upload).
            MediaReadable media_readable(tenant: [&TenantId], blob_ref: [&str], reader: [&UserId]) -> bool;
            /// Whether any stored message references blob `blob_ref` (the blob
            /// collector keeps those).
            MediaReferenced media_referenced(tenant: [&TenantId], blob_ref: [&str]) -> bool;
            /// Whom `user`'s presence concerns: the other members of `user`'s
            /// direct conversations that `user` opened or has sent in. Someone who
            /// merely opened a direct conversation with `user` is not among them
            /// until `user` answers.
            Contacts contacts(tenant: [&TenantId], user: [&UserId]) -> Vec<UserId>;
            /// What the sequencer needs to decide whether an add is unsolicited,
            /// for each query (see [`ConsentQuery`]).
            Consent consent(queries: [Vec<ConsentQuery>]) -> Vec<Consent>;
            /// Every conversation of `user` with its kind and member count (to
            /// find those that fan out on read).
            Memberships memberships(
                tenant: [&TenantId],
                user: [&UserId]
            ) -> Vec<(ConversationId, ConversationKind, usize)>;
            /// One page of the conversations `user` is a member of, in
            /// [`crate::list_order`] (most recent activity first): at most
            /// `query.limit` of them, after `query.after`.
            ConversationPage conversation_page(
                tenant: [&TenantId],
                user: [&UserId],
                query: [ListQuery]
            ) -> Vec<ConversationSummary>;
            /// History, newest first: messages with `after_seq < seq < before_seq`.
            History history(
                tenant: [&TenantId],
                conversation: [&ConversationId],
                reader: [&UserId],
                query: [HistoryQuery]
            ) -> Vec<Message>;
            /// Messages after `after_seq`, oldest first (replay of a conversation).
            Replay replay(
                tenant: [&TenantId],
                conversation: [&ConversationId],
                reader: [&UserId],
                after_seq: [u64],
                limit: [usize]
            ) -> Vec<Message>;
            /// The device's undelivered messages across conversations, in `seq`
            /// order within each conversation (and conversations in a fixed
            /// order), from just after the entry `after` names when given.
            Inbox inbox(
                tenant: [&TenantId],
                user: [&UserId],
                device: [&DeviceId],
                after: [Option<InboxCursor>],
                limit: [usize]
            ) -> Vec<Message>;
            /// The `seq` of each message id, also of messages whose rows are in
            /// the archive (no membership check).
            MessageSeqs message_seqs(keys: [Vec<MessageKey>]) -> Vec<Option<u64>>;
            /// One step of the scan for buckets to archive (F14): buckets of days
            /// before `before_day` that are not archived, at most `budget` bucket
            /// rows looked at from `cursor` (`None` starts at the beginning).
            ArchiveCandidates archive_candidates(
                before_day: [u32],
                cursor: [Option<String>],
                budget: [usize]
            ) -> ArchiveScan;
            /// Part of one bucket that is not archived, for the archiver (no
            /// membership check): its whole seq range, and its messages with
            /// `seq > after_seq` (at most `limit`, oldest first) with their
            /// versions. `NotFound` when there is no such bucket, `Conflict` when
            /// it is archived already.
            BucketContents bucket_contents(bucket: [&BucketKey], after_seq: [u64], limit: [usize]) -> BucketContents;
            /// The archived buckets of a conversation that hold a `seq` with
            /// `after_seq < seq < before_seq`, newest first (no membership check:
            /// callers read the live rows first, which checks).
            ArchivedBuckets archived_buckets(
                key: [&ConversationKey],
                after_seq: [u64],
                before_seq: [u64]
            ) -> Vec<ArchivedBucket>;
            /// The messages `sender` sent in a conversation (system messages they
            /// caused included), newest first, with `seq < before_seq`, at most
            /// `limit`: read from a per-sender index, so the cost follows the
            /// sender's own messages, not the conversation's (the export). Rows
            /// outlive archiving and go with the user's erasure. No membership
            /// check.
            SentBy sent_by(
                key: [&ConversationKey],
                sender: [&UserId],
                before_seq: [Option<u64>],
                limit: [usize]
            ) -> Vec<SentBy>;
            /// The emoji `user` reacted with to each of the messages `seqs` of
            /// the conversation (v1.1), in order: what makes a reaction's `me`.
            /// No membership check (callers read the messages first, which
            /// checks).
            UserReactions user_reactions(key: [&ConversationKey], user: [&UserId], seqs: [Vec<u64>]) -> Vec<Vec<String>>;
            /// The threads of a conversation `reader` took part in, the most
            /// recent reply first, each with its root and the reader's unread
            /// replies (v1.1).
            Threads threads(
                tenant: [&TenantId],
                conversation: [&ConversationId],
                reader: [&UserId]
            ) -> Vec<ThreadEntry>;
            /// The conversation's pins, newest first (v1.1). No membership check
            /// (the sequencer reads them; a gateway checks membership first).
            Pins pins(key: [&ConversationKey]) -> Vec<PinRow>;
            /// The conversation's bans, lifted ones gone and ended ones still
            /// among them, newest first (v1.2). No membership check (the
            /// sequencer reads them; a gateway checks the caller's role first).
            Bans bans(key: [&ConversationKey]) -> Vec<Ban>;
            /// The users `user` blocks, newest first (v1.2).
            Blocks blocks(tenant: [&TenantId], user: [&UserId]) -> Vec<Block>;
            /// The profile of each user, in the order asked: `None` for a user
            /// who never set one (v1.3). No check: users of a tenant see each
            /// other's.
            Profiles profiles(tenant: [&TenantId], users: [Vec<UserId>]) -> Vec<Option<Profile>>;
            /// One step of the tenant's directory of public channels (v1.3): the
            /// rows after `after` in conversation id order, at most `limit`.
            Directory directory(
                tenant: [&TenantId],
                after: [Option<ConversationId>],
                limit: [usize]
            ) -> Vec<(ConversationId, Listing)>;
            /// How many members each conversation has (0 for one that does not
            /// exist).
            MemberCounts member_counts(keys: [Vec<ConversationKey>]) -> Vec<u64>;
            /// The conversation's invites, newest first (v1.3). No check.
            Invites invites(key: [&ConversationKey]) -> Vec<Invite>;
            /// The invite with `code` in the tenant, if there is one (v1.3).
            InviteByCode invite_by_code(tenant: [&TenantId], code: [&str]) -> Option<Invite>;
            /// The first seq `user` reads in each conversation (v1.3: they joined
            /// one whose history is not for newcomers), 0 for all of it. No
            /// membership check.
            HistoryFloors history_floors(
                tenant: [&TenantId],
                user: [&UserId],
                conversations: [Vec<ConversationId>]
            ) -> Vec<u64>;
            /// A tenant's reports with `status`, newest first, those with an id
            /// below `before` (v1.2). No check: tenant admins read them.
            Reports reports(
                tenant: [&TenantId],
                status: [ReportStatus],
                before: [Option<MessageId>],
                limit: [usize]
            ) -> Vec<Report>;
            /// One report by id (v1.2).
            Report report(tenant: [&TenantId], id: [MessageId]) -> Option<Report>;
            /// How many reports are open, per tenant that has any.
            OpenReports open_reports() -> Vec<(TenantId, u64)>;
            /// One step of the scan for conversations with a retention or
            /// disappearing time (v1.2), from `cursor` (a step's `next`), looking
            /// at about `budget` rows.
            Expiring expiring(cursor: [Option<String>], budget: [usize]) -> PolicyScan;
            /// One step of the scan of a tenant's conversations, every one of
            /// them (its default retention applies to those that set none, v1.2),
            /// from `cursor` (a step's `next`), looking at about `budget` rows.
            TenantConversations tenant_conversations(
                tenant: [&TenantId],
                cursor: [Option<String>],
                budget: [usize]
            ) -> ConversationScan;
            /// Messages of the conversation whose `expires_at` is at or before
            /// `now`, by that time, at most `limit` (v1.2): (`expires_at`, seq).
            Due due(key: [&ConversationKey], now: [Timestamp], limit: [usize]) -> Vec<(Timestamp, u64)>;
            /// One step of the scan of a conversation's live messages after
            /// `after_seq`, in seq order, for those created at or before `cutoff`
            /// and not deleted, looking at no more than `limit` rows (v1.2).
            /// Archived buckets are not looked at.
            Expired expired(
                key: [&ConversationKey],
                after_seq: [u64],
                cutoff: [Timestamp],
                limit: [usize]
            ) -> ExpiredScan;
            /// The conversations `user` ever joined, in id order after `after`,
            /// at most `limit` (v1.2): those they left included, which is what an
            /// erasure visits.
            Joined joined(
                tenant: [&TenantId],
                user: [&UserId],
                after: [Option<ConversationId>],
                limit: [usize]
            ) -> Vec<ConversationId>;
            /// One step of an erasure's scan of a conversation's live messages,
            /// after `after_seq`, in seq order, looking at no more than `limit`
            /// rows: those that name `user` ([`crate::erasure::Erasure::names`])
            /// or carry their reaction. Archived buckets are not looked at.
            Naming naming(
                key: [&ConversationKey],
                user: [&UserId],
                after_seq: [u64],
                limit: [usize]
            ) -> ExpiredScan;
        }
    };
}

pub(crate) use store_reads;

store_reads!(reads_types);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    /// Processes of two releases talk over NATS during a rolling upgrade:
    /// a read keeps the shape it had when each was a method of `Store`.
    #[test]
    fn reads_keep_their_wire_format() {
        let referenced = Read::MediaReferenced {
            tenant: TenantId::new("acme").unwrap(),
            blob_ref: "b1".into(),
        };
        assert_eq!(
            serde_json::to_value(&referenced).unwrap(),
            json!({"op": "media_referenced", "tenant": "acme", "blob_ref": "b1"})
        );
        assert_eq!(referenced.name(), "media_referenced");
        let page: Read = serde_json::from_value(json!({
            "op": "conversation_page", "tenant": "t", "user": "u",
            "query": {"after": null, "limit": 5}
        }))
        .unwrap();
        assert_eq!(page.name(), "conversation_page");
        // An inbox read without `after` (older callers) reads from the start.
        let inbox: Read = serde_json::from_value(json!({
            "op": "inbox", "tenant": "acme", "user": "u", "device": "d", "limit": 5
        }))
        .unwrap();
        assert!(matches!(
            inbox,
            Read::Inbox {
                after: None,
                limit: 5,
                ..
            }
        ));
    }

    /// An answer is its value alone, decoded by the read it answers.
    #[test]
    fn an_answer_travels_as_its_value() {
        let answer = Answer::MediaReferenced(true);
        assert_eq!(serde_json::to_value(&answer).unwrap(), json!(true));
        let read = Read::OpenReports {};
        let back = read.answer_from(json!([["acme", 2]])).unwrap();
        assert_eq!(
            back,
            Answer::OpenReports(vec![(TenantId::new("acme").unwrap(), 2)])
        );
        assert!(read.answer_from(json!(true)).is_err());
    }
}
