//! A tenant's verification keys, from wherever they come (the record or
//! the file: HS256 secrets and Ed25519 keys; its identity provider's JSON
//! Web Key Set: RS256, ES256 and EdDSA keys), and the header of a token,
//! which picks among them.
//!
//! Each key has one algorithm, and a token is checked only against keys
//! of the algorithm its header names: `alg: none`, unknown algorithms and
//! algorithm confusion (an HS256 token "signed" with a public key) fail.
//! A key set never supplies HMAC secrets: a published symmetric key would
//! let anyone sign.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};

use super::error::{AuthError, KeyError};

pub(super) struct Key {
    pub algorithm: Algorithm,
    pub key: DecodingKey,
    /// The key set's `kid`; none for the record's and the file's keys.
    pub kid: Option<String>,
}

/// The keys of a tenant's record or file entry, checked.
pub(super) fn keys_of(
    tenant: &str,
    hs256: &[String],
    ed25519: &[String],
) -> Result<Vec<Key>, KeyError> {
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
            kid: None,
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
            kid: None,
        });
    }
    Ok(out)
}

/// The most keys taken from one key set: identity providers publish two
/// or three (the current one, the next, the last).
pub(super) const MAX_SET_KEYS: usize = 32;

/// The signing keys of a JSON Web Key Set document: RSA keys for RS256,
/// P-256 keys for ES256, Ed25519 keys for EdDSA. Keys for encryption,
/// symmetric keys, other curves and algorithms are passed over; a
/// document that is not a key set, or holds no usable key, is refused.
pub(super) fn keys_of_set(document: &[u8]) -> Result<Vec<Key>, SetError> {
    let set: JwkSet = serde_json::from_slice(document).map_err(SetError::NotASet)?;
    let mut out = Vec::new();
    for jwk in set.keys.iter().take(MAX_SET_KEYS) {
        if matches!(
            jwk.common.public_key_use,
            Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
        ) {
            continue;
        }
        let algorithm = match (&jwk.algorithm, &jwk.common.key_algorithm) {
            (AlgorithmParameters::RSA(_), None | Some(KeyAlgorithm::RS256)) => Algorithm::RS256,
            (AlgorithmParameters::EllipticCurve(ec), None | Some(KeyAlgorithm::ES256))
                if ec.curve == EllipticCurve::P256 =>
            {
                Algorithm::ES256
            }
            (AlgorithmParameters::OctetKeyPair(_), None | Some(KeyAlgorithm::EdDSA)) => {
                Algorithm::EdDSA
            }
            _ => continue,
        };
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        out.push(Key {
            algorithm,
            key,
            kid: jwk.common.key_id.clone(),
        });
    }
    if out.is_empty() {
        return Err(SetError::NoSigningKey);
    }
    Ok(out)
}

/// Why a key set document gave no keys.
#[derive(Debug, thiserror::Error)]
pub(super) enum SetError {
    #[error("not a JSON Web Key Set: {0}")]
    NotASet(#[source] serde_json::Error),
    #[error("the key set holds no RS256, ES256 or EdDSA signing key")]
    NoSigningKey,
}

/// What a token's header says of its signature.
pub(super) struct TokenHeader {
    pub algorithm: Algorithm,
    pub kid: Option<String>,
}

impl TokenHeader {
    /// Reads the (base64url) header of a token; only the algorithms keys
    /// exist for are taken.
    pub(super) fn parse(header_b64: &str) -> Result<Self, AuthError> {
        #[derive(serde::Deserialize)]
        struct Raw {
            alg: Option<String>,
            #[serde(default)]
            kid: Option<String>,
        }
        let json = URL_SAFE_NO_PAD
            .decode(header_b64)
            .map_err(|_| AuthError::Malformed("header is not base64url".into()))?;
        let raw: Raw = serde_json::from_slice(&json)
            .map_err(|_| AuthError::Malformed("the header does not parse".into()))?;
        let alg = raw
            .alg
            .ok_or_else(|| AuthError::Malformed("header has no alg".into()))?;
        let algorithm = match alg.as_str() {
            "HS256" => Algorithm::HS256,
            "EdDSA" => Algorithm::EdDSA,
            "RS256" => Algorithm::RS256,
            "ES256" => Algorithm::ES256,
            other => return Err(AuthError::Algorithm(other.to_owned())),
        };
        Ok(Self {
            algorithm,
            kid: raw.kid,
        })
    }

    /// Whether `key` may verify this token: its algorithm, and, for a key
    /// of a key set, the `kid` the token names (if it names one).
    pub(super) fn may_use(&self, key: &Key) -> bool {
        key.algorithm == self.algorithm
            && match (&self.kid, &key.kid) {
                (Some(wanted), Some(kid)) => wanted == kid,
                _ => true,
            }
    }
}
