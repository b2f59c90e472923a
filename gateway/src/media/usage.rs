//! What each user and tenant keeps stored in media, for the storage
//! quotas checked when an upload is granted.
//!
//! The blob collector walks every stored blob anyway; the same walk adds
//! up the bytes of what it keeps, per uploader and per tenant, and the
//! sums replace the previous ones when the walk ends. Grants this gateway
//! made count on top until a walk has seen their blob, or their upload
//! URL expired before a whole walk began (so the blob was never
//! uploaded). Every gateway walks the blob store it serves (with S3 the
//! shared bucket), so the counts are the same on each and come back after
//! a restart with the first walk, which starts at once.
//!
//! The accuracy bound: what a gateway does not count is what other
//! gateways granted since its last walk began (at most `gc_every_secs`
//! plus a walk's time ago; their rate limits bound it), and, until its
//! first walk after a start ends, what was stored before. Blobs removed
//! meanwhile still count until the next walk ends. Nothing is counted
//! twice for long: a grant a walk saw leaves when that walk ends.

use std::collections::HashMap;
use std::sync::Mutex;

use switchboard_blob::{BlobRef, StoredMedia};
use switchboard_protocol::{TenantId, Timestamp, UserId};

/// Bytes per tenant and per user, as one walk added them up.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    tenants: HashMap<TenantId, u64>,
    users: HashMap<(TenantId, UserId), u64>,
}

impl Tally {
    /// Counts a blob the walk keeps.
    pub(crate) fn add(&mut self, m: &StoredMedia) {
        let t = self.tenants.entry(m.tenant.clone()).or_default();
        *t = t.saturating_add(m.size);
        if let Some(user) = &m.uploaded_by {
            let u = self
                .users
                .entry((m.tenant.clone(), user.clone()))
                .or_default();
            *u = u.saturating_add(m.size);
        }
    }
}

/// A grant not yet seen by a walk.
#[derive(Debug)]
struct Grant {
    tenant: TenantId,
    user: UserId,
    size: u64,
    /// When its upload URL expires (Unix ms).
    expires_at: i64,
    /// The walk that saw its blob, if one did.
    seen_by: Option<u64>,
}

#[derive(Debug, Default)]
struct Counts {
    /// The last whole walk's sums.
    walked: Tally,
    /// Grants of this gateway that `walked` may not hold, by blob.
    grants: HashMap<BlobRef, Grant>,
    /// `grants` summed per tenant and per user.
    granted: Tally,
    /// The walk in progress (its number and when it began), if any.
    walking: Option<(u64, i64)>,
    walks: u64,
}

/// The quota a grant would pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OverQuota {
    User { stored: u64, limit: u64 },
    Tenant { stored: u64, limit: u64 },
}

/// The storage limits of one grant: the user's and the tenant's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StorageLimits {
    pub per_user: u64,
    pub per_tenant: u64,
}

#[derive(Debug, Default)]
pub(crate) struct MediaUsage {
    counts: Mutex<Counts>,
}

impl Counts {
    fn user(&self, tenant: &TenantId, user: &UserId) -> u64 {
        let key = (tenant.clone(), user.clone());
        let walked = self.walked.users.get(&key).copied().unwrap_or(0);
        walked.saturating_add(self.granted.users.get(&key).copied().unwrap_or(0))
    }

    fn tenant(&self, tenant: &TenantId) -> u64 {
        let walked = self.walked.tenants.get(tenant).copied().unwrap_or(0);
        walked.saturating_add(self.granted.tenants.get(tenant).copied().unwrap_or(0))
    }

    fn forget(&mut self, grant: &Grant) {
        if let Some(t) = self.granted.tenants.get_mut(&grant.tenant) {
            *t = t.saturating_sub(grant.size);
            if *t == 0 {
                self.granted.tenants.remove(&grant.tenant);
            }
        }
        let key = (grant.tenant.clone(), grant.user.clone());
        if let Some(u) = self.granted.users.get_mut(&key) {
            *u = u.saturating_sub(grant.size);
            if *u == 0 {
                self.granted.users.remove(&key);
            }
        }
    }
}

impl MediaUsage {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        match self.counts.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Counts a grant of `size` bytes if the user and the tenant stay
    /// within their limits with it (exactly at a limit is within it).
    pub(crate) fn grant(
        &self,
        tenant: &TenantId,
        user: &UserId,
        blob_ref: &BlobRef,
        size: u64,
        expires_at: Timestamp,
        limits: StorageLimits,
    ) -> Result<(), OverQuota> {
        let mut counts = self.counts();
        let stored = counts.user(tenant, user);
        if stored.saturating_add(size) > limits.per_user {
            return Err(OverQuota::User {
                stored,
                limit: limits.per_user,
            });
        }
        let stored = counts.tenant(tenant);
        if stored.saturating_add(size) > limits.per_tenant {
            return Err(OverQuota::Tenant {
                stored,
                limit: limits.per_tenant,
            });
        }
        let grant = Grant {
            tenant: tenant.clone(),
            user: user.clone(),
            size,
            expires_at: expires_at.unix_ms(),
            seen_by: None,
        };
        let m = StoredMedia {
            tenant: grant.tenant.clone(),
            blob_ref: blob_ref.clone(),
            uploaded_at: Timestamp::now(),
            size,
            uploaded_by: Some(grant.user.clone()),
        };
        counts.granted.add(&m);
        if let Some(earlier) = counts.grants.insert(blob_ref.clone(), grant) {
            counts.forget(&earlier);
        }
        Ok(())
    }

    /// A walk begins; its number.
    pub(crate) fn begin_walk(&self) -> u64 {
        let mut counts = self.counts();
        counts.walks += 1;
        let walk = counts.walks;
        counts.walking = Some((walk, Timestamp::now().unix_ms()));
        walk
    }

