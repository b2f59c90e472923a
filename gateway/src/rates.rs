//! Every rate a gateway holds its clients to, in one place, each with the
//! refusal it answers: token buckets per connection ([`ConnectionRates`]:
//! messages, typing, acks) and per user or tenant across connections
//! ([`Rates`]: messages, REST requests, WebSocket connects, members
//! added, upload grants and their bytes, key claims, plugin replays).
//!
//! The rates are the deployment's (`[limits]`), but for messages, where a
//! tenant's quotas (`sb_tenants`) replace them from the next message on.
//! Counts are this gateway's own, with no shared counter on the message
//! path: with N gateways a user or tenant may reach N times a rate.
//! Counts (how many at once) are `quota.rs`'s.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use switchboard_nats::records::tenants::TenantQuotas;
use switchboard_protocol::{ErrorCode, TenantId, UserId};

use crate::auth::Identity;
use crate::config::Limits;
use crate::error::ApiError;
use crate::server::ClientKey;

/// A token bucket: `rate` tokens per second up to `burst`.
pub(crate) struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// Whether `n` tokens are there now (refilled), taking none.
    pub(crate) fn has(&mut self, n: f64) -> bool {
        let now = Instant::now();
        self.tokens =
            (self.tokens + now.duration_since(self.at).as_secs_f64() * self.rate).min(self.burst);
        self.at = now;
        self.tokens >= n
    }

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
        if self.has(n) {
            self.tokens -= n;
            true
        } else {
            false
        }
    }
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
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_BUCKETS && !map.contains_key(key) {
            map.retain(|_, b| !b.is_full());
        }
        let bucket = map
            .entry(key.clone())
            .or_insert_with(|| TokenBucket::new(rate, burst));
        bucket.set(rate, burst);
        bucket.take_n(n)
    }

    /// Whether `key`'s bucket holds `n` tokens now, taking none.
    pub(crate) fn has(&self, key: &K, rate: f64, burst: f64, n: f64) -> bool {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get_mut(key) {
            Some(bucket) => {
                bucket.set(rate, burst);
                bucket.has(n)
            }
            None => burst >= n,
        }
    }
}

/// A quota's rate and burst: one second's worth, at least one message.
pub(crate) fn rate_and_burst(rate: f64) -> (f64, f64) {
    (rate, rate.max(1.0))
}

/// A rate of `per_minute` as a token bucket's rate and burst.
pub(crate) fn per_minute(per_minute: f64) -> (f64, f64) {
    (per_minute / 60.0, per_minute.max(1.0))
}

/// A rate of `per_hour` as a token bucket's rate and burst.
pub(crate) fn per_hour(per_hour: f64) -> (f64, f64) {
    (per_hour / 3600.0, per_hour.max(1.0))
}

fn limited(what: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::RateLimited, what)
}

type UserKey = (TenantId, UserId);

/// One of the user's `what` (a report, a profile change), at most
/// `per_minute` of them a minute, counted in `buckets`.
fn one_per_minute(
    buckets: &Buckets<UserKey>,
    id: &Identity,
    per_minute: f64,
    what: &str,
) -> Result<(), ApiError> {
    let (rate, burst) = self::per_minute(per_minute);
    if buckets.take(&user_of(id), rate, burst, 1.0) {
        Ok(())
    } else {
        Err(limited(format!(
            "more than {per_minute} {what} per minute by this user; retry later"
        )))
    }
}

fn user_of(id: &Identity) -> UserKey {
    (id.tenant.clone(), id.user.clone())
}

/// The rates of one connection's frames.
pub(crate) struct ConnectionRates {
    messages: TokenBucket,
    typing: TokenBucket,
    /// `ack_delivered` and `ack_read` frames.
    acks: TokenBucket,
}

impl ConnectionRates {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            messages: TokenBucket::new(limits.sends_per_second, limits.send_burst),
            typing: TokenBucket::new(limits.typing_per_second, limits.typing_burst),
            acks: TokenBucket::new(limits.acks_per_second, limits.ack_burst),
        }
    }

    pub(crate) fn typing(&mut self) -> Result<(), ApiError> {
        if self.typing.take() {
            Ok(())
        } else {
            Err(limited(
                "typing indicators too often; one start every few seconds is enough",
            ))
        }
    }

    /// An ack past the rate is dropped; a later one covers it, as marks
    /// only move forward.
    pub(crate) fn ack(&mut self, limits: &Limits) -> Result<(), ApiError> {
        if self.acks.take() {
            Ok(())
        } else {
            Err(limited(format!(
                "more than {} acks per second on this connection; ack the highest seq only",
                limits.acks_per_second
            )))
        }
    }
}

