//! A Rust client for Switchboard, built from docs/protocol.md alone: the
//! WebSocket data plane (`ws`), the REST control plane (`rest`) and token
//! minting (`token`) for tests, the load generator and the CLI.

pub mod rest;
pub mod token;
pub mod ws;

pub use rest::{RestClient, RestError};
pub use token::{TokenSpec, mint_eddsa, mint_hs256, mint_with_key};
pub use ws::{WsClient, WsError};
