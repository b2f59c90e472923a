//! Each tenant's share of the send stage, so that one tenant's slow or
//! hanging endpoints hold only its own share.
//!
//! Every worker runs at most `concurrency` provider calls at once, and at
//! most `tenant_concurrency` of them for one tenant. A job of a tenant at
//! its share goes back to JetStream with a delay (a nak, which is no
//! attempt: attempts are counted in a header, see `send.rs`) instead of
//! waiting here, so the stage reads on and other tenants' jobs behind it
//! go out. A job sent back stays among the consumer's unacknowledged
//! messages until it returns; the deliver stage keeps each tenant's
//! queued sends near `tenant_max_queued`, so one tenant cannot fill the
//! consumer's `max_ack_pending` on its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Provider calls in progress, per tenant, in this process.
pub(crate) struct TenantShares {
    per_tenant: usize,
    busy: Mutex<HashMap<String, usize>>,
}

/// One call of a tenant in progress; its share is given back on drop.
pub(crate) struct Slot {
    shares: Arc<TenantShares>,
    tenant: String,
}

impl TenantShares {
    pub(crate) fn new(per_tenant: usize) -> Arc<Self> {
        Arc::new(Self {
            per_tenant: per_tenant.max(1),
            busy: Mutex::default(),
        })
    }

    /// A slot of the tenant's share, if it has one free.
    pub(crate) fn try_take(self: &Arc<Self>, tenant: &str) -> Option<Slot> {
        let mut busy = match self.busy.lock() {
            Ok(b) => b,
            Err(poisoned) => poisoned.into_inner(),
        };
        let n = busy.entry(tenant.to_owned()).or_insert(0);
        if *n >= self.per_tenant {
            return None;
        }
        *n += 1;
        Some(Slot {
            shares: self.clone(),
            tenant: tenant.to_owned(),
        })
    }

    #[cfg(test)]
    fn busy(&self, tenant: &str) -> usize {
        self.busy
            .lock()
            .map(|b| b.get(tenant).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut busy = match self.shares.busy.lock() {
            Ok(b) => b,
            Err(poisoned) => poisoned.into_inner(),
        };
        // Idle tenants leave no entry behind.
        if let Some(n) = busy.get_mut(&self.tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                busy.remove(&self.tenant);
            }
        }
    }
}

/// How long a job of a tenant at its share waits before it comes back,
/// after `delivered` deliveries: 1 s, 2 s, 4 s ... 16 s, so that a
/// tenant stuck for long costs little to look at again.
pub(crate) fn deferral(delivered: i64) -> Duration {
    let doublings = u32::try_from(delivered.saturating_sub(1).clamp(0, 4)).unwrap_or(4);
    Duration::from_secs(1 << doublings)
}

/// The tenant part of a job's subject (`sb.push.send.<tenant>`): the
/// share's key, read without decoding the job.
pub(crate) fn tenant_token(subject: &str) -> &str {
    subject.rsplit('.').next().unwrap_or(subject)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_takes_its_share_and_no_more() {
        let shares = TenantShares::new(3);
        let mut held: Vec<Slot> = (0..3).filter_map(|_| shares.try_take("a")).collect();
        assert_eq!(held.len(), 3, "the share itself");
        assert!(shares.try_take("a").is_none(), "one past the share");
        // Another tenant is not affected.
        let b = shares.try_take("b");
        assert!(b.is_some());
        held.pop();
        assert!(shares.try_take("a").is_some(), "a slot given back is free");
        drop(b);
        assert_eq!(shares.busy("b"), 0);
    }

    #[test]
    fn deferrals_grow_and_stop_growing() {
        let waits: Vec<u64> = [0, 1, 2, 3, 4, 5, 6, i64::MAX]
            .iter()
            .map(|d| deferral(*d).as_secs())
            .collect();
        assert_eq!(waits, [1, 1, 2, 4, 8, 16, 16, 16]);
    }

    #[test]
    fn the_share_key_is_the_subjects_tenant() {
        assert_eq!(tenant_token("sb.push.send.acme"), "acme");
    }
}
