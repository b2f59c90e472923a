//! Tenants' JSON Web Key Sets: the signing keys a tenant's identity
//! provider publishes at its `jwks_url`, fetched and kept here.
//!
//! A set is fetched when its URL is first seen, again every `refresh`
//! (providers rotate by publishing the next key ahead of its use), and
//! again when a token names a key the set lacks, at most once per
//! `min_refetch` per tenant, so tokens with made-up key ids cannot make
//! the gateway hammer the provider. A fetch that fails keeps the keys
//! already held (a provider's outage locks nobody out) and is tried again
//! after `min_refetch`. What is read of an answer is bounded by time and
//! by `max_bytes`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use switchboard_protocol::TenantId;

use super::keys::{Key, SetError, keys_of_set};
use crate::config::Limits;

/// How key sets are fetched and kept (`[limits] jwks_*`).
#[derive(Debug, Clone)]
pub struct JwksSettings {
    /// A set is fetched again this long after it was last fetched.
    pub refresh: Duration,
    /// The least time between two fetches of one tenant's set that a
    /// token naming an unknown key, or a failed fetch, may ask for.
    pub min_refetch: Duration,
    /// The largest set document read; a larger one fails the fetch.
    pub max_bytes: usize,
    /// The most a fetch may take, connecting included.
    pub timeout: Duration,
    /// Whether a set's URL, or a redirect from it, may be a private
    /// address (`switchboard_outbound`): only for an identity provider on
    /// the operator's own network.
    pub allow_private: bool,
}

impl JwksSettings {
    /// The settings of the `[limits] jwks_*` keys.
    pub fn from_limits(limits: &Limits) -> Self {
        JwksSettings {
            refresh: Duration::from_secs(limits.jwks_refresh_secs),
            min_refetch: Duration::from_secs(limits.jwks_min_refetch_secs),
            max_bytes: limits.jwks_max_bytes,
            timeout: Duration::from_millis(limits.jwks_timeout_ms),
            allow_private: limits.jwks_allow_private_targets,
        }
    }
}

impl Default for JwksSettings {
    fn default() -> Self {
        Self {
            refresh: Duration::from_secs(300),
            min_refetch: Duration::from_secs(30),
            max_bytes: 64 * 1024,
            timeout: Duration::from_secs(5),
            allow_private: false,
        }
    }
}

/// One tenant's set as last fetched.
pub(super) struct KeySet {
    pub url: String,
    pub keys: Arc<Vec<Key>>,
    /// SHA-256 of the document the keys came from: an unchanged document
    /// changes nothing.
    digest: Option<Vec<u8>>,
    /// When the keys were fetched (none yet: the set is empty).
    fetched_at: Option<Instant>,
    /// When a fetch was last tried, successful or not.
    tried_at: Option<Instant>,
}

/// Why a set is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fetch {
    /// Its time has come (`refresh`), or it was never fetched.
    Due,
    /// A token names a key it lacks.
    UnknownKey,
}

/// What a fetch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fetched {
    /// The set's keys are new.
    Changed,
    /// The same document as before, or a failure (the old keys stay), or
    /// not tried (too soon, or no set).
    Same,
}

/// Every tenant's key set.
pub(super) struct JwksCache {
    settings: JwksSettings,
    /// `None` when no HTTP client could be built: no set is fetched, and
    /// tokens of tenants that rely on one do not verify.
    client: Option<reqwest::Client>,
    sets: RwLock<HashMap<TenantId, Arc<KeySet>>>,
    /// One fetch at a time per tenant: the others wait for it, then find
    /// it fresh.
    fetching: Mutex<HashMap<TenantId, Arc<tokio::sync::Mutex<()>>>>,
}

