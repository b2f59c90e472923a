//! Devices' push tokens (F15) in `sb_push_tokens`: key `<tenant>.<user>`,
//! value every device of the user with a token. One key per user, so the
//! push stage reads a recipient's devices in one lookup; changes are
//! compare-and-set, so two devices registering at once both stay.
//!
//! A token is checked before it is kept ([`checked_registration`]): an
//! APNs token goes into the path of a URL, so it must be hex.

use std::collections::BTreeMap;

use async_nats::jetstream::{self, kv};
use serde::{Deserialize, Serialize};
use switchboard_protocol::push::{MAX_PUSH_TOKEN_BYTES, PushProvider, PushRegistration};
use switchboard_protocol::{DeviceId, TenantId, Timestamp, UserId};

use crate::definitions::PUSH_TOKENS_BUCKET;
use crate::kv_key::part;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceToken {
    #[serde(flatten)]
    pub registration: PushRegistration,
    pub updated_at: Timestamp,
}

/// A user's devices with a token: the value of their key.
pub type Devices = BTreeMap<DeviceId, DeviceToken>;

/// A value of `sb_push_tokens` as every reader decodes it.
pub fn decode_devices(value: &[u8]) -> Result<Devices, PushTokenError> {
    serde_json::from_slice(value).map_err(nats)
}

