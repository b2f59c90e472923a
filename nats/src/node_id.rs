//! Snowflake node ids leased from the `sb_nodes` bucket, so that no two
//! processes ever generate ids with the same node id (F1).
//!
//! A process takes a free key `n<id>` (0..=1023), renews it in the
//! background, and generates ids only while its lease is valid. If the
//! lease is lost (the process was cut off for longer than the TTL and
//! someone else took the id), it leases a different id before it
//! generates again.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::kv;
use bytes::Bytes;
use rand::Rng;
use switchboard_protocol::MessageId;
use switchboard_protocol::snowflake::{MAX_NODE_ID, SnowflakeGenerator};
use tokio::task::JoinHandle;

use crate::BackboneError;
use crate::lease::{Lease, LeaseError};

/// Where message and command ids come from: the leased generator in
/// production, anything unique in unit tests.
pub trait IdSource: Send + Sync {
    fn next_id(&self) -> Result<MessageId, BackboneError>;
}

impl IdSource for IdGenerator {
    fn next_id(&self) -> Result<MessageId, BackboneError> {
        IdGenerator::next_id(self)
    }
}

struct State {
    generator: SnowflakeGenerator,
    valid_until: Instant,
}

/// Issues Snowflake ids under a leased node id. Cheap to clone.
#[derive(Clone)]
pub struct IdGenerator {
    state: Arc<Mutex<State>>,
    /// Keeps the renewal task alive as long as any clone exists.
    _renewer: Arc<AbortOnDrop>,
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

async fn lease_any(
    kv: &kv::Store,
    owner: &str,
    ttl: Duration,
) -> Result<(u16, Lease), BackboneError> {
    let ids = u32::from(MAX_NODE_ID) + 1;
    let start = rand::rng().random_range(0..ids);
    for i in 0..ids {
        let id = ((start + i) % ids) as u16;
        let value = Bytes::from(owner.to_owned());
        if let Some(lease) = Lease::try_acquire(kv, &format!("n{id}"), value, ttl).await? {
            return Ok((id, lease));
        }
    }
    Err(BackboneError::Exhausted(
        "all 1024 Snowflake node ids are leased".into(),
    ))
}

impl IdGenerator {
    /// Leases a node id. `owner` is written as the key's value so an
    /// operator can see who holds which id (`nats kv ls sb_nodes`).
    pub async fn lease(kv: kv::Store, owner: String, ttl: Duration) -> Result<Self, BackboneError> {
        let (node, lease) = lease_any(&kv, &owner, ttl).await?;
        tracing::info!(node, "leased Snowflake node id");
        let state = Arc::new(Mutex::new(State {
            generator: SnowflakeGenerator::new(node)
                .map_err(|source| BackboneError::NodeId { source })?,
            valid_until: lease.valid_until(),
        }));
        let renewer = tokio::spawn(renew(kv, owner, ttl, lease, state.clone()));
        Ok(Self {
            state,
            _renewer: Arc::new(AbortOnDrop(renewer)),
        })
    }

    /// The node id in use now.
    pub fn node(&self) -> u16 {
        self.state
            .lock()
            .map(|s| s.generator.node())
            .unwrap_or(u16::MAX)
    }

    /// A new id, or `Unavailable` while the node id lease is not valid.
    pub fn next_id(&self) -> Result<MessageId, BackboneError> {
        let mut s = self
            .state
            .lock()
            .map_err(|_| BackboneError::Unavailable("id generator poisoned".into()))?;
        if Instant::now() >= s.valid_until {
            return Err(BackboneError::Unavailable(
                "Snowflake node id lease is not valid (NATS unreachable?)".into(),
            ));
        }
        Ok(s.generator.next_id(unix_ms()))
    }
}

async fn renew(
    kv: kv::Store,
    owner: String,
    ttl: Duration,
    mut lease: Lease,
    state: Arc<Mutex<State>>,
) {
    loop {
        tokio::time::sleep(lease.renew_interval()).await;
        match lease.renew().await {
            Ok(()) => {
                if let Ok(mut s) = state.lock() {
                    s.valid_until = lease.valid_until();
                }
            }
            Err(LeaseError::Lost(key)) => {
                tracing::warn!(%key, "Snowflake node id lease lost; leasing another");
                if let Ok(mut s) = state.lock() {
                    s.valid_until = Instant::now();
                }
                loop {
                    match lease_any(&kv, &owner, ttl).await {
                        Ok((node, new_lease)) => {
                            lease = new_lease;
                            if let (Ok(mut s), Ok(generator)) =
                                (state.lock(), SnowflakeGenerator::new(node))
                            {
                                s.generator = generator;
                                s.valid_until = lease.valid_until();
                            }
                            tracing::info!(node, "leased Snowflake node id");
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "leasing a Snowflake node id failed; retrying");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "renewing the Snowflake node id lease failed"),
        }
    }
}
