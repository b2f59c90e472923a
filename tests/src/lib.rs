//! The integration-test harness: real processes on loopback, nothing mocked.
//!
//! [`Nats`] runs a `nats-server` with JetStream on a free port in a
//! temporary directory; [`Proc`] runs a `switchboard` process (gateway,
//! worker or dev) and waits until it is ready; [`Cluster`] composes them
//! and hands out clients and tokens. Every process is killed when its
//! handle is dropped, so a failing test leaves nothing behind.
//!
//! Binaries: `SWITCHBOARD_NATS_SERVER` or `nats-server` on `PATH` or
//! `.venv/bin/nats-server` in the workspace; the `switchboard` binary next
//! to the test executable (`cargo build --bin switchboard` first; the
//! README's test command does); `SWITCHBOARD_LOSSYFS` or `.tools/lossyfs`
//! for the power-loss test ([`lossyfs`]).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod bins;
pub mod cluster;
pub mod cql;
pub mod frames;
pub mod lossyfs;
pub mod nats_cli;
pub mod proc;
pub mod reliable;
pub mod run;
pub mod s3;
pub mod steady;
pub mod tls;

pub use bins::{
    find_bin, nats_server_bin, plugin, plugin_variant, switchboard_bin, workspace_root,
};
pub use cluster::{Cluster, ClusterSpec, SECRET, TENANT};
pub use frames::connect_ws;
pub use proc::{Nats, Proc};
pub use run::{eventually, repeat_panic_messages_last, unique};
