//! The NATS JetStream backbone as code.
//!
//! The message path: how processes connect (`connection`), every subject
//! of the message path (`subject`), the stream, consumer and bucket
//! definitions (`definitions`, from the JSON files beside this crate), the
//! KV leases that make node ids and partitions exclusive (`lease`,
//! `node_id`), compare-and-set writes and KV key parts (`kv_cas`,
//! `kv_key`), what travels on the backbone (`envelope`, `push_jobs`),
//! and the trace context that travels with it (`trace`).
//! Then the records processes share in KV buckets, one module each
//! (`records`: tenants, push tokens, presence, refusals).
//!
//! It does not decide anything about conversations: that is the worker's
//! job. The store service that lets processes share an embedded store is
//! the `store-remote` crate, the fan-out policy is the plugin host's, and
//! the E2EE key directory is the gateway's.

pub mod admission;
pub mod answers;
pub mod audit;
pub mod commands;
mod connection;
pub mod definitions;
pub mod envelope;
mod error;
pub mod events;
pub mod kv_cas;
pub mod kv_key;
pub mod lease;
pub mod node_id;
pub mod publish;
pub mod push_jobs;
pub mod records;
pub mod scheduled;
pub mod search;
pub mod sessions;
pub mod subject;
pub mod trace;

pub use connection::{
    GATEWAY_INBOX_PREFIX, NatsAuth, NatsConfig, NatsTls, connect, connection_epoch,
    connection_epochs, parse_servers, reconnected_since,
};
pub use error::{BackboneError, Cause, cause};
