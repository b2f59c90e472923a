//! The store's calls other than its reads, listed once, under who may
//! make them: `read` (every process: the health check), `marks` (the
//! writes a gateway makes: its users' delivered and read marks, and their
//! devices) and `write` (the conversation writers' commits and the
//! leader's sweeps; never a gateway). The reads are the store's own list
//! (`switchboard_store::reads`), which travel as they are: asked on
//! `read`, and some in parts (`remote.rs`).
//!
//! The list is the macro `store_calls!`, which hands it to the macro it
//! is given. Three make what they need from it, each in its own file:
//! `wire.rs` the calls on the wire (`{"op": "<method>", <arguments>}`)
//! and who may make each, `service.rs` the dispatch that runs a call on
//! the served store, `remote.rs` the `impl Store for RemoteStore`.
//!
//! An argument's type is written in brackets as the trait has it: a
//! borrowed one (`[&TenantId]`, `[&str]`) travels owned.

/// Calls `$then!` with the list of the store's calls.
macro_rules! store_calls {
    ($then:ident) => {
        $then! {
            read {
                ping() -> ();
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
        }
    };
}

pub(crate) use store_calls;
