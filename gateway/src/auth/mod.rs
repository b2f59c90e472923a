//! Token verification (F20): every request carries a JWT signed with its
//! tenant's key.
//!
//! The tenant is read from the unverified claims only to pick the keys;
//! nothing else is trusted until a signature verifies. A tenant's keys
//! are its record's (or the configuration file's): HS256 secrets and
//! Ed25519 keys; and, when it names a `jwks_url`, the signing keys its
//! identity provider publishes there (RS256, ES256, EdDSA; `jwks.rs`).
//! `keys.rs` says which key may verify which token.
//!
//! Past the signature, a token must be within its time (`exp`, `nbf`, both
//! with the leeway), no longer-lived than `max_token_lifetime_secs`, and
//! carry the tenant's `iss` and `aud` where its record requires them
//! (`claims.rs`). A tenant's `Access` holds its keys beside those rules,
//! whatever source the keys come from (the file, `sb_tenants`).

mod claims;
mod error;
mod jwks;
mod keys;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Validation;
use switchboard_protocol::{TenantId, Timestamp, UserId};

use switchboard_nats::records::bans::{BanBook, BanKind, OnBanChange};
use switchboard_nats::records::tenants::TenantRecord;

use crate::config::TenantConfig;
use claims::{ClaimRules, Claims, TenantOnly};
use jwks::{Fetch, Fetched, JwksCache};
use keys::{Key, TokenHeader, keys_of};

pub use claims::Identity;
pub use error::{AuthError, KeyError};
pub use jwks::JwksSettings;

/// The latest change of the tenants' keys or bans.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyChange {
    /// Changes so far.
    pub count: u64,
    /// The tenant of the latest.
    pub tenant: Option<TenantId>,
    /// The one user it concerns (a ban), if only one.
    pub user: Option<UserId>,
}

impl KeyChange {
    /// Whether a session of `user` in `tenant` that saw change `seen` last
    /// must check its token again: its tenant's keys or its user's ban
    /// changed, or changes were coalesced and one of the missed ones may
    /// have concerned it.
    pub fn concerns(&self, tenant: &TenantId, user: &UserId, seen: u64) -> bool {
        self.count != seen.wrapping_add(1)
            || (self.tenant.as_ref().is_none_or(|t| t == tenant)
                && self.user.as_ref().is_none_or(|u| u == user))
    }
}

/// What a tenant's tokens need: the keys that verify them, the claims
/// they must carry, and the web origins browsers may use them from.
#[derive(Default)]
struct Access {
    keys: Vec<Key>,
    rules: ClaimRules,
    origins: Vec<String>,
}

type Keys = Arc<Access>;

/// A tenant's entry of the configuration file or record, as `Access`
/// and the URL of its key set.
fn access_of(
    tenant: &str,
    hs256: &[String],
    ed25519: &[String],
    origins: &[String],
    rules: ClaimRules,
) -> Result<Access, KeyError> {
    // The rule the operator API and `switchboard tenant` apply.
    switchboard_nats::records::tenants::check_origins(origins).map_err(|e| KeyError::Invalid {
        tenant: tenant.to_owned(),
        message: e.to_string(),
    })?;
    Ok(Access {
        keys: keys_of(tenant, hs256, ed25519)?,
        rules,
        origins: origins.to_vec(),
    })
}

/// The verification keys of every tenant: those of the configuration
/// file, replaced by the `sb_tenants` record of the same tenant while
/// there is one (`apply_record`), and the key sets they point to.
pub struct TenantDirectory {
    keys: RwLock<HashMap<TenantId, Keys>>,
    from_file: HashMap<TenantId, Keys>,
    /// The file's key set URLs, for a tenant whose record goes.
    jwks_from_file: HashMap<TenantId, String>,
    jwks: JwksCache,
    /// Seconds a token is still accepted past its `exp` and before its
    /// `nbf` (clock skew).
    leeway_secs: u64,
    /// The longest a token may be valid (`Limits::max_token_lifetime_secs`).
    max_lifetime_secs: u64,
    /// Counts key changes, with the tenant of the latest: open sessions
    /// of that tenant re-check their token, so a removed key or a deleted
    /// tenant ends them within moments. A ban is a change of one user.
    changes: tokio::sync::watch::Sender<KeyChange>,
    /// Tenant-wide bans (v1.3): a banned user's token is refused however
    /// well it is signed.
    bans: BanBook,
}

