//! The integration tests: one binary, so it links once. Each test starts
//! its own nats-server and switchboard processes (see the harness crate).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod archive;
mod backlog;
mod bad_input;
mod chat;
mod cluster_faults;
mod compromised_gateway;
mod config_check;
mod consent;
mod conversation_features;
mod crash;
mod dev;
mod e2ee;
mod edge;
mod edits;
mod erasure;
mod fanout;
mod history;
mod http_edge;
mod idempotency;
mod inbox;
mod jwks;
mod leases;
mod limits;
mod lists;
mod media;
mod metrics;
mod ordering;
mod overload;
mod plugin_cli;
mod plugin_host;
mod plugins;
mod presence;
mod push;
mod receipts;
mod safety;
mod scheduled;
mod schema;
mod secured_backbone;
mod server_api;
mod store_service;
mod support;
mod tenants;
mod traces;
mod typing;
