//! Token verification (F20): every request carries a JWT signed with its
//! tenant's key.
//!
//! The tenant is read from the unverified claims only to pick the keys;
//! nothing else is trusted until a signature verifies. Each key has one
//! algorithm (HS256 for shared secrets, EdDSA for Ed25519 public keys) and
//! a token is checked only against keys of the algorithm its header
//! names, which the key must match: `alg: none`, unknown algorithms and
//! algorithm confusion (an HS256 token "signed" with a public key) fail.
//!
//! Past the signature, a token must be within its time (`exp`, `nbf`, both
//! with the leeway), no longer-lived than `max_token_lifetime_secs`, and
//! carry the tenant's `iss` and `aud` where its record requires them
//! (`ClaimRules`). A tenant's `Access` holds its keys beside those rules,
//! whatever source the keys come from (the file, `sb_tenants`).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use switchboard_protocol::{DeviceId, IdError, TenantId, UserId};

use switchboard_nats::records::tenants::TenantRecord;

use crate::config::TenantConfig;

/// The latest change of the tenants' keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyChange {
    /// Changes so far.
    pub count: u64,
    /// The tenant of the latest.
    pub tenant: Option<TenantId>,
}

impl KeyChange {
    /// Whether a session of `tenant` that saw change `seen` last must check
    /// its token again: its tenant changed, or changes were coalesced and
    /// one of the missed ones may have been its tenant's.
    pub fn concerns(&self, tenant: &TenantId, seen: u64) -> bool {
        self.count != seen.wrapping_add(1) || self.tenant.as_ref().is_none_or(|t| t == tenant)
    }
}

/// Who a verified token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub tenant: TenantId,
    pub user: UserId,
    pub device: DeviceId,
    pub admin: bool,
    /// The token's `exp`, in Unix seconds: a WebSocket session ends there
    /// (plus the grace) unless refreshed.
    pub expires_at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("no token: send Authorization: Bearer <JWT> or ?token=<JWT>")]
    Missing,
    #[error("malformed token: {0}")]
    Malformed(String),
    #[error("token algorithm {0} is not accepted (HS256 and EdDSA are)")]
    Algorithm(String),
    #[error("token signature does not verify with the tenant's keys")]
    BadSignature,
    #[error("token expired")]
    Expired,
    #[error("token not valid yet (nbf)")]
    NotYetValid,
    /// `exp` further from `iat` (or from now, without `iat`) than the
    /// deployment allows.
    #[error("token lives longer than {max_secs} s (exp - iat): mint shorter-lived tokens")]
    TooLong { max_secs: u64 },
    /// A claim that is missing or does not fit (the message says which).
    #[error("invalid token claims: {0}")]
    Claims(String),
    /// A tenant, user or device claim that is not a valid id.
    #[error("invalid token claims: {0}")]
    ClaimId(#[source] IdError),
}

/// A tenant of the configuration file whose id or keys are not usable.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A key that breaks a rule (length, size): the message says which.
    #[error("tenant {tenant}: {message}")]
    Invalid { tenant: String, message: String },
    #[error("tenant {tenant}: {source}")]
    BadId {
        tenant: String,
        #[source]
        source: IdError,
    },
    #[error("tenant {tenant}: Ed25519 key is not base64: {source}")]
    NotBase64 {
        tenant: String,
        #[source]
        source: base64::DecodeError,
    },
}

struct Key {
    algorithm: Algorithm,
    key: DecodingKey,
}

/// What a tenant's tokens need: the keys that verify them, the claims
/// they must carry, and the web origins browsers may use them from.
#[derive(Default)]
struct Access {
    keys: Vec<Key>,
    rules: ClaimRules,
    origins: Vec<String>,
}

/// The claims a tenant requires of its tokens beyond the protocol's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ClaimRules {
    /// `iss` must be this.
    issuer: Option<String>,
    /// `aud` must be this, or a list containing it.
    audience: Option<String>,
}