impl JwksCache {
    pub(super) fn new(settings: JwksSettings) -> Self {
        let client = switchboard_outbound::client_builder(settings.allow_private, ALLOW_PRIVATE)
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .redirect(switchboard_outbound::redirects(3, settings.allow_private))
            .build()
            .map_err(|e| tracing::error!(error = %e, "no HTTP client for tenants' key sets: JWKS tenants cannot sign in"))
            .ok();
        Self {
            settings,
            client,
            sets: RwLock::new(HashMap::new()),
            fetching: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn set(&self, tenant: &TenantId) -> Option<Arc<KeySet>> {
        self.read().get(tenant).cloned()
    }

    /// The tenant's set is at `url` from now on (`None`: it has none).
    /// A new URL starts empty and is fetched at the next turn.
    pub(super) fn point(&self, tenant: &TenantId, url: Option<&str>) {
        let mut sets = self.write();
        match url {
            Some(url) if sets.get(tenant).is_some_and(|s| s.url == url) => {}
            Some(url) => {
                sets.insert(
                    tenant.clone(),
                    Arc::new(KeySet {
                        url: url.to_owned(),
                        keys: Arc::new(Vec::new()),
                        digest: None,
                        fetched_at: None,
                        tried_at: None,
                    }),
                );
            }
            None => {
                sets.remove(tenant);
            }
        }
    }

    /// The tenants whose sets are due at `now`.
    pub(super) fn due(&self, now: Instant) -> Vec<TenantId> {
        self.read()
            .iter()
            .filter(|(_, s)| self.is_due(s, now))
            .map(|(t, _)| t.clone())
            .collect()
    }

    fn is_due(&self, set: &KeySet, now: Instant) -> bool {
        let since = |at: Option<Instant>| at.map(|at| now.saturating_duration_since(at));
        match (since(set.fetched_at), since(set.tried_at)) {
            // A failure waits `min_refetch` before the next try.
            (_, Some(tried)) if tried < self.settings.min_refetch => false,
            (None, _) => true,
            (Some(fetched), _) => fetched >= self.settings.refresh,
        }
    }

    /// Fetches the tenant's set if `why` calls for it now.
    pub(super) async fn fetch(&self, tenant: &TenantId, why: Fetch) -> Fetched {
        let turn = {
            let mut fetching = self
                .fetching
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            fetching.entry(tenant.clone()).or_default().clone()
        };
        let _turn = turn.lock().await;
        let Some(set) = self.set(tenant) else {
            return Fetched::Same;
        };
        let now = Instant::now();
        let wanted = match why {
            Fetch::Due => self.is_due(&set, now),
            Fetch::UnknownKey => set
                .tried_at
                .is_none_or(|at| now.saturating_duration_since(at) >= self.settings.min_refetch),
        };
        let Some(client) = self.client.as_ref().filter(|_| wanted) else {
            return Fetched::Same;
        };
        let fetched = match tokio::time::timeout(
            self.settings.timeout,
            download(
                client,
                &set.url,
                self.settings.max_bytes,
                self.settings.allow_private,
            ),
        )
        .await
        {
            Ok(Ok(document)) => keys_of_set(&document)
                .map(|keys| (keys, document))
                .map_err(FetchError::from),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(FetchError::TimedOut(self.settings.timeout)),
        };
        let (next, outcome) = match fetched {
            Ok((keys, document)) => {
                let digest = ring::digest::digest(&ring::digest::SHA256, &document)
                    .as_ref()
                    .to_vec();
                let outcome = if set.digest.as_deref() == Some(digest.as_slice()) {
                    Fetched::Same
                } else {
                    Fetched::Changed
                };
                let keys = match outcome {
                    Fetched::Same => set.keys.clone(),
                    Fetched::Changed => Arc::new(keys),
                };
                crate::metrics::jwks_fetched(
                    tenant,
                    if outcome == Fetched::Changed {
                        "changed"
                    } else {
                        "unchanged"
                    },
                );
                let next = KeySet {
                    url: set.url.clone(),
                    keys,
                    digest: Some(digest),
                    fetched_at: Some(now),
                    tried_at: Some(now),
                };
                (next, outcome)
            }
            Err(e) => {
                tracing::warn!(tenant = %tenant, url = %set.url, error = %e, "fetching the tenant's key set failed; its keys so far stay");
                crate::metrics::jwks_fetched(tenant, "failed");
                let next = KeySet {
                    url: set.url.clone(),
                    keys: set.keys.clone(),
                    digest: set.digest.clone(),
                    fetched_at: set.fetched_at,
                    tried_at: Some(now),
                };
                (next, Fetched::Same)
            }
        };
        // The URL may have changed meanwhile: that set is newer.
        let mut sets = self.write();
        if sets.get(tenant).is_some_and(|s| s.url == set.url) {
            sets.insert(tenant.clone(), Arc::new(next));
            outcome
        } else {
            Fetched::Same
        }
    }

    /// Holds the set `document` for the tenant as if fetched from `url`.
    #[cfg(test)]
    pub(super) fn hold(&self, tenant: &TenantId, url: &str, document: &[u8]) {
        let now = Instant::now();
        let keys = keys_of_set(document).unwrap_or_default();
        self.write().insert(
            tenant.clone(),
            Arc::new(KeySet {
                url: url.to_owned(),
                keys: Arc::new(keys),
                digest: None,
                fetched_at: Some(now),
                tried_at: Some(now),
            }),
        );
    }

    /// Every change under the lock is one insert or removal: a poisoned
    /// lock is used as it is.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<TenantId, Arc<KeySet>>> {
        self.sets
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<TenantId, Arc<KeySet>>> {
        self.sets
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The setting that lets key sets be fetched from private addresses.
const ALLOW_PRIVATE: &str = "[limits] jwks_allow_private_targets";

/// Why a key set was not fetched. The tenant's keys so far stay; the
/// error is logged.
#[derive(Debug, thiserror::Error)]
pub(super) enum FetchError {
    #[error("the URL does not parse: {0}")]
    Url(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error(
        "{0} is a private address, which key sets may not be fetched from (see {ALLOW_PRIVATE})"
    )]
    Private(std::net::IpAddr),
    #[error(transparent)]
    Request(#[from] reqwest::Error),
    #[error("answered {0}")]
    Status(reqwest::StatusCode),
    #[error("the key set is larger than {0} bytes (jwks_max_bytes)")]
    TooLarge(usize),
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    #[error(transparent)]
    Set(#[from] SetError),
}

/// The document at `url`, refused past `max_bytes` (declared or read), or
/// at a private address unless `allow_private`.
async fn download(
    client: &reqwest::Client,
    url: &str,
    max_bytes: usize,
    allow_private: bool,
) -> Result<Vec<u8>, FetchError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| FetchError::Url(Box::new(e)))?;
    if !allow_private && let Some(ip) = switchboard_outbound::private_literal(&parsed) {
        return Err(FetchError::Private(ip));
    }
    let mut answer = client
        .get(url)
        .header(
            reqwest::header::ACCEPT,
            "application/jwk-set+json, application/json",
        )
        .send()
        .await?;
    if !answer.status().is_success() {
        return Err(FetchError::Status(answer.status()));
    }
    if answer
        .content_length()
        .is_some_and(|n| n > max_bytes as u64)
    {
        return Err(FetchError::TooLarge(max_bytes));
    }
    let mut document = Vec::new();
    while let Some(chunk) = answer.chunk().await? {
        if document.len() + chunk.len() > max_bytes {
            return Err(FetchError::TooLarge(max_bytes));
        }
        document.extend_from_slice(&chunk);
    }
    Ok(document)
}