impl TenantDirectory {
    /// The directory of the configuration file's tenants; tokens are
    /// accepted up to `leeway_secs` past their `exp` (and before their
    /// `nbf`), and may live as long as the default
    /// `max_token_lifetime_secs` (`with_max_lifetime` changes it). Key
    /// sets are fetched with the default settings (`with_jwks` changes
    /// them) once `follow_key_sets` runs.
    pub fn from_config(tenants: &[TenantConfig], leeway_secs: u64) -> Result<Self, KeyError> {
        let mut keys: HashMap<TenantId, Access> = HashMap::new();
        let mut jwks_from_file = HashMap::new();
        for t in tenants {
            let id = TenantId::new(t.id.clone()).map_err(|source| KeyError::BadId {
                tenant: t.id.clone(),
                source,
            })?;
            let entry = access_of(
                &t.id,
                &t.hs256_secrets,
                &t.ed25519_public_keys,
                &t.allowed_origins,
                ClaimRules::default(),
            )?;
            if let Some(url) = &t.jwks_url {
                if !switchboard_nats::records::tenants::is_http_url(url) {
                    return Err(KeyError::Invalid {
                        tenant: t.id.clone(),
                        message: format!("jwks_url {url:?} is not an http(s) URL"),
                    });
                }
                jwks_from_file.insert(id.clone(), url.clone());
            }
            let access = keys.entry(id).or_default();
            access.keys.extend(entry.keys);
            access.origins.extend(entry.origins);
        }
        let from_file: HashMap<TenantId, Keys> =
            keys.into_iter().map(|(t, k)| (t, Arc::new(k))).collect();
        let directory = Self {
            keys: RwLock::new(from_file.clone()),
            from_file,
            jwks: JwksCache::new(JwksSettings::default()),
            jwks_from_file,
            leeway_secs,
            max_lifetime_secs: crate::config::Limits::default().max_token_lifetime_secs,
            changes: tokio::sync::watch::Sender::new(KeyChange::default()),
            bans: BanBook::default(),
        };
        for (tenant, url) in &directory.jwks_from_file {
            directory.jwks.point(tenant, Some(url));
        }
        Ok(directory)
    }

    /// Tokens valid for longer than `secs` (`exp - iat`) are refused.
    pub fn with_max_lifetime(mut self, secs: u64) -> Self {
        self.max_lifetime_secs = secs;
        self
    }

    /// The bans tokens are checked against: the process's follower of
    /// `sb_tenant_bans` fills it (and calls `ban_changed`).
    pub fn bans(&self) -> &BanBook {
        &self.bans
    }

    /// Loads the tenant-wide bans of `sb_tenant_bans` into `bans` and
    /// follows their changes for as long as the process runs; returns
    /// once the bans of the moment are loaded.
    pub async fn follow_bans(
        directory: &Arc<Self>,
        js: &async_nats::jetstream::Context,
    ) -> Result<(), switchboard_nats::BackboneError> {
        let d = directory.clone();
        // A shadow ban changes nothing a session does: its user's writers
        // follow the bucket themselves.
        let on_change: OnBanChange = Arc::new(move |kind, tenant, user| {
            if kind == BanKind::Tenant {
                d.ban_changed(tenant, user)
            }
        });
        // The follower runs as long as the process; its handle is not
        // needed.
        let _follower = directory.bans.follow(js, on_change).await?;
        Ok(())
    }

    /// `user`'s ban in `tenant` changed (`bans` has the change): their
    /// open sessions check their token again, and a banned one ends.
    pub fn ban_changed(&self, tenant: &TenantId, user: &UserId) {
        self.changes.send_modify(|c| {
            c.count = c.count.wrapping_add(1);
            c.tenant = Some(tenant.clone());
            c.user = Some(user.clone());
        });
    }