/// The rates of every user and tenant on this gateway.
pub(crate) struct Rates {
    limits: Limits,
    rest_requests: Buckets<UserKey>,
    /// WebSocket connects (each writes the session registry).
    connects: Buckets<UserKey>,
    /// Messages (sends, edits, deletes) of a user across connections, and
    /// of a tenant.
    user_messages: Buckets<UserKey>,
    tenant_messages: Buckets<TenantId>,
    /// Members added (creates and adds).
    members_added: Buckets<UserKey>,
    /// Upload grants, and the bytes they grant per user and per tenant.
    uploads: Buckets<UserKey>,
    upload_bytes: Buckets<UserKey>,
    tenant_upload_bytes: Buckets<TenantId>,
    key_claims: Buckets<UserKey>,
    reports: Buckets<UserKey>,
    profile_updates: Buckets<UserKey>,
    exports: Buckets<UserKey>,
    /// Plugin replays over history, and the tenants with one running.
    replays: Buckets<TenantId>,
    replaying: Arc<Mutex<HashSet<TenantId>>>,
    /// Wrong operator tokens, by client address.
    operator_failures: Buckets<ClientKey>,
}

impl Rates {
    /// Whether `client` may try the operator token now: not after
    /// `operator_failures_per_minute` wrong ones within about a minute,
    /// right token or not, so that guessing it stays slow.
    pub(crate) fn operator_allowed(&self, client: ClientKey) -> Result<(), ApiError> {
        let (rate, burst) = self.operator_rate();
        if self.operator_failures.has(&client, rate, burst, 1.0) {
            Ok(())
        } else {
            Err(limited(
                "too many wrong operator tokens from this address; try again in a minute",
            ))
        }
    }

    /// A wrong operator token from `client`.
    pub(crate) fn operator_failed(&self, client: ClientKey) {
        let (rate, burst) = self.operator_rate();
        self.operator_failures.take(&client, rate, burst, 1.0);
    }

