//! Signed URL tokens for blobs a Switchboard process serves itself: the
//! claims as base64url JSON, a dot, and their HMAC-SHA256 under a secret
//! every serving process shares. Tampering, another secret, or a token for
//! the other operation are all refused; so is one past its expiry.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::hmac;
use serde::{Deserialize, Serialize};
use switchboard_protocol::{TenantId, Timestamp, UserId};

use crate::{BlobError, BlobRef};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Put,
    Get,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub op: Op,
    pub tenant: TenantId,
    pub blob_ref: BlobRef,
    /// For uploads: the content type, size and uploader granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploader: Option<UserId>,
    /// Unix milliseconds.
    pub exp: i64,
}

pub struct Signer {
    key: hmac::Key,
}

impl Signer {
    pub fn new(secret: &[u8]) -> Self {
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        }
    }

    /// A signer with a secret of its own: for a single process only.
    pub fn random() -> Result<Self, BlobError> {
        use ring::rand::{SecureRandom, SystemRandom};
        let mut secret = [0u8; 32];
        SystemRandom::new()
            .fill(&mut secret)
            .map_err(|_| BlobError::backend_fault("no randomness available"))?;
        Ok(Self::new(&secret))
    }

    pub fn sign(&self, claims: &Claims) -> Result<String, BlobError> {
        let json = serde_json::to_vec(claims).map_err(BlobError::backend)?;
        let payload = B64.encode(json);
        let tag = hmac::sign(&self.key, payload.as_bytes());
        Ok(format!("{payload}.{}", B64.encode(tag.as_ref())))
    }

    /// The claims of a token this signer made for `op`, unless expired.
    pub fn verify(&self, token: &str, op: Op, now: Timestamp) -> Result<Claims, BlobError> {
        let bad = |why: &str| BlobError::BadUrl(why.to_owned());
        let (payload, tag) = token.split_once('.').ok_or_else(|| bad("malformed"))?;
        let tag = B64.decode(tag).map_err(|_| bad("malformed"))?;
        hmac::verify(&self.key, payload.as_bytes(), &tag).map_err(|_| bad("bad signature"))?;
        let json = B64.decode(payload).map_err(|_| bad("malformed"))?;
        let claims: Claims = serde_json::from_slice(&json).map_err(|_| bad("malformed"))?;
        if claims.op != op {
            return Err(bad("signed for another operation"));
        }
        if claims.exp < now.unix_ms() {
            return Err(BlobError::Expired);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn claims(op: Op, exp: i64) -> Claims {
        Claims {
            op,
            tenant: TenantId::new("acme").unwrap(),
            blob_ref: BlobRef::generate().unwrap(),
            mime: Some("image/png".into()),
            size: Some(10),
            uploader: Some(UserId::new("alice").unwrap()),
            exp,
        }
    }

    #[test]
    fn only_untouched_unexpired_tokens_for_the_operation_pass() {
        let signer = Signer::new(b"secret");
        let now = Timestamp::from_unix_ms(1_000);
        let c = claims(Op::Put, 2_000);
        let token = signer.sign(&c).unwrap();
        assert_eq!(signer.verify(&token, Op::Put, now).unwrap(), c);
        assert!(matches!(
            signer.verify(&token, Op::Get, now),
            Err(BlobError::BadUrl(_))
        ));
        assert!(matches!(
            signer.verify(&token, Op::Put, Timestamp::from_unix_ms(2_001)),
            Err(BlobError::Expired)
        ));
        assert!(matches!(
            Signer::new(b"other").verify(&token, Op::Put, now),
            Err(BlobError::BadUrl(_))
        ));
        // A changed claim (a bigger size) breaks the signature.
        let mut bigger = c.clone();
        bigger.size = Some(10_000);
        let forged_payload = B64.encode(serde_json::to_vec(&bigger).unwrap());
        let (_, tag) = token.split_once('.').unwrap();
        let forged = format!("{forged_payload}.{tag}");
        assert!(matches!(
            signer.verify(&forged, Op::Put, now),
            Err(BlobError::BadUrl(_))
        ));
        assert!(matches!(
            signer.verify("junk", Op::Put, now),
            Err(BlobError::BadUrl(_))
        ));
    }
}
