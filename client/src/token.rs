//! Minting tokens. Real tenants mint their own; this is for the local
//! `demo` tenant, tests and the load generator.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signer, SigningKey};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;

/// The claims of docs/protocol.md.
#[derive(Debug, Clone, Serialize)]
pub struct TokenSpec {
    pub tenant: String,
    pub sub: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    pub exp: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A bot user's token (v1.2).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub bot: bool,
}

impl TokenSpec {
    /// A token for `user` on `device` that expires in `ttl_secs`.
    pub fn new(tenant: &str, user: &str, device: Option<&str>, ttl_secs: u64) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Self {
            tenant: tenant.to_owned(),
            sub: user.to_owned(),
            device: device.map(str::to_owned),
            exp: now + ttl_secs,
            role: None,
            bot: false,
        }
    }

    pub fn admin(mut self) -> Self {
        self.role = Some("admin".to_owned());
        self
    }

    /// A bot user's token (`"bot": true`).
    pub fn bot(mut self) -> Self {
        self.bot = true;
        self
    }
}

/// Why a token could not be minted; each cause is kept, and reads as
/// before.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    /// The JWT library could not sign (HS256).
    #[error("minting a token failed: {0}")]
    Sign(#[from] jsonwebtoken::errors::Error),
    /// The claims do not encode as JSON (EdDSA).
    #[error("minting a token failed: {0}")]
    Claims(#[from] serde_json::Error),
}

pub fn mint_hs256(secret: &str, spec: &TokenSpec) -> Result<String, MintError> {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        spec,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .map_err(MintError::from)
}

/// A token signed as an identity provider signs it: RS256 with an RSA key
/// (PKCS#1 DER) or ES256 with a P-256 key (PKCS#8 DER), naming the key's
/// `kid` from the provider's key set.
pub fn mint_with_key(
    algorithm: Algorithm,
    private_der: &[u8],
    kid: &str,
    spec: &TokenSpec,
) -> Result<String, MintError> {
    let key = match algorithm {
        Algorithm::ES256 | Algorithm::ES384 => EncodingKey::from_ec_der(private_der),
        _ => EncodingKey::from_rsa_der(private_der),
    };
    let mut header = Header::new(algorithm);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, spec, &key).map_err(MintError::from)
}

/// An EdDSA token signed with the Ed25519 key whose 32-byte seed is `seed`.
pub fn mint_eddsa(seed: &[u8; 32], spec: &TokenSpec) -> Result<String, MintError> {
    let key = SigningKey::from_bytes(seed);
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"EdDSA","typ":"JWT"}"#);
    let claims = serde_json::to_vec(spec)?;
    let signing_input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims));
    let signature = key.sign(signing_input.as_bytes());
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature.to_bytes())
    ))
}

/// The public key (32 bytes) of the Ed25519 key with this seed.
pub fn ed25519_public_key(seed: &[u8; 32]) -> [u8; 32] {
    SigningKey::from_bytes(seed).verifying_key().to_bytes()
}