    fn operator_rate(&self) -> (f64, f64) {
        let per_minute = f64::from(self.limits.operator_failures_per_minute.max(1));
        (per_minute / 60.0, per_minute)
    }

    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            limits,
            rest_requests: Buckets::default(),
            connects: Buckets::default(),
            user_messages: Buckets::default(),
            tenant_messages: Buckets::default(),
            members_added: Buckets::default(),
            uploads: Buckets::default(),
            upload_bytes: Buckets::default(),
            tenant_upload_bytes: Buckets::default(),
            key_claims: Buckets::default(),
            reports: Buckets::default(),
            profile_updates: Buckets::default(),
            exports: Buckets::default(),
            replays: Buckets::default(),
            replaying: Arc::default(),
            operator_failures: Buckets::default(),
        }
    }

    /// One message (a send, edit or delete) of `id` on a connection with
    /// `connection`'s rates: the connection's rate (or the tenant's quota
    /// for one), the user's across their connections, and the tenant's
    /// quota if it sets one.
    pub(crate) fn message(
        &self,
        connection: &mut ConnectionRates,
        id: &Identity,
        quotas: &TenantQuotas,
    ) -> Result<(), ApiError> {
        let l = &self.limits;
        let (rate, burst) = match quotas.messages_per_second_per_connection {
            Some(rate) => rate_and_burst(rate),
            None => (l.sends_per_second, l.send_burst),
        };
        connection.messages.set(rate, burst);
        if !connection.messages.take() {
            return Err(limited(format!(
                "more than {rate} messages per second on this connection; slow down and retry"
            )));
        }
        self.user_message(id, quotas)
    }

    /// One message of `id` as their user and tenant count it, wherever it
    /// comes from (a connection, or REST: bots count like users): the
    /// user's rate across their connections and requests, and the
    /// tenant's quota if it sets one.
    pub(crate) fn user_message(
        &self,
        id: &Identity,
        quotas: &TenantQuotas,
    ) -> Result<(), ApiError> {
        let l = &self.limits;
        let (rate, burst) = (l.sends_per_second_per_user, l.send_burst_per_user);
        if !self.user_messages.take(&user_of(id), rate, burst, 1.0) {
            return Err(limited(format!(
                "more than {rate} messages per second from this user's connections; slow down and retry"
            )));
        }
        if let Some(rate) = quotas.messages_per_second {
            let (rate, burst) = rate_and_burst(rate);
            if !self.tenant_messages.take(&id.tenant, rate, burst, 1.0) {
                return Err(limited(
                    "the tenant's messages per second are spent; retry shortly",
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn rest_request(&self, id: &Identity) -> Result<(), ApiError> {
        let (rate, burst) = (
            self.limits.rest_requests_per_second,
            self.limits.rest_request_burst,
        );
        if self.rest_requests.take(&user_of(id), rate, burst, 1.0) {
            Ok(())
        } else {
            Err(limited(format!(
                "more than {rate} requests per second from this user; slow down and retry"
            )))
        }
    }

    pub(crate) fn connect(&self, id: &Identity) -> Result<(), ApiError> {
        let (rate, burst) = (self.limits.connects_per_second, self.limits.connect_burst);
        if self.connects.take(&user_of(id), rate, burst, 1.0) {
            Ok(())
        } else {
            Err(limited(format!(
                "more than {rate} connects per second by this user; back off and retry"
            )))
        }
    }

    /// `n` members added by `id` (a create counts its members).
    pub(crate) fn members_added(&self, id: &Identity, n: usize) -> Result<(), ApiError> {
        let per_minute = self.limits.members_added_per_minute;
        let (rate, burst) = self::per_minute(per_minute);
        if self.members_added.take(&user_of(id), rate, burst, n as f64) {
            Ok(())
        } else {
            Err(limited(format!(
                "more than {per_minute} members added per minute by this user; retry later"
            )))
        }
    }

    /// One upload grant of `size` bytes: grants per minute of the user,
    /// bytes per hour of the user and of the tenant.
    pub(crate) fn upload_grant(&self, id: &Identity, size: u64) -> Result<(), ApiError> {
        let l = &self.limits;
        let user = user_of(id);
        let (rate, burst) = per_minute(l.uploads_per_minute);
        if !self.uploads.take(&user, rate, burst, 1.0) {
            return Err(limited(format!(
                "more than {} uploads per minute by this user; retry later",
                l.uploads_per_minute
            )));
        }
        let bytes = size as f64;
        let (rate, burst) = per_hour(l.upload_bytes_per_hour_per_user as f64);
        if !self.upload_bytes.take(&user, rate, burst, bytes) {
            return Err(limited(format!(
                "this user's uploads passed {} bytes in the last hour; retry later",
                l.upload_bytes_per_hour_per_user
            )));
        }
        let (rate, burst) = per_hour(l.upload_bytes_per_hour_per_tenant as f64);
        if !self
            .tenant_upload_bytes
            .take(&id.tenant, rate, burst, bytes)
        {
            return Err(limited(format!(
                "the tenant's uploads passed {} bytes in the last hour; retry later",
                l.upload_bytes_per_hour_per_tenant
            )));
        }
        Ok(())
    }

    /// One report by `id`: a flood of them is refused.
    pub(crate) fn report(&self, id: &Identity) -> Result<(), ApiError> {
        one_per_minute(&self.reports, id, self.limits.reports_per_minute, "reports")
    }

    /// One profile change by `id` (v1.3): each is an event to everyone
    /// who shares a conversation with the user changed.
    pub(crate) fn profile_update(&self, id: &Identity) -> Result<(), ApiError> {
        let per_minute = self.limits.profile_updates_per_minute;
        one_per_minute(&self.profile_updates, id, per_minute, "profile changes")
    }

    /// One export of `id`'s own data.
    pub(crate) fn export(&self, id: &Identity) -> Result<(), ApiError> {
        let per_hour = self.limits.exports_per_hour;
        let (rate, burst) = self::per_hour(per_hour);
        if self.exports.take(&user_of(id), rate, burst, 1.0) {
            Ok(())
        } else {
            Err(limited(format!(
                "more than {per_hour} exports per hour by this user; retry later"
            )))
        }
    }

    pub(crate) fn key_claim(&self, id: &Identity) -> Result<(), ApiError> {
        let (rate, burst) = (
            self.limits.key_claims_per_second,
            self.limits.key_claim_burst,
        );
        if self.key_claims.take(&user_of(id), rate, burst, 1.0) {
            Ok(())
        } else {
            Err(limited(format!(
                "more than {rate} key claims per second; slow down"
            )))
        }
    }

    /// A plugin replay of `tenant`: one at a time per tenant on this
    /// gateway, within its rate; the mark goes when the guard is dropped.
    pub(crate) fn plugin_replay(&self, tenant: &TenantId) -> Result<ReplayGuard, ApiError> {
        let per_minute = self.limits.plugin_replays_per_minute;
        let (rate, burst) = self::per_minute(per_minute);
        let mut tenants = self
            .replaying
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if tenants.contains(tenant) {
            return Err(limited(
                "a replay of this tenant is running on this gateway; retry when it ends",
            ));
        }
        if !self.replays.take(tenant, rate, burst, 1.0) {
            return Err(limited(format!(
                "more than {per_minute} replays per minute by this tenant; retry later"
            )));
        }
        tenants.insert(tenant.clone());
        Ok(ReplayGuard {
            running: self.replaying.clone(),
            tenant: tenant.clone(),
        })
    }
}

/// A tenant's running replay.
pub(crate) struct ReplayGuard {
    running: Arc<Mutex<HashSet<TenantId>>>,
    tenant: TenantId,
}

impl Drop for ReplayGuard {
    fn drop(&mut self) {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.tenant);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn id(user: &str) -> Identity {
        Identity {
            tenant: TenantId::new("t").unwrap(),
            user: UserId::new(user).unwrap(),
            device: switchboard_protocol::DeviceId::new("d").unwrap(),
            admin: false,
            bot: false,
            expires_at: u64::MAX,
        }
    }

    /// A user's messages are limited across their connections: two
    /// connections together get the user's burst, no more.
    #[test]
    fn a_users_messages_are_limited_across_connections() {
        let limits = Limits {
            sends_per_second: 1.0,
            send_burst: 100.0,
            sends_per_second_per_user: 0.001,
            send_burst_per_user: 5.0,
            ..Limits::default()
        };
        let rates = Rates::new(limits.clone());
        let (mut a, mut b) = (ConnectionRates::new(&limits), ConnectionRates::new(&limits));
        let q = TenantQuotas::default();
        let alice = id("alice");
        for i in 0..5 {
            let conn = if i % 2 == 0 { &mut a } else { &mut b };
            assert!(rates.message(conn, &alice, &q).is_ok(), "message {i}");
        }
        let past = rates.message(&mut b, &alice, &q).unwrap_err();
        assert_eq!(past.code, ErrorCode::RateLimited);
        assert!(past.message.contains("this user's connections"), "{past}");
        // Another user has a bucket of their own.
        assert!(rates.message(&mut a, &id("bob"), &q).is_ok());
    }

    #[test]
    fn a_tenant_quota_limits_the_tenant_and_replaces_the_connection_rate() {
        let limits = Limits::default();
        let rates = Rates::new(limits.clone());
        let mut conn = ConnectionRates::new(&limits);
        let q = TenantQuotas {
            messages_per_second: Some(2.0),
            ..TenantQuotas::default()
        };
        assert!(rates.message(&mut conn, &id("a"), &q).is_ok());
        assert!(rates.message(&mut conn, &id("b"), &q).is_ok());
        let spent = rates.message(&mut conn, &id("c"), &q).unwrap_err();
        assert!(spent.message.contains("tenant"), "{spent}");
        let per_connection = TenantQuotas {
            messages_per_second_per_connection: Some(1.0),
            ..TenantQuotas::default()
        };
        let mut fresh = ConnectionRates::new(&limits);
        assert!(rates.message(&mut fresh, &id("d"), &per_connection).is_ok());
        assert!(
            rates
                .message(&mut fresh, &id("d"), &per_connection)
                .is_err()
        );
    }

    #[test]
    fn one_replay_at_a_time_per_tenant() {
        let rates = Rates::new(Limits::default());
        let tenant = TenantId::new("t").unwrap();
        let running = rates.plugin_replay(&tenant).unwrap();
        assert!(rates.plugin_replay(&tenant).is_err());
        drop(running);
        assert!(rates.plugin_replay(&tenant).is_ok());
    }
}