#[derive(Debug, thiserror::Error)]
pub enum PushTokenError {
    /// The push tokens bucket could not be read or written, or holds a
    /// record that does not decode.
    #[error("push tokens: {0}")]
    Backbone(#[source] crate::Cause),
    #[error("push tokens of this user are changing too fast; try again")]
    Contended,
    /// A registration [`checked_registration`] refuses.
    #[error("push token: {0}")]
    Invalid(String),
}

/// The fewest and most hex digits of an APNs device token. Apple's are
/// 32 bytes (64 digits) today, and Apple says their length may change:
/// 8 to 100 bytes leaves room without letting anything else through.
pub const MIN_APNS_TOKEN_HEX: usize = 16;
pub const MAX_APNS_TOKEN_HEX: usize = 200;

/// What an APNs device token must be, as refusals say it.
pub const APNS_TOKEN_RULE: &str = "an even number of hex digits, 16 to 200";

/// Whether `token` may be an APNs device token ([`APNS_TOKEN_RULE`]):
/// nothing but hex digits, so it cannot change the URL it goes into.
pub fn apns_token_ok(token: &str) -> bool {
    (MIN_APNS_TOKEN_HEX..=MAX_APNS_TOKEN_HEX).contains(&token.len())
        && token.len().is_multiple_of(2)
        && token.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A registration as it is kept (the token trimmed), or why it is
/// refused: every token is 1 to `MAX_PUSH_TOKEN_BYTES` bytes without
/// control characters, and an APNs token is [`APNS_TOKEN_RULE`].
pub fn checked_registration(
    provider: PushProvider,
    token: &str,
) -> Result<PushRegistration, String> {
    let token = token.trim();
    if token.is_empty() || token.len() > MAX_PUSH_TOKEN_BYTES || token.chars().any(char::is_control)
    {
        return Err(format!(
            "token must be 1 to {MAX_PUSH_TOKEN_BYTES} bytes without control characters"
        ));
    }
    if provider == PushProvider::Apns && !apns_token_ok(token) {
        return Err(format!("an APNs token must be {APNS_TOKEN_RULE}"));
    }
    Ok(PushRegistration {
        provider,
        token: token.to_owned(),
    })
}

fn nats(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> PushTokenError {
    PushTokenError::Backbone(crate::cause(e))
}

#[derive(Clone)]
pub struct PushTokens {
    kv: kv::Store,
}

fn key(tenant: &TenantId, user: &UserId) -> String {
    format!("{}.{}", part(tenant.as_str()), part(user.as_str()))
}

impl PushTokens {
    pub async fn open(js: &jetstream::Context) -> Result<Self, PushTokenError> {
        Ok(Self {
            kv: js.get_key_value(PUSH_TOKENS_BUCKET).await.map_err(nats)?,
        })
    }

    async fn read(&self, key: &str) -> Result<(Devices, u64), PushTokenError> {
        match self.kv.entry(key).await.map_err(nats)? {
            Some(e) if e.operation == kv::Operation::Put => {
                Ok((decode_devices(&e.value)?, e.revision))
            }
            Some(e) => Ok((Devices::new(), e.revision)),
            None => Ok((Devices::new(), 0)),
        }
    }

    /// The user's devices with a token.
    pub async fn devices(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> Result<Devices, PushTokenError> {
        Ok(self.read(&key(tenant, user)).await?.0)
    }

    /// Changes the user's devices with `change`, retrying when another
    /// change got in between.
    async fn change(
        &self,
        tenant: &TenantId,
        user: &UserId,
        change: impl Fn(&mut Devices) -> bool,
    ) -> Result<(), PushTokenError> {
        let key = key(tenant, user);
        for _ in 0..32 {
            let (mut devices, revision) = self.read(&key).await?;
            if !change(&mut devices) {
                return Ok(());
            }
            let bytes = serde_json::to_vec(&devices).map_err(nats)?;
            let written = crate::kv_cas::write_if(&self.kv, &key, bytes.into(), revision)
                .await
                .map_err(PushTokenError::Backbone)?;
            if written {
                return Ok(());
            }
        }
        Err(PushTokenError::Contended)
    }

    pub async fn register(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        registration: PushRegistration,
    ) -> Result<(), PushTokenError> {
        let registration = checked_registration(registration.provider, &registration.token)
            .map_err(PushTokenError::Invalid)?;
        self.change(tenant, user, |devices| {
            devices.insert(
                device.clone(),
                DeviceToken {
                    registration: registration.clone(),
                    updated_at: Timestamp::now(),
                },
            );
            true
        })
        .await
    }

    /// Forgets the device's token; with `only`, only if it is still that
    /// token (a provider said it is dead, and the device may have
    /// registered a new one since).
    pub async fn unregister(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        only: Option<&str>,
    ) -> Result<(), PushTokenError> {
        self.change(tenant, user, |devices| match (devices.get(device), only) {
            (Some(t), Some(token)) if t.registration.token != token => false,
            (Some(_), _) => devices.remove(device).is_some(),
            (None, _) => false,
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apns_tokens_are_bounded_hex() {
        let at = |n: usize| "a1".repeat(n / 2) + &"f".repeat(n % 2);
        assert!(apns_token_ok(&at(MIN_APNS_TOKEN_HEX)));
        assert!(apns_token_ok(&at(64)));
        assert!(apns_token_ok(&at(MAX_APNS_TOKEN_HEX)));
        assert!(!apns_token_ok(&at(MIN_APNS_TOKEN_HEX - 2)));
        assert!(!apns_token_ok(&at(MAX_APNS_TOKEN_HEX + 2)));
        assert!(!apns_token_ok(&at(65)), "an odd number of digits");
        for bad in [
            "../../3/device/a1b2c3d4e5f60718",
            "a1b2c3d4e5f60718/x",
            "a1b2c3d4e5f6071g",
            "a1b2c3d4e5f60718?x=1",
            "a1b2c3d4%2fe5f607",
        ] {
            assert!(!apns_token_ok(bad), "{bad}");
        }
    }

    #[test]
    fn registrations_are_trimmed_and_checked_by_provider() {
        let hex = "a1b2".repeat(16);
        let ok = checked_registration(PushProvider::Apns, &format!(" {hex}\n")).unwrap();
        assert_eq!(ok.token, hex);
        assert!(checked_registration(PushProvider::Apns, "a/b").is_err());
        // Other providers' tokens are opaque: any printable text.
        assert!(checked_registration(PushProvider::Fcm, "fcm:token/with-slash").is_ok());
        assert!(checked_registration(PushProvider::Webhook, "").is_err());
        assert!(checked_registration(PushProvider::Fcm, "a\u{7}b").is_err());
        let longest = "x".repeat(MAX_PUSH_TOKEN_BYTES);
        assert!(checked_registration(PushProvider::Fcm, &longest).is_ok());
        assert!(checked_registration(PushProvider::Fcm, &format!("{longest}x")).is_err());
    }
}