    /// Key sets are fetched and kept as `settings` say.
    pub fn with_jwks(mut self, settings: JwksSettings) -> Self {
        self.jwks = JwksCache::new(settings);
        for (tenant, url) in &self.jwks_from_file {
            self.jwks.point(tenant, Some(url));
        }
        self
    }

    /// A tenant's record in `sb_tenants` changed: its keys are the
    /// record's from now on (`None`, deleted: the file's, if any). A
    /// record with a bad key locks the tenant out rather than keep keys
    /// an operator meant to remove.
    pub fn apply_record(&self, id: &TenantId, record: Option<&TenantRecord>) {
        let (keys, jwks_url) = match record {
            Some(r) => {
                let rules = ClaimRules {
                    issuer: r.issuer.clone(),
                    audience: r.audience.clone(),
                };
                let access = access_of(
                    id.as_str(),
                    &r.hs256_secrets,
                    &r.ed25519_public_keys,
                    &r.allowed_origins,
                    rules,
                )
                .unwrap_or_else(|e| {
                    tracing::warn!(tenant = %id, error = %e, "a tenant record with a bad key: no token of the tenant verifies");
                    Access::default()
                });
                (Some(Arc::new(access)), r.jwks_url.clone())
            }
            None => (
                self.from_file.get(id).cloned(),
                self.jwks_from_file.get(id).cloned(),
            ),
        };
        self.jwks.point(id, jwks_url.as_deref());
        let mut all = self.write_keys();
        match keys {
            Some(k) => all.insert(id.clone(), k),
            None => all.remove(id),
        };
        drop(all);
        self.changed(id);
    }

    fn changed(&self, id: &TenantId) {
        self.changes.send_modify(|c| {
            c.count = c.count.wrapping_add(1);
            c.tenant = Some(id.clone());
            c.user = None;
        });
    }

