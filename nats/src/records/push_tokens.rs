//! Devices' push tokens (F15) in `sb_push_tokens`: key `<tenant>.<user>`,
//! value every device of the user with a token. One key per user, so the
//! push stage reads a recipient's devices in one lookup; changes are
//! compare-and-set, so two devices registering at once both stay.

use std::collections::BTreeMap;

use async_nats::jetstream::{self, kv};
use serde::{Deserialize, Serialize};
use switchboard_protocol::push::PushRegistration;
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
