//! The store over NATS.
//!
//! The embedded store lives in one process (fjall allows one per
//! directory). That process serves it as the NATS micro service
//! `switchboard-store` on `sb.store.{read,marks,write}` ([`serve`]) and
//! every other process uses [`RemoteStore`], a [`Store`] that forwards
//! each call as a request to the endpoint its kind of call belongs to. With Scylla every process talks to the database directly
//! and this service is not needed. The integration tests run the store
//! conformance suite through it, so both paths are held to the same
//! contract.
//!
//! The store's reads travel as they are (`switchboard_store::Read`, from
//! the store's own list), so a new store read needs nothing here, unless
//! its answer may not fit one NATS message: `RemoteStore::read` asks
//! those in parts.
//! `calls.rs` is the list of the store's other calls, by who may make
//! them: the requests on the wire (`wire.rs`), the service's dispatch
//! (`service.rs`) and `RemoteStore`'s methods (`remote.rs`) are all made
//! from it. The files depend on
//! each other one way: `calls` ← `wire` ← `service`, `remote`.
//!
//! [`Store`]: switchboard_store::Store

mod calls;
mod remote;
mod service;
mod wire;

pub use remote::RemoteStore;
pub use service::{SERVICE_NAME, ServeError, serve};
/// The wire's decoders, for the fuzz targets.
#[doc(hidden)]
pub use wire::{Request, decode_answer, decode_reply, decode_request};