    /// Fetches the tenants' key sets as they fall due, for as long as the
    /// directory lives (the gateway runs it beside itself). A set whose
    /// keys changed counts as a key change: sessions whose token it no
    /// longer verifies end.
    pub async fn follow_key_sets(directory: Weak<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(d) = directory.upgrade() else {
                return;
            };
            let due = d.jwks.due(Instant::now());
            let fetches = due.iter().map(|t| async {
                if d.jwks.fetch(t, Fetch::Due).await == Fetched::Changed {
                    d.changed(t);
                }
            });
            futures::future::join_all(fetches).await;
        }
    }

    /// The keys for reading. Every change under the lock is one map insert
    /// or removal, so a panic elsewhere while it was held cannot leave it
    /// half-changed: a poisoned lock is used as it is, and a key rotation
    /// is never dropped for it.
    fn read_keys(&self) -> std::sync::RwLockReadGuard<'_, HashMap<TenantId, Keys>> {
        self.keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_keys(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<TenantId, Keys>> {
        self.keys
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Changes with every key change (see `changes`).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<KeyChange> {
        self.changes.subscribe()
    }

    /// Whether a browser on `origin` may use the tokens of `tenant`; with
    /// no tenant known (a request without a token), of any tenant.
    pub fn allows_origin(&self, tenant: Option<&TenantId>, origin: &str) -> bool {
        let all = self.read_keys();
        match tenant {
            Some(t) => all
                .get(t)
                .is_some_and(|a| a.origins.iter().any(|o| o == origin)),
            None => all.values().any(|a| a.origins.iter().any(|o| o == origin)),
        }
    }

    /// Seconds a token is accepted past its `exp`.
    pub fn leeway_secs(&self) -> u64 {
        self.leeway_secs
    }

    /// [`Self::verify`], and when the token names a key its tenant's key
    /// set lacks, the set fetched again (within `min_refetch`) and the
    /// token verified once more: a provider's new key works at its first
    /// token.
    pub async fn verify_fresh(&self, token: &str) -> Result<Identity, AuthError> {
        match self.verify(token) {
            Err(AuthError::UnknownKey(tenant)) => {
                if self.jwks.fetch(&tenant, Fetch::UnknownKey).await == Fetched::Changed {
                    self.changed(&tenant);
                    if let Ok(identity) = self.verify(token) {
                        return Ok(identity);
                    }
                }
                Err(AuthError::BadSignature)
            }
            other => other,
        }
    }

    /// Verifies a token with the keys held now. `AuthError::UnknownKey`
    /// says a fetch of the tenant's key set might verify it
    /// ([`Self::verify_fresh`] does that).
    pub fn verify(&self, token: &str) -> Result<Identity, AuthError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(AuthError::Missing);
        }
        let mut parts = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(_sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthError::Malformed("a JWT has three parts".into()));
        };
        let header = TokenHeader::parse(header_b64)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload_b64)
            .map_err(|_| AuthError::Malformed("payload is not base64url".into()))?;
        let unverified: TenantOnly = serde_json::from_slice(&payload)
            .map_err(|_| AuthError::Claims("missing tenant claim".into()))?;
        let tenant = TenantId::new(unverified.tenant).map_err(AuthError::ClaimId)?;
        // An unknown tenant looks like a bad signature: no tenant enumeration.
        let access = self
            .read_keys()
            .get(&tenant)
            .cloned()
            .ok_or(AuthError::BadSignature)?;
        let set = self.jwks.set(&tenant);
        let from_set = set.as_ref().map(|s| s.keys.clone()).unwrap_or_default();
        let mut candidates = access
            .keys
            .iter()
            .chain(from_set.iter())
            .filter(|k| header.may_use(k))
            .peekable();
        // A token the set may not know yet: a fetch may find its key.
        let set_lacks_it = set.is_some()
            && (from_set.is_empty()
                || header
                    .kid
                    .as_ref()
                    .is_some_and(|kid| !from_set.iter().any(|k| k.kid.as_ref() == Some(kid))));
        if candidates.peek().is_none() {
            return Err(if set_lacks_it {
                AuthError::UnknownKey(tenant)
            } else {
                AuthError::BadSignature
            });
        }
        let mut validation = Validation::new(header.algorithm);
        validation.set_required_spec_claims(&["exp", "sub"]);
        validation.leeway = self.leeway_secs;
        validation.validate_nbf = true;
        // Checked by the tenant's rules, which know whether it has one.
        validation.validate_aud = false;
        let mut expired = false;
        for key in candidates {
            use jsonwebtoken::errors::ErrorKind;
            // The claims are checked only once a key verified the
            // signature (jsonwebtoken checks it first).
            match jsonwebtoken::decode::<Claims>(token, &key.key, &validation) {
                Ok(data) => {
                    data.claims
                        .check_lifetime(self.max_lifetime_secs, self.leeway_secs)?;
                    access.rules.check(&data.claims)?;
                    let identity = data.claims.identity(&tenant)?;
                    // After the signature: only a verified token learns
                    // that its user is banned.
                    if let Some(ban) = self.bans.holding(
                        BanKind::Tenant,
                        &tenant,
                        &identity.user,
                        Timestamp::now(),
                    ) {
                        return Err(AuthError::Banned { until: ban.until });
                    }
                    return Ok(identity);
                }
                Err(e) => match e.kind() {
                    ErrorKind::ExpiredSignature => expired = true,
                    ErrorKind::ImmatureSignature => return Err(AuthError::NotYetValid),
                    ErrorKind::InvalidSignature => {}
                    ErrorKind::MissingRequiredClaim(c) => {
                        return Err(AuthError::Claims(format!("missing {c} claim")));
                    }
                    ErrorKind::InvalidClaimFormat(c) => {
                        return Err(AuthError::Claims(format!("{c} is not a number")));
                    }
                    other => tracing::debug!(error = ?other, "token refused by one key"),
                },
            }
        }
        // jsonwebtoken checks the signature before the expiry, so an
        // expired token only says so when a key verified it.
        if expired {
            Err(AuthError::Expired)
        } else if set_lacks_it {
            Err(AuthError::UnknownKey(tenant))
        } else {
            Err(AuthError::BadSignature)
        }
    }
}
