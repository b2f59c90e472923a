//! What a token says once a key verified it, and what a tenant requires
//! of it beyond the protocol's claims.

use serde::Deserialize;
use switchboard_protocol::{DeviceId, TenantId, UserId};

use super::error::AuthError;

/// Who a verified token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub tenant: TenantId,
    pub user: UserId,
    pub device: DeviceId,
    pub admin: bool,
    /// The token says `"bot": true` (v1.2): a backend's user, which
    /// usually sends over REST. It counts in rates and quotas as any
    /// user does.
    pub bot: bool,
    /// The token's `exp`, in Unix seconds: a WebSocket session ends there
    /// (plus the grace) unless refreshed.
    pub expires_at: u64,
}

/// The claims a tenant requires of its tokens beyond the protocol's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ClaimRules {
    /// `iss` must be this.
    pub issuer: Option<String>,
    /// `aud` must be this, or a list containing it.
    pub audience: Option<String>,
}

impl ClaimRules {
    pub(super) fn check(&self, claims: &Claims) -> Result<(), AuthError> {
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

/// The only claim read before a signature verifies: it picks the keys.
#[derive(Deserialize)]
pub(super) struct TenantOnly {
    pub tenant: String,
}

#[derive(Deserialize)]
pub(super) struct Claims {
    tenant: String,
    sub: String,
    #[serde(default)]
    device: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    bot: bool,
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

impl Claims {
    /// Refuses a token valid for longer than `max_secs`: from its `iat`
    /// (never later than now, so a future `iat` does not stretch it) to
    /// its `exp`, with `leeway_secs` for the issuer's clock.
    pub(super) fn check_lifetime(&self, max_secs: u64, leeway_secs: u64) -> Result<(), AuthError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let issued = self.iat.map_or(now, |iat| iat.min(now));
        let lifetime = self.exp as f64 - issued;
        if lifetime > max_secs.saturating_add(leeway_secs) as f64 {
            return Err(AuthError::TooLong { max_secs });
        }
        Ok(())
    }

    /// Who the token speaks for, in `tenant` (whose keys verified it).
    pub(super) fn identity(self, tenant: &TenantId) -> Result<Identity, AuthError> {
        if self.tenant != tenant.as_str() {
            return Err(AuthError::Claims("tenant changed".into()));
        }
        let user = UserId::new(self.sub).map_err(AuthError::ClaimId)?;
        let device = match self.device {
            Some(d) => DeviceId::new(d).map_err(AuthError::ClaimId)?,
            None => DeviceId::default_device(),
        };
        Ok(Identity {
            tenant: tenant.clone(),
            user,
            device,
            admin: self.role.as_deref() == Some("admin"),
            bot: self.bot,
            expires_at: self.exp,
        })
    }
}