impl ClaimRules {
    fn check(&self, claims: &Claims) -> Result<(), AuthError> {
        if let Some(issuer) = &self.issuer
            && claims.iss.as_deref() != Some(issuer.as_str())
        {
            return Err(AuthError::Claims(
                "iss is not the tenant's token issuer".into(),
            ));
        }
        if let Some(audience) = &self.audience {
            let names_it = match &claims.aud {
                Some(Audience::One(a)) => a == audience,
                Some(Audience::Many(all)) => all.iter().any(|a| a == audience),
                None => false,
            };
            if !names_it {
                return Err(AuthError::Claims(
                    "aud does not name the tenant's audience".into(),
                ));
            }
        }
        Ok(())
    }
}

type Keys = Arc<Access>;

/// The verification keys of every tenant: those of the configuration
/// file, replaced by the `sb_tenants` record of the same tenant while
/// there is one (`apply_record`).
pub struct TenantDirectory {
    keys: RwLock<HashMap<TenantId, Keys>>,
    from_file: HashMap<TenantId, Keys>,
    /// Seconds a token is still accepted past its `exp` and before its
    /// `nbf` (clock skew).
    leeway_secs: u64,
    /// The longest a token may be valid (`Limits::max_token_lifetime_secs`).
    max_lifetime_secs: u64,
    /// Counts key changes, with the tenant of the latest: open sessions
    /// of that tenant re-check their token, so a removed key or a deleted
    /// tenant ends them within moments.
    changes: tokio::sync::watch::Sender<KeyChange>,
}

#[derive(Deserialize)]
struct TenantOnly {
    tenant: String,
}

#[derive(Deserialize)]
struct Claims {
    tenant: String,
    sub: String,
    #[serde(default)]
    device: Option<String>,
    #[serde(default)]
    role: Option<String>,
    /// Required, but checked by the validation (which says so clearly).
    #[serde(default)]
    exp: u64,
    /// When it was issued; a float is taken as well (NumericDate allows
    /// one). `nbf` is checked by the validation.
    #[serde(default)]
    iat: Option<f64>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    aud: Option<Audience>,
}

/// `aud`: one name, or several.
#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

/// The keys of one tenant, checked.
fn keys_of(tenant: &str, hs256: &[String], ed25519: &[String]) -> Result<Vec<Key>, KeyError> {
    let invalid = |message: String| KeyError::Invalid {
        tenant: tenant.to_owned(),
        message,
    };
    let mut out = Vec::new();
    for secret in hs256 {
        if secret.chars().count() < 16 {
            return Err(invalid(
                "HS256 secrets must be at least 16 characters".into(),
            ));
        }
        out.push(Key {
            algorithm: Algorithm::HS256,
            key: DecodingKey::from_secret(secret.as_bytes()),
        });
    }
    for public in ed25519 {
        let raw = STANDARD
            .decode(public.trim())
            .or_else(|_| URL_SAFE_NO_PAD.decode(public.trim()))
            .map_err(|source| KeyError::NotBase64 {
                tenant: tenant.to_owned(),
                source,
            })?;
        if raw.len() != 32 {
            return Err(invalid("Ed25519 public keys are 32 bytes".into()));
        }
        out.push(Key {
            algorithm: Algorithm::EdDSA,
            key: DecodingKey::from_ed_der(&raw),
        });
    }
    Ok(out)
}

