//! The NATS JetStream backbone as code.
//!
//! Owns every subject (`subject`), the stream, consumer and bucket
//! definitions (`definitions`, from the JSON files beside this crate), the
//! KV leases that make node ids and partitions exclusive (`lease`,
//! `node_id`), the envelopes that travel on the backbone (`envelope`), and
//! the store service that lets processes share an embedded store
//! (`store_service`). It does not decide anything about conversations:
//! that is the worker's job.

pub mod definitions;
pub mod envelope;
pub mod fanout;
pub mod key_directory;
pub mod kv_cas;
pub mod kv_key;
pub mod lease;
pub mod node_id;
pub mod presence;
pub mod push_jobs;
pub mod push_tokens;
pub mod store_service;
pub mod subject;
pub mod tenants;

use std::time::Duration;

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
}

/// How to reach NATS.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// Comma-separated server URLs.
    pub url: String,
    /// Client name shown by `nats server report connections`.
    pub name: String,
}

/// Connects, retrying the first connection and reconnecting forever: a
/// process outlives NATS restarts.
pub async fn connect(config: &NatsConfig) -> Result<async_nats::Client, BackboneError> {
    async_nats::ConnectOptions::new()
        .name(&config.name)
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connection_timeout(Duration::from_secs(5))
        .request_timeout(Some(Duration::from_secs(10)))
        .event_callback(|event| async move {
            match event {
                async_nats::Event::Connected => tracing::info!("connected to NATS"),
                async_nats::Event::Disconnected => tracing::warn!("disconnected from NATS"),
                // Slow consumers (messages dropped), server and client
                // errors, lame duck mode: all worth an operator's look.
                other => tracing::warn!(event = %other, "NATS client event"),
            }
        })
        .connect(config.url.as_str())
        .await
        .map_err(|e| BackboneError::Nats(format!("connect {}: {e}", config.url)))
}
