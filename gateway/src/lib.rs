//! The edge: WebSocket data plane and REST control plane (docs/protocol.md).
//!
//! A gateway authenticates every request (`auth`), turns writes into
//! commands on the conversation's ingest partition (`commands`), and
//! routes events from NATS to its connections (`hub`). It never assigns a
//! `seq` or writes a message itself: the worker that owns the partition
//! does, and answers through NATS. Reads (history, backlog, conversation
//! lists) go straight to the store, which checks membership.
//!
//! The crate's parts are built by the binary (`switchboard/src/run.rs`)
//! and assembled in [`Gateway`] (`state.rs`), which every handler and
//! connection shares; this root only declares modules and re-exports, so
//! no module imports it back.

mod answering;
pub mod auth;
mod blocks;
mod commands;
pub mod config;
mod connection;
pub mod error;
mod floors;
mod http;
pub mod hub;
mod ingest;
mod key_directory;
pub mod media;
pub mod metrics;
mod outbox;
mod presence;
mod quota;
mod rates;
mod receipts;
mod scheduling;
mod screen;
mod server;
mod shapes;
mod state;
mod typing;
mod user_locks;

pub use auth::{Identity, TenantDirectory};
pub use config::{DevTokens, GatewayConfig, Limits, MediaConfig, TenantConfig};
pub use error::GatewayError;
pub use http::{router, serve};
pub use hub::{Hub, HubParts};
pub use ingest::{BatchLimits, Ingest};
pub use key_directory::KeyDirectory;
/// The `sb_keys` decoder, for the fuzz targets.
#[doc(hidden)]
pub use key_directory::{DeviceRecord, UserRecord, decode as decode_keys_value};
pub use media::{MediaStore, start_collector};
pub use presence::Presence;
pub use state::{Gateway, GatewayParts};
