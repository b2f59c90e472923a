//! Every call of the [`Store`] trait, listed once, under who may make it:
//! `read` (every process), `marks` (the writes a gateway makes: its
//! users' delivered and read marks, and their devices) and `write` (the
//! conversation writers' commits and the leader's sweeps; never a
//! gateway). `paged` calls are reads whose answer may not fit one NATS
//! message: `RemoteStore` asks for them in parts (`remote.rs`).
//!
//! The list is the macro `store_calls!`, which hands it to the macro it
//! is given. Three make what they need from it, each in its own file:
//! `wire.rs` the requests on the wire (`{"op": "<method>", <arguments>}`)
//! and who may make each, `service.rs` the dispatch that runs a request
//! on the served store, `remote.rs` the `impl Store for RemoteStore`.
//!
//! An argument's type is written in brackets as the trait has it: a
//! borrowed one (`[&TenantId]`, `[&str]`) travels owned.
//!
//! [`Store`]: switchboard_store::Store

/// Calls `$then!` with the list of the store's calls.
macro_rules! store_calls {
    ($then:ident) => {
        $then! {
            read {
                ping() -> ();
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
                sent_by(
                    key: [&ConversationKey],
                    sender: [&UserId],
                    before_seq: [Option<u64>],
                    limit: [usize]
                ) -> Vec<SentBy>;
                user_reactions(key: [&ConversationKey], user: [&UserId], seqs: [Vec<u64>]) -> Vec<Vec<String>>;
                pins(key: [&ConversationKey]) -> Vec<PinRow>;
                bans(key: [&ConversationKey]) -> Vec<Ban>;
                blocks(tenant: [&TenantId], user: [&UserId]) -> Vec<Block>;
                reports(
                    tenant: [&TenantId],
                    status: [ReportStatus],
                    before: [Option<MessageId>],
                    limit: [usize]
                ) -> Vec<Report>;
                report(tenant: [&TenantId], id: [MessageId]) -> Option<Report>;
                open_reports() -> Vec<(TenantId, u64)>;
                expiring(cursor: [Option<String>], budget: [usize]) -> PolicyScan;
                due(key: [&ConversationKey], now: [Timestamp], limit: [usize]) -> Vec<(Timestamp, u64)>;
                expired(
                    key: [&ConversationKey],
                    after_seq: [u64],
                    cutoff: [Timestamp],
                    limit: [usize]
                ) -> ExpiredScan;
                joined(
                    tenant: [&TenantId],
                    user: [&UserId],
                    after: [Option<ConversationId>],
                    limit: [usize]
                ) -> Vec<ConversationId>;
                naming(
                    key: [&ConversationKey],
                    user: [&UserId],
                    after_seq: [u64],
                    limit: [usize]
                ) -> ExpiredScan;
                threads(
                    tenant: [&TenantId],
                    conversation: [&ConversationId],
                    reader: [&UserId]
                ) -> Vec<ThreadEntry>;
            }
            marks {
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
                ack_thread_read(
                    tenant: [&TenantId],
                    user: [&UserId],
                    conversation: [&ConversationId],
                    root: [MessageId],
                    seq: [u64]
                ) -> ();
            }
            write {
                commit(mutations: [Vec<Mutation>]) -> ();
                expire_inbox(before: [Timestamp], cursor: [Option<String>], budget: [usize]) -> InboxSweep;
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
    };
}

pub(crate) use store_calls;