impl TenantDirectory {
    /// The directory of the configuration file's tenants; tokens are
    /// accepted up to `leeway_secs` past their `exp` (and before their
    /// `nbf`), and may live as long as the default
    /// `max_token_lifetime_secs` (`with_max_lifetime` changes it).
    pub fn from_config(tenants: &[TenantConfig], leeway_secs: u64) -> Result<Self, KeyError> {
        let mut keys: HashMap<TenantId, Access> = HashMap::new();
        for t in tenants {
            let id = TenantId::new(t.id.clone()).map_err(|source| KeyError::BadId {
                tenant: t.id.clone(),
                source,
            })?;
            let access = keys.entry(id).or_default();
            access
                .keys
                .extend(keys_of(&t.id, &t.hs256_secrets, &t.ed25519_public_keys)?);
            // The rule the operator API and `switchboard tenant` apply.
            switchboard_nats::records::tenants::check_origins(&t.allowed_origins).map_err(|e| {
                KeyError::Invalid {
                    tenant: t.id.clone(),
                    message: e.to_string(),
                }
            })?;
            access.origins.extend(t.allowed_origins.iter().cloned());
        }
        let from_file: HashMap<TenantId, Keys> =
            keys.into_iter().map(|(t, k)| (t, Arc::new(k))).collect();
        Ok(Self {
            keys: RwLock::new(from_file.clone()),
            from_file,
            leeway_secs,
            max_lifetime_secs: crate::config::Limits::default().max_token_lifetime_secs,
            changes: tokio::sync::watch::Sender::new(KeyChange::default()),
        })
    }

    /// Tokens valid for longer than `secs` (`exp - iat`) are refused.
    pub fn with_max_lifetime(mut self, secs: u64) -> Self {
        self.max_lifetime_secs = secs;
        self
    }

