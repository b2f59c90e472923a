//! The store over NATS.
//!
//! The embedded store lives in one process (fjall allows one per
//! directory). That process serves it on `sb.store` ([`serve`]) and every
//! other process uses [`RemoteStore`], a [`Store`] that forwards each call
//! as a request. With Scylla every process talks to the database directly
//! and this service is not needed. The integration tests run the store
//! conformance suite through it, so both paths are held to the same
//! contract.
//!
//! `calls.rs` is the one list of the store's calls: the requests on the
//! wire, the service's dispatch and `RemoteStore`'s methods are all made
//! from it, so a new store read is one line here.
//!
//! [`Store`]: switchboard_store::Store

mod calls;
mod remote;
mod service;

pub use remote::RemoteStore;
pub use service::{ServeError, serve};
