//! The NATS JetStream backbone as code.
//!
//! The message path: how processes connect (`connection`), every subject
//! of the message path (`subject`), the stream, consumer and bucket
//! definitions (`definitions`, from the JSON files beside this crate), the
//! KV leases that make node ids and partitions exclusive (`lease`,
//! `node_id`), compare-and-set writes and KV key parts (`kv_cas`,
//! `kv_key`), and what travels on the backbone (`envelope`, `push_jobs`).
//! Then the records processes share in KV buckets, one module each
//! (`records`: tenants, push tokens, presence, refusals).
//!
//! It does not decide anything about conversations: that is the worker's
//! job. The store service that lets processes share an embedded store is
//! the `store-remote` crate, the fan-out policy is the plugin host's, and
//! the E2EE key directory is the gateway's.

mod connection;
pub mod definitions;
pub mod envelope;
pub mod kv_cas;
pub mod kv_key;
pub mod lease;
pub mod node_id;
pub mod push_jobs;
pub mod records;
pub mod subject;

#[derive(Debug, Clone, thiserror::Error)]
pub enum BackboneError {
    #[error("NATS: {0}")]
    Nats(String),
    #[error("backbone definition: {0}")]
    Definition(String),
    #[error("encoding: {0}")]
    Encoding(String),
    #[error("exhausted: {0}")]
    Exhausted(String),
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// NATS refused this process: wrong credentials, a TLS setup it does
    /// not accept, or a server list that does not parse. Retrying does
    /// not help; the configuration must change.
    #[error("NATS refused the connection ({servers}): {reason}")]
    Refused { servers: String, reason: String },
}

pub use connection::{NatsAuth, NatsConfig, NatsTls, connect, connection_epoch, parse_servers};