    /// A tenant's record in `sb_tenants` changed: its keys are the
    /// record's from now on (`None`, deleted: the file's, if any). A
    /// record with a bad key locks the tenant out rather than keep keys
    /// an operator meant to remove.
    pub fn apply_record(&self, id: &TenantId, record: Option<&TenantRecord>) {
        let keys = match record {
            Some(r) => match keys_of(id.as_str(), &r.hs256_secrets, &r.ed25519_public_keys) {
                Ok(keys) => Some(Arc::new(Access {
                    keys,
                    rules: ClaimRules {
                        issuer: r.issuer.clone(),
                        audience: r.audience.clone(),
                    },
                    origins: r.allowed_origins.clone(),
                })),
                Err(e) => {
                    tracing::warn!(tenant = %id, error = %e, "a tenant record with a bad key: no token of the tenant verifies");
                    Some(Arc::new(Access::default()))
                }
            },
            None => self.from_file.get(id).cloned(),
        };
        let mut all = self.write_keys();
        match keys {
            Some(k) => all.insert(id.clone(), k),
            None => all.remove(id),
        };
        drop(all);
        self.changes.send_modify(|c| {
            c.count = c.count.wrapping_add(1);
            c.tenant = Some(id.clone());
        });
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
        let header_json = URL_SAFE_NO_PAD
            .decode(header_b64)
            .map_err(|_| AuthError::Malformed("header is not base64url".into()))?;
        let alg = serde_json::from_slice::<serde_json::Value>(&header_json)
            .ok()
            .and_then(|v| v.get("alg").and_then(|a| a.as_str()).map(str::to_owned))
            .ok_or_else(|| AuthError::Malformed("header has no alg".into()))?;
        let algorithm = match alg.as_str() {
            "HS256" => Algorithm::HS256,
            "EdDSA" => Algorithm::EdDSA,
            other => return Err(AuthError::Algorithm(other.to_owned())),
        };
        let payload = URL_SAFE_NO_PAD
            .decode(payload_b64)
            .map_err(|_| AuthError::Malformed("payload is not base64url".into()))?;
        let unverified: TenantOnly = serde_json::from_slice(&payload)
            .map_err(|_| AuthError::Claims("missing tenant claim".into()))?;
        let tenant = TenantId::new(unverified.tenant).map_err(AuthError::ClaimId)?;
        // An unknown tenant looks like a bad signature: no tenant enumeration.
        let keys = self
            .read_keys()
            .get(&tenant)
            .cloned()
            .ok_or(AuthError::BadSignature)?;

        let mut validation = Validation::new(algorithm);
        validation.set_required_spec_claims(&["exp", "sub"]);
        validation.leeway = self.leeway_secs;
        validation.validate_nbf = true;
        // Checked by the tenant's rules, which know whether it has one.
        validation.validate_aud = false;
        let mut expired = false;
        for key in keys.keys.iter().filter(|k| k.algorithm == algorithm) {
            use jsonwebtoken::errors::ErrorKind;
            // The claims are checked only once a key verified the
            // signature (jsonwebtoken checks it first).
            match jsonwebtoken::decode::<Claims>(token, &key.key, &validation) {
                Ok(data) => {
                    self.check_lifetime(&data.claims)?;
                    keys.rules.check(&data.claims)?;
                    return identity(&tenant, data.claims);
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
        } else {
            Err(AuthError::BadSignature)
        }
    }
}

impl TenantDirectory {
    /// Refuses a token valid for longer than the maximum: from its `iat`
    /// (never later than now, so a future `iat` does not stretch it) to
    /// its `exp`, with the leeway for the issuer's clock.
    fn check_lifetime(&self, claims: &Claims) -> Result<(), AuthError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let issued = claims.iat.map_or(now, |iat| iat.min(now));
        let lifetime = claims.exp as f64 - issued;
        let max = self.max_lifetime_secs.saturating_add(self.leeway_secs);
        if lifetime > max as f64 {
            return Err(AuthError::TooLong {
                max_secs: self.max_lifetime_secs,
            });
        }
        Ok(())
    }
}

fn identity(tenant: &TenantId, claims: Claims) -> Result<Identity, AuthError> {
    if claims.tenant != tenant.as_str() {
        return Err(AuthError::Claims("tenant changed".into()));
    }
    let user = UserId::new(claims.sub).map_err(AuthError::ClaimId)?;
    let device = match claims.device {
        Some(d) => DeviceId::new(d).map_err(AuthError::ClaimId)?,
        None => DeviceId::default_device(),
    };
    Ok(Identity {
        tenant: tenant.clone(),
        user,
        device,
        admin: claims.role.as_deref() == Some("admin"),
        expires_at: claims.exp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header, encode};

    const SECRET: &str = "a-secret-of-enough-length";

    fn directory() -> TenantDirectory {
        TenantDirectory::from_config(
            &[TenantConfig {
                id: "acme".into(),
                hs256_secrets: vec![SECRET.into()],
                ed25519_public_keys: vec![],
                allowed_origins: vec![],
            }],
            30,
        )
        .unwrap()
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    fn hs256(claims: serde_json::Value, secret: &str) -> String {
        encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    }

    #[test]
    fn accepts_a_good_token() {
        let t = hs256(
            serde_json::json!({"tenant":"acme","sub":"alice","device":"phone","exp":now()+60,"role":"admin"}),
            SECRET,
        );
        let id = directory().verify(&t).unwrap();
        assert_eq!(id.user.as_str(), "alice");
        assert_eq!(id.device.as_str(), "phone");
        assert!(id.admin);
    }

    #[test]
    fn refuses_bad_tokens() {
        let d = directory();
        let exp = now() + 60;
        let wrong_key = hs256(
            serde_json::json!({"tenant":"acme","sub":"a","exp":exp}),
            "another-secret-that-is-long",
        );
        assert_eq!(d.verify(&wrong_key), Err(AuthError::BadSignature));
        let expired = hs256(
            serde_json::json!({"tenant":"acme","sub":"a","exp":now()-3600}),
            SECRET,
        );
        assert_eq!(d.verify(&expired), Err(AuthError::Expired));
        let no_exp = hs256(serde_json::json!({"tenant":"acme","sub":"a"}), SECRET);
        assert!(matches!(d.verify(&no_exp), Err(AuthError::Claims(_))));
        let other_tenant = hs256(
            serde_json::json!({"tenant":"globex","sub":"a","exp":exp}),
            SECRET,
        );
        assert_eq!(d.verify(&other_tenant), Err(AuthError::BadSignature));
        let bad_user = hs256(
            serde_json::json!({"tenant":"acme","sub":"a b","exp":exp}),
            SECRET,
        );
        assert!(matches!(d.verify(&bad_user), Err(AuthError::ClaimId(_))));
        // alg: none, with and without a signature.
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let payload =
            URL_SAFE_NO_PAD.encode(format!(r#"{{"tenant":"acme","sub":"a","exp":{exp}}}"#));
        assert_eq!(
            d.verify(&format!("{header}.{payload}.")),
            Err(AuthError::Algorithm("none".into()))
        );
        assert!(d.verify("garbage").is_err());
        assert_eq!(d.verify(""), Err(AuthError::Missing));
    }

    #[test]
    fn refuses_algorithm_confusion() {
        // A tenant with only an Ed25519 key: an HS256 token "signed" with
        // the public key bytes as the HMAC secret must not verify.
        let public = [7u8; 32];
        let d = TenantDirectory::from_config(
            &[TenantConfig {
                id: "ed".into(),
                hs256_secrets: vec![],
                ed25519_public_keys: vec![STANDARD.encode(public)],
                allowed_origins: vec![],
            }],
            30,
        )
        .unwrap();
        let forged = encode(
            &Header::new(Algorithm::HS256),
            &serde_json::json!({"tenant":"ed","sub":"a","exp":now()+60}),
            &EncodingKey::from_secret(&public),
        )
        .unwrap();
        assert_eq!(d.verify(&forged), Err(AuthError::BadSignature));
    }

    #[test]
    fn origins_from_the_configuration_file_meet_the_records_rule() {
        let with = |origin: &str| {
            TenantDirectory::from_config(
                &[TenantConfig {
                    id: "acme".into(),
                    hs256_secrets: vec![SECRET.into()],
                    ed25519_public_keys: vec![],
                    allowed_origins: vec![origin.into()],
                }],
                30,
            )
        };
        assert!(with("https://chat.example.com").is_ok());
        assert!(matches!(
            with("https://chat.example.com/"),
            Err(KeyError::Invalid { .. })
        ));
    }

    #[test]
    fn sessions_check_their_token_when_their_tenant_or_an_unseen_change_may_concern_them() {
        let acme = TenantId::new("acme").unwrap();
        let globex = TenantId::new("globex").unwrap();
        let change = |count, tenant: &TenantId| KeyChange {
            count,
            tenant: Some(tenant.clone()),
        };
        assert!(change(5, &acme).concerns(&acme, 4));
        assert!(!change(5, &globex).concerns(&acme, 4), "another tenant's");
        assert!(change(6, &globex).concerns(&acme, 4), "one was missed");
    }

    #[test]
    fn a_poisoned_lock_does_not_drop_a_key_change() {
        let d = std::sync::Arc::new(directory());
        let poisoner = d.clone();
        let _ = std::thread::spawn(move || {
            let _held = poisoner.write_keys();
            panic!("a panic while the keys are held");
        })
        .join();
        assert!(d.keys.is_poisoned());
        // The tenant's record now has no key: its tokens stop verifying.
        let acme = TenantId::new("acme").unwrap();
        d.apply_record(&acme, Some(&TenantRecord::new(acme.clone())));
        let t = hs256(
            serde_json::json!({"tenant":"acme","sub":"a","exp":now()+60}),
            SECRET,
        );
        assert_eq!(d.verify(&t), Err(AuthError::BadSignature));
    }

    #[test]
    fn nbf_is_honoured_with_the_leeway() {
        let d = directory();
        let token = |nbf: u64| {
            hs256(
                serde_json::json!({"tenant":"acme","sub":"a","exp":now()+600,"nbf":nbf}),
                SECRET,
            )
        };
        assert!(d.verify(&token(now())).is_ok());
        // The leeway is 30 s: just inside it, and past it.
        assert!(d.verify(&token(now() + 25)).is_ok());
        assert_eq!(d.verify(&token(now() + 60)), Err(AuthError::NotYetValid));
        let bad = hs256(
            serde_json::json!({"tenant":"acme","sub":"a","exp":now()+600,"nbf":"soon"}),
            SECRET,
        );
        assert!(matches!(d.verify(&bad), Err(AuthError::Claims(_))));
    }

    #[test]
    fn tokens_may_live_at_most_the_maximum() {
        // 3600 s at most, and a leeway of 30 s for the issuer's clock.
        let d = directory().with_max_lifetime(3600);
        let t = now();
        let token = |claims: serde_json::Value| hs256(claims, SECRET);
        // exp - iat at the maximum, and just past it (with the leeway).
        let at = token(serde_json::json!({"tenant":"acme","sub":"a","iat":t,"exp":t+3600}));
        assert!(d.verify(&at).is_ok());
        let with_leeway =
            token(serde_json::json!({"tenant":"acme","sub":"a","iat":t,"exp":t+3630}));
        assert!(d.verify(&with_leeway).is_ok());
        let past = token(serde_json::json!({"tenant":"acme","sub":"a","iat":t,"exp":t+3631}));
        assert_eq!(d.verify(&past), Err(AuthError::TooLong { max_secs: 3600 }));
        // Issued long ago within the maximum, still valid now.
        let old = token(serde_json::json!({"tenant":"acme","sub":"a","iat":t-3000,"exp":t+600}));
        assert!(d.verify(&old).is_ok());
        // Without iat: from now.
        let no_iat = token(serde_json::json!({"tenant":"acme","sub":"a","exp":t+3600}));
        assert!(d.verify(&no_iat).is_ok());
        let no_iat_past = token(serde_json::json!({"tenant":"acme","sub":"a","exp":t+4000}));
        assert_eq!(
            d.verify(&no_iat_past),
            Err(AuthError::TooLong { max_secs: 3600 })
        );
        // An iat in the future does not stretch it.
        let future =
            token(serde_json::json!({"tenant":"acme","sub":"a","iat":t+86400,"exp":t+86400+60}));
        assert_eq!(
            d.verify(&future),
            Err(AuthError::TooLong { max_secs: 3600 })
        );
        // A fractional iat is a NumericDate too.
        let float =
            token(serde_json::json!({"tenant":"acme","sub":"a","iat":t as f64 + 0.5,"exp":t+60}));
        assert!(d.verify(&float).is_ok());
    }

    #[test]
    fn a_tenant_may_require_an_issuer_and_an_audience() {
        let d = directory();
        let acme = TenantId::new("acme").unwrap();
        let mut record = TenantRecord::new(acme.clone());
        record.hs256_secrets = vec![SECRET.into()];
        let token = |extra: serde_json::Value| {
            let mut claims = serde_json::json!({"tenant":"acme","sub":"a","exp":now()+60});
            for (k, v) in extra.as_object().unwrap() {
                claims[k] = v.clone();
            }
            hs256(claims, SECRET)
        };
        // Required by nobody: any or none.
        d.apply_record(&acme, Some(&record));
        assert!(d.verify(&token(serde_json::json!({}))).is_ok());
        assert!(
            d.verify(&token(serde_json::json!({"iss":"x","aud":"y"})))
                .is_ok()
        );
        record.issuer = Some("https://id.acme.example".into());
        record.audience = Some("chat".into());
        d.apply_record(&acme, Some(&record));
        let good = token(serde_json::json!({"iss":"https://id.acme.example","aud":"chat"}));
        assert!(d.verify(&good).is_ok());
        let listed =
            token(serde_json::json!({"iss":"https://id.acme.example","aud":["mail","chat"]}));
        assert!(d.verify(&listed).is_ok());
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"aud":"chat"}),
            serde_json::json!({"iss":"https://id.evil.example","aud":"chat"}),
            serde_json::json!({"iss":"https://id.acme.example"}),
            serde_json::json!({"iss":"https://id.acme.example","aud":"mail"}),
            serde_json::json!({"iss":"https://id.acme.example","aud":["mail"]}),
        ] {
            assert!(
                matches!(d.verify(&token(bad.clone())), Err(AuthError::Claims(_))),
                "{bad}"
            );
        }
    }
}
