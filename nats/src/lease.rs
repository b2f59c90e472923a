//! Leases in a JetStream KV bucket.
//!
//! A lease is a key created with `create` (which fails if the key exists)
//! and kept alive by `update` with the revision the holder last wrote
//! (which fails if anyone else wrote since). The bucket's `max_age` expires
//! a key nobody refreshes, so a holder that dies frees its lease after at
//! most one TTL. A holder that cannot refresh stops using the lease before
//! the server could expire it: it counts validity from the moment it sent
//! its last successful write, minus a margin.

use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use bytes::Bytes;

use crate::BackboneError;

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Someone else holds the key now (our lease expired and was taken).
    #[error("lease {0} was lost to another holder")]
    Lost(String),
    #[error("lease {key}: {source}")]
    Nats {
        key: String,
        #[source]
        source: async_nats::Error,
    },
}

/// A held lease.
#[derive(Debug)]
pub struct Lease {
    kv: kv::Store,
    key: String,
    value: Bytes,
    revision: u64,
    ttl: Duration,
    renewed_at: Instant,
}

impl Lease {
    /// Takes `key` if nobody holds it. `ttl` must be the bucket's `max_age`.
    pub async fn try_acquire(
        kv: &kv::Store,
        key: &str,
        value: Bytes,
        ttl: Duration,
    ) -> Result<Option<Lease>, BackboneError> {
        let sent_at = Instant::now();
        match kv.create(key, value.clone()).await {
            Ok(revision) => Ok(Some(Lease {
                kv: kv.clone(),
                key: key.to_owned(),
                value,
                revision,
                ttl,
                renewed_at: sent_at,
            })),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(BackboneError::Nats(format!("lease {key}: {e}"))),
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// The KV revision of our last write: a fencing token that grows with
    /// every new holder.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Until when the holder may act on the lease: a fifth of the TTL before
    /// the server could expire it.
    pub fn valid_until(&self) -> Instant {
        self.renewed_at + self.ttl - self.ttl / 5
    }

    pub fn is_valid(&self) -> bool {
        Instant::now() < self.valid_until()
    }

    /// How often to call [`Lease::renew`].
    pub fn renew_interval(&self) -> Duration {
        self.ttl / 4
    }

    /// Extends the lease. `Lost` means someone else holds it now.
    pub async fn renew(&mut self) -> Result<(), LeaseError> {
        let sent_at = Instant::now();
        match self
            .kv
            .update(&self.key, self.value.clone(), self.revision)
            .await
        {
            Ok(revision) => {
                self.revision = revision;
                self.renewed_at = sent_at;
                Ok(())
            }
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                Err(LeaseError::Lost(self.key.clone()))
            }
            Err(e) => Err(LeaseError::Nats {
                key: self.key.clone(),
                source: Box::new(e),
            }),
        }
    }

    /// Gives the lease up at once, so another holder need not wait for the TTL.
    pub async fn release(self) {
        if let Err(e) = self
            .kv
            .delete_expect_revision(&self.key, Some(self.revision))
            .await
        {
            tracing::debug!(key = %self.key, error = %e, "releasing a lease failed; it expires by itself");
        }
    }
}
