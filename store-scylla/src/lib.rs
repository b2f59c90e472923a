//! The message store on ScyllaDB: a [`switchboard_store::Store`] backend
//! for deployments that outgrow one machine.
//!
//! It behaves as the embedded store does, as seen through the trait (the
//! conformance suite is the judge), with the tables of
//! `deploy/scylla/schema.cql`: the embedded keyspaces were laid out as the
//! partitions used here. Where Scylla makes a difference:
//!
//! - A commit checks, then writes one LOGGED batch (`commit.rs`). The check
//!   and the write are not isolated from other writers: correctness rests
//!   on the single writer per conversation (the sequencer holding its
//!   lease), and on the writer fence (`fence.rs`): a partition's writer
//!   claims it, and each of its commits is decided by a lightweight
//!   transaction on the claim's epoch before its batch is sent, so a
//!   writer that lost its partition writes nothing more. The fence's are
//!   the only lightweight transactions.
//! - A write that times out may still land (a logged batch is replayed from
//!   the batch log). The caller gets `Unavailable`; a retry of an append
//!   then finds `expected_last_seq` stale (`Conflict`) and the sequencer
//!   reloads, which is the same path as any stale writer.
//! - Delivered and read marks are grow-only registers (`member_marks`), so
//!   gateways acking concurrently can never move a mark back.
//! - Inbox entries expire by TTL; `expire_inbox` sweeps only when
//!   configured to (`inbox_sweep`).
//! - Write order across processes follows the hosts' clocks (explicit
//!   write timestamps, see `cql::Clock`).
//! - The per-user limit on unsolicited groups spans conversations, so no
//!   single writer guards it: adds of one user committed at the same
//!   moment by writers of different partitions may each pass the check
//!   (`people.rs`). The embedded store's one writer thread makes it exact.
//! - An erasure finds the users who block the erased one by a scan of the
//!   whole `blocks` table (`erasure.rs`), and leaves the unsolicited adds
//!   the erased one made to others to expire by their TTL (a day).
//!
//! Consistency is LOCAL_QUORUM for reads and writes by default: a read at
//! LOCAL_QUORUM after a write at LOCAL_QUORUM in the same datacenter sees
//! it (the quorums overlap), which the sequencer needs to read its own
//! `last_seq` back, and a datacenter keeps serving when another is cut
//! off. See `deploy/scylla/README.md`.

mod channels;
mod client;
mod commit;
mod config;
mod cql;
mod cursor;
mod erasure;
mod extras;
mod fence;
mod media;
pub mod metrics;
mod people;
mod rows;
mod safety;
mod schema;
mod senders;
mod server;
mod statements;
mod states;
mod store;
mod writer;

pub use client::ScyllaStore;
pub use config::{Replication, ScyllaConfig};
pub use schema::{SCHEMA_CQL, SCHEMA_VERSION};
