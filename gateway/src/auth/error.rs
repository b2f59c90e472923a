//! Why a token or a tenant's keys were refused.

use switchboard_protocol::{IdError, TenantId, Timestamp};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error(
        "no token: send Authorization: Bearer <JWT>, the subprotocol switchboard.token.<JWT>, or ?token=<JWT>"
    )]
    Missing,
    #[error("malformed token: {0}")]
    Malformed(String),
    #[error("token algorithm {0} is not accepted (HS256, EdDSA, RS256 and ES256 are)")]
    Algorithm(String),
    #[error("token signature does not verify with the tenant's keys")]
    BadSignature,
    /// Signed by a key the tenant's JSON Web Key Set does not list (yet):
    /// [`super::TenantDirectory::verify_fresh`] fetches the set again and
    /// retries; what the client sees is a bad signature.
    #[error("token signature does not verify with the tenant's keys")]
    UnknownKey(TenantId),
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
    /// A valid token of a user banned from the tenant (v1.3).
    #[error("{}", banned_message(*until))]
    Banned { until: Option<Timestamp> },
}

fn banned_message(until: Option<Timestamp>) -> String {
    match until {
        Some(until) => format!("banned from this tenant until {until}"),
        None => "banned from this tenant".to_owned(),
    }
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
