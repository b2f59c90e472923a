//! Tenant quotas (F21) as one gateway enforces them: open connections per
//! user and per tenant, messages per second per connection and per
//! tenant, message size; and each user's rate of key-directory claims. The quotas come from `sb_tenants` and apply from
//! the moment a change arrives. Counts are this gateway's own (no shared
//! counter on the message path): with N gateways a tenant may hold up to
//! N times a connection or rate quota; members per conversation are
//! checked by the conversation's writer, exactly.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use switchboard_backbone::tenants::{TenantBook, TenantQuotas};
use switchboard_protocol::{ContentLimits, ErrorCode, TenantId, UserId};

use crate::auth::Identity;
use crate::error::ApiError;

/// A token bucket: `rate` tokens per second up to `burst`.
pub(crate) struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    pub(crate) fn new(rate: f64, burst: f64) -> Self {
        Self {
            rate,
            burst,
            tokens: burst,
            at: Instant::now(),
        }
    }

    /// Changes the rate and burst, keeping the tokens there are.
    pub(crate) fn set(&mut self, rate: f64, burst: f64) {
        if (self.rate, self.burst) != (rate, burst) {
            self.rate = rate;
            self.burst = burst;
            self.tokens = self.tokens.min(burst);
        }
    }

    /// Whether the bucket has refilled (as good as a new one).
    pub(crate) fn is_full(&self) -> bool {
        self.tokens + self.at.elapsed().as_secs_f64() * self.rate >= self.burst
    }

    pub(crate) fn take(&mut self) -> bool {
        let now = Instant::now();
        self.tokens =
            (self.tokens + now.duration_since(self.at).as_secs_f64() * self.rate).min(self.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A quota's rate and burst: one second's worth, at least one message.
pub(crate) fn rate_and_burst(rate: f64) -> (f64, f64) {
    (rate, rate.max(1.0))
}

#[derive(Default)]
struct Open {
    total: u32,
    per_user: HashMap<UserId, u32>,
}

#[derive(Default)]
pub(crate) struct Quotas {
    pub(crate) book: TenantBook,
    open: Arc<Mutex<HashMap<TenantId, Open>>>,
    tenant_rates: Mutex<HashMap<TenantId, TokenBucket>>,
    claim_rates: Mutex<HashMap<(TenantId, UserId), TokenBucket>>,
}

/// Past this many users with a claim bucket, full buckets are dropped (a
/// full bucket is the same as none).
const MAX_CLAIM_BUCKETS: usize = 100_000;

/// An admitted connection; dropping it gives the place back.
pub(crate) struct Admission {
    open: Arc<Mutex<HashMap<TenantId, Open>>>,
    tenant: TenantId,
    user: UserId,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Ok(mut open) = self.open.lock()
            && let Some(o) = open.get_mut(&self.tenant)
        {
            o.total = o.total.saturating_sub(1);
            if let Some(n) = o.per_user.get_mut(&self.user) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    o.per_user.remove(&self.user);
                }
            }
            if o.total == 0 {
                open.remove(&self.tenant);
            }
        }
    }
}

fn exceeded(what: String) -> ApiError {
    ApiError::new(ErrorCode::QuotaExceeded, what)
}

impl Quotas {
    pub(crate) fn new(book: TenantBook) -> Self {
        Self {
            book,
            ..Self::default()
        }
    }

    pub(crate) fn of(&self, tenant: &TenantId) -> TenantQuotas {
        self.book.quotas(tenant)
    }

    /// Admits one more connection of `id`, or says which quota it would
    /// pass.
    pub(crate) fn admit(&self, id: &Identity) -> Result<Admission, ApiError> {
        let q = self.of(&id.tenant);
        let mut open = self
            .open
            .lock()
            .map_err(|_| ApiError::new(ErrorCode::Internal, "connection count poisoned"))?;
        let o = open.entry(id.tenant.clone()).or_default();
        let mine = o.per_user.get(&id.user).copied().unwrap_or(0);
        if let Some(max) = q.max_connections_per_user
            && mine >= max
        {
            return Err(exceeded(format!(
                "the user has {mine} connections open here, the tenant's quota is {max} per user"
            )));
        }
        if let Some(max) = q.max_connections
            && o.total >= max
        {
            return Err(exceeded(format!(
                "the tenant has {} connections open here, its quota is {max}",
                o.total
            )));
        }
        o.total += 1;
        *o.per_user.entry(id.user.clone()).or_default() += 1;
        Ok(Admission {
            open: self.open.clone(),
            tenant: id.tenant.clone(),
            user: id.user.clone(),
        })
    }

    /// Takes one message from the tenant's rate, if its quotas `q` set one.
    pub(crate) fn tenant_message(&self, tenant: &TenantId, q: &TenantQuotas) -> bool {
        let Some(rate) = q.messages_per_second else {
            return true;
        };
        let (rate, burst) = rate_and_burst(rate);
        let Ok(mut rates) = self.tenant_rates.lock() else {
            return true;
        };
        let bucket = rates
            .entry(tenant.clone())
            .or_insert_with(|| TokenBucket::new(rate, burst));
        bucket.set(rate, burst);
        bucket.take()
    }

    /// Takes one key-directory claim from the user's rate.
    pub(crate) fn key_claim(&self, id: &Identity, rate: f64, burst: f64) -> bool {
        let Ok(mut rates) = self.claim_rates.lock() else {
            return true;
        };
        if rates.len() >= MAX_CLAIM_BUCKETS {
            rates.retain(|_, b| !b.is_full());
        }
        rates
            .entry((id.tenant.clone(), id.user.clone()))
            .or_insert_with(|| TokenBucket::new(rate, burst))
            .take()
    }
}

/// The content limits for a tenant with quotas `q`: the deployment's,
/// lowered by its `max_message_bytes`.
pub(crate) fn content_limits(q: &TenantQuotas, base: &ContentLimits) -> ContentLimits {
    let mut limits = *base;
    if let Some(max) = q.max_message_bytes {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        limits.max_text_bytes = limits.max_text_bytes.min(max);
        limits.max_ciphertext_bytes = limits.max_ciphertext_bytes.min(max);
    }
    limits
}
