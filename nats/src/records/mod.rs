//! Records: the domain state processes share through NATS KV buckets.
//!
//! What goes here: a record that every process (or the CLI) reads and
//! changes in a KV bucket, with its key layout, its value and the rules for
//! changing it (compare-and-set where writers race). One file per bucket,
//! named for the record. What stays out: the message path itself
//! (subjects, streams, envelopes, leases, in the crate root), and state
//! only one component uses (the E2EE key directory is the gateway's).

pub mod bans;
pub mod erasures;
pub mod follow;
pub mod presence;
pub mod push_tokens;
pub mod refusals;
pub mod tenants;
