//! Calls to addresses a tenant names: push providers
//! (`switchboard-push`), event webhooks (`switchboard-webhooks`),
//! identity providers' key sets (the gateway); and fetches of the links
//! users post (link previews, `fetch.rs`: redirects checked hop by hop,
//! private networks allowed one by one).
//!
//! A tenant could otherwise point them at the deployment's own services
//! (a metadata endpoint, NATS's monitoring port, an admin API on
//! loopback). Unless the operator allows private targets:
//! - a URL whose host is a private address literal is refused before any
//!   connection ([`private_literal`]);
//! - a host name is resolved by [`PublicOnly`] on every connection, which
//!   drops private answers, so a name that later points inside (DNS
//!   rebinding) is refused too;
//! - a redirect is checked the same way ([`redirects`]).
//!
//! Either way the clients ignore `HTTP_PROXY`/`HTTPS_PROXY`: behind a
//! proxy, the check would see the proxy's address, not the target's.
//!
//! The deliveries share their clients and how they read an answer
//! (`calls.rs`: bounded in time and bytes, a status read as an
//! [`Attempt`]) and how they sign a body (`signing.rs`).

mod calls;
mod fetch;
mod private;
mod signing;
#[cfg(any(test, feature = "test-server"))]
pub mod test_server;

pub use calls::{
    ALLOW_PRIVATE, Answer, AnswerCaps, Attempt, CallConfig, Clients, Timeouts, answer, by_status,
    read_capped, transport,
};
pub use fetch::{FetchConfig, FetchError, FetchPolicy, Fetched, Fetcher, Network};
pub use private::{PublicOnly, client_builder, is_private, private_literal, redirects};
pub use signing::signature;
