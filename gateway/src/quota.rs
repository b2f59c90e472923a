//! Tenant quotas (F21) as one gateway enforces them: open connections per
//! user and per tenant, messages per second per connection and per
//! tenant, message size; and each user's rate of WebSocket connects and of
//! key-directory claims. The quotas come from `sb_tenants` and apply from
//! the moment a change arrives. Counts are this gateway's own (no shared
//! counter on the message path): with N gateways a tenant may hold up to
//! N times a connection or rate quota; members per conversation are
//! checked by the conversation's writer, exactly.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use switchboard_backbone::records::tenants::{TenantBook, TenantQuotas};
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
        self.take_n(1.0)
    }

    /// Takes `n` tokens at once, or none.
    pub(crate) fn take_n(&mut self, n: f64) -> bool {
        let now = Instant::now();
        self.tokens =
            (self.tokens + now.duration_since(self.at).as_secs_f64() * self.rate).min(self.burst);
        self.at = now;
        if self.tokens >= n {
            self.tokens -= n;
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

/// Token buckets by key (a user, a tenant), made on first use. Past
/// `MAX_BUCKETS` keys, full buckets are dropped: a full bucket is the same
/// as none, so memory stays bounded by the keys that are busy.
pub(crate) struct Buckets<K> {
    map: Mutex<HashMap<K, TokenBucket>>,
}

const MAX_BUCKETS: usize = 100_000;

impl<K> Default for Buckets<K> {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> Buckets<K> {
    /// Takes `n` from `key`'s bucket of `rate` per second up to `burst`.
    pub(crate) fn take(&self, key: &K, rate: f64, burst: f64, n: f64) -> bool {
        let Ok(mut map) = self.map.lock() else {
            return true;
        };
        if map.len() >= MAX_BUCKETS && !map.contains_key(key) {
            map.retain(|_, b| !b.is_full());
        }
        let bucket = map
            .entry(key.clone())
            .or_insert_with(|| TokenBucket::new(rate, burst));
        bucket.set(rate, burst);
        bucket.take_n(n)
    }
}

type UserKey = (TenantId, UserId);

#[derive(Default)]
pub(crate) struct Quotas {
    pub(crate) book: TenantBook,
    open: Arc<Mutex<HashMap<TenantId, Open>>>,
    tenant_rates: Mutex<HashMap<TenantId, TokenBucket>>,
    claim_rates: Buckets<UserKey>,
    /// REST requests of each user.
    pub(crate) requests: Buckets<UserKey>,
    /// WebSocket connects of each user (each writes the session registry).
    connects: Buckets<UserKey>,
    /// Members each user added (creates and adds).
    pub(crate) members_added: Buckets<UserKey>,
    /// Upload grants of each user, and the bytes they grant, per user and
    /// per tenant.
    pub(crate) uploads: Buckets<UserKey>,
    pub(crate) upload_bytes: Buckets<UserKey>,
    pub(crate) tenant_upload_bytes: Buckets<TenantId>,
    /// Plugin replays over history of each tenant, and the tenants with
    /// one running on this gateway.
    pub(crate) replays: Buckets<TenantId>,
    pub(crate) replaying: Arc<Mutex<std::collections::HashSet<TenantId>>>,
}

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
    /// pass. `default_per_user` applies when the tenant sets no
    /// `max_connections_per_user`.
    pub(crate) fn admit(
        &self,
        id: &Identity,
        default_per_user: u32,
    ) -> Result<Admission, ApiError> {
        let mut q = self.of(&id.tenant);
        q.max_connections_per_user = q.max_connections_per_user.or(Some(default_per_user));
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

    /// Takes one WebSocket connect from the user's rate.
    pub(crate) fn connect(&self, id: &Identity, rate: f64, burst: f64) -> bool {
        self.connects
            .take(&(id.tenant.clone(), id.user.clone()), rate, burst, 1.0)
    }

    /// Takes one key-directory claim from the user's rate.
    pub(crate) fn key_claim(&self, id: &Identity, rate: f64, burst: f64) -> bool {
        self.claim_rates
            .take(&(id.tenant.clone(), id.user.clone()), rate, burst, 1.0)
    }
}

/// A rate of `per_minute` as a token bucket's rate and burst.
pub(crate) fn per_minute(per_minute: f64) -> (f64, f64) {
    (per_minute / 60.0, per_minute.max(1.0))
}

/// A rate of `per_hour` as a token bucket's rate and burst.
pub(crate) fn per_hour(per_hour: f64) -> (f64, f64) {
    (per_hour / 3600.0, per_hour.max(1.0))
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
