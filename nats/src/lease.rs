//! Leases in a JetStream KV bucket.
//!
//! A lease is a key created with `create` (which fails if the key exists)
//! and kept alive by `update` with the revision the holder last wrote
//! (which fails if anyone else wrote since). The bucket's `max_age` expires
//! a key nobody refreshes, so a holder that dies frees its lease after at
//! most one TTL. A holder that cannot refresh stops using the lease before
//! the server could expire it: it counts validity from the moment it sent
//! its last successful write, minus a margin.
//!
//! Sizing. When a NATS node dies, every stream it led (a KV bucket is a
//! stream) has no leader until its followers elect one: nats-server waits
//! 4 to 9 s for a lost leader before it campaigns, and on a busy cluster
//! the bucket was measured refusing writes for up to 12 s. A holder
//! renews every tenth of the TTL and may act for four fifths of it, so a
//! TTL of 20 s rides through an outage of up to 14 s without a pause
//! (2 s since the last renewal, 16 s of validity). A longer one only
//! pauses the holder: its next renewal, a compare-and-set on its own
//! revision, proves nobody took the lease in between, and it goes on. A
//! shorter TTL moves a dead holder's leases sooner but pauses every holder
//! in every election.

use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use bytes::Bytes;

use crate::BackboneError;

/// The revision of `key` if it holds `value` now (ours), else `None`.
async fn own_revision(
    kv: &kv::Store,
    key: &str,
    value: &Bytes,
) -> Result<Option<u64>, kv::EntryError> {
    Ok(kv
        .entry(key)
        .await?
        .filter(|e| e.operation == kv::Operation::Put && e.value == *value)
        .map(|e| e.revision))
}

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
    /// Takes `key` if nobody holds it, or if it holds our own `value`: a
    /// value names its holder, so a key with ours was left by an earlier
    /// run of this same holder (a worker of a stable identity restarting)
    /// and is taken back at once, by a compare-and-set on its revision.
    /// `ttl` must be the bucket's `max_age`.
    pub async fn try_acquire(
        kv: &kv::Store,
        key: &str,
        value: Bytes,
        ttl: Duration,
    ) -> Result<Option<Lease>, BackboneError> {
        let nats = |e: Box<dyn std::error::Error + Send + Sync>| {
            BackboneError::nats(format!("lease {key}"), e)
        };
        let sent_at = Instant::now();
        let revision = match kv.create(key, value.clone()).await {
            Ok(revision) => revision,
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                let Some(ours) = own_revision(kv, key, &value)
                    .await
                    .map_err(|e| nats(e.into()))?
                else {
                    return Ok(None);
                };
                match kv.update(key, value.clone(), ours).await {
                    Ok(revision) => revision,
                    Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                        return Ok(None);
                    }
                    Err(e) => return Err(nats(e.into())),
                }
            }
            Err(e) => return Err(nats(e.into())),
        };
        Ok(Some(Lease {
            kv: kv.clone(),
            key: key.to_owned(),
            value,
            revision,
            ttl,
            renewed_at: sent_at,
        }))
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

    /// How often to call [`Lease::renew`]: often, so that the last good
    /// renewal before an outage is recent.
    pub fn renew_interval(&self) -> Duration {
        self.ttl / 10
    }

    /// Extends the lease. `Lost` means someone else holds it now.
    pub async fn renew(&mut self) -> Result<(), LeaseError> {
        match self.update().await {
            Err(LeaseError::Lost(_)) if self.adopt_own_write().await => self.update().await,
            other => other,
        }
    }

    async fn update(&mut self) -> Result<(), LeaseError> {
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

    /// After a revision mismatch: if the key still holds our own value, an
    /// earlier renewal landed although its answer was lost (a timeout
    /// during a leader election), so the lease is still ours under that
    /// revision. Values name their holder uniquely, so nobody else writes
    /// ours.
    async fn adopt_own_write(&mut self) -> bool {
        match own_revision(&self.kv, &self.key, &self.value).await {
            Ok(Some(revision)) => {
                tracing::debug!(key = %self.key, revision, "adopting our own lease write");
                self.revision = revision;
                true
            }
            _ => false,
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