    /// The walk found this blob: a grant of it is counted by the walk.
    pub(crate) fn seen(&self, walk: u64, blob_ref: &BlobRef) {
        let mut counts = self.counts();
        if let Some(g) = counts.grants.get_mut(blob_ref) {
            g.seen_by = Some(walk);
        }
    }

    /// The walk is over: its sums replace the last, and the grants it saw
    /// or that expired before it began leave.
    pub(crate) fn finish_walk(&self, walk: u64, tally: Tally) {
        let mut counts = self.counts();
        let Some((current, began)) = counts.walking else {
            return;
        };
        if current != walk {
            return;
        }
        counts.walking = None;
        counts.walked = tally;
        let done: Vec<BlobRef> = counts
            .grants
            .iter()
            .filter(|(_, g)| g.seen_by == Some(walk) || g.expires_at < began)
            .map(|(b, _)| b.clone())
            .collect();
        for b in done {
            if let Some(g) = counts.grants.remove(&b) {
                counts.forget(&g);
            }
        }
    }

    /// A walk that failed: the grants it saw stay until one ends.
    pub(crate) fn abandon_walk(&self, walk: u64) {
        let mut counts = self.counts();
        if counts.walking.is_some_and(|(w, _)| w == walk) {
            counts.walking = None;
        }
        for g in counts.grants.values_mut() {
            if g.seen_by == Some(walk) {
                g.seen_by = None;
            }
        }
    }

    /// What the user and the tenant have stored, as counted now.
    #[cfg(test)]
    fn stored(&self, tenant: &TenantId, user: &UserId) -> (u64, u64) {
        let counts = self.counts();
        (counts.user(tenant, user), counts.tenant(tenant))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: StorageLimits = StorageLimits {
        per_user: 100,
        per_tenant: 250,
    };

    fn ids(t: &str, u: &str) -> (TenantId, UserId) {
        (TenantId::new(t).unwrap(), UserId::new(u).unwrap())
    }

    fn later() -> Timestamp {
        Timestamp::from_unix_ms(Timestamp::now().unix_ms() + 900_000)
    }

    fn grant(usage: &MediaUsage, t: &str, u: &str, size: u64) -> Result<BlobRef, OverQuota> {
        let (t, u) = ids(t, u);
        let b = BlobRef::generate().unwrap();
        usage.grant(&t, &u, &b, size, later(), LIMITS).map(|()| b)
    }

    fn stored(t: &str, u: &str, b: &BlobRef, size: u64) -> StoredMedia {
        let (tenant, user) = ids(t, u);
        StoredMedia {
            tenant,
            blob_ref: b.clone(),
            uploaded_at: Timestamp::now(),
            size,
            uploaded_by: Some(user),
        }
    }

    #[test]
    fn a_user_and_a_tenant_grant_up_to_their_limits_and_not_past() {
        let usage = MediaUsage::default();
        grant(&usage, "acme", "alice", 60).unwrap();
        grant(&usage, "acme", "alice", 40).unwrap();
        assert_eq!(
            grant(&usage, "acme", "alice", 1),
            Err(OverQuota::User {
                stored: 100,
                limit: 100
            })
        );
        grant(&usage, "acme", "bob", 100).unwrap();
        grant(&usage, "acme", "carol", 50).unwrap();
        assert_eq!(
            grant(&usage, "acme", "dave", 1),
            Err(OverQuota::Tenant {
                stored: 250,
                limit: 250
            })
        );
        // Another tenant is counted apart.
        grant(&usage, "globex", "alice", 100).unwrap();
    }

    #[test]
    fn a_walk_takes_over_what_it_saw_and_drops_what_was_never_uploaded() {
        let usage = MediaUsage::default();
        let uploaded = grant(&usage, "acme", "alice", 30).unwrap();
        let (t, u) = ids("acme", "alice");
        let expired = BlobRef::generate().unwrap();
        usage
            .grant(&t, &u, &expired, 20, Timestamp::from_unix_ms(0), LIMITS)
            .unwrap();
        let pending = grant(&usage, "acme", "alice", 10).unwrap();
        assert_eq!(usage.stored(&t, &u), (60, 60));

        // The walk finds the uploaded blob and one stored long ago.
        let walk = usage.begin_walk();
        let mut tally = Tally::default();
        for m in [
            stored("acme", "alice", &uploaded, 30),
            stored("acme", "alice", &BlobRef::generate().unwrap(), 5),
        ] {
            usage.seen(walk, &m.blob_ref);
            tally.add(&m);
        }
        // Counted twice while the walk runs, never less.
        assert_eq!(usage.stored(&t, &u), (60, 60));
        usage.finish_walk(walk, tally);
        // 35 walked, 10 granted and not yet seen; the expired grant left.
        assert_eq!(usage.stored(&t, &u), (45, 45));
        let walk = usage.begin_walk();
        let mut tally = Tally::default();
        let m = stored("acme", "alice", &pending, 10);
        usage.seen(walk, &m.blob_ref);
        tally.add(&m);
        usage.finish_walk(walk, tally);
        assert_eq!(usage.stored(&t, &u), (10, 10), "what is stored now");
    }

    #[test]
    fn an_abandoned_walk_changes_nothing() {
        let usage = MediaUsage::default();
        let b = grant(&usage, "acme", "alice", 30).unwrap();
        let walk = usage.begin_walk();
        usage.seen(walk, &b);
        usage.abandon_walk(walk);
        usage.finish_walk(walk, Tally::default());
        let (t, u) = ids("acme", "alice");
        assert_eq!(usage.stored(&t, &u), (30, 30));
    }
}
