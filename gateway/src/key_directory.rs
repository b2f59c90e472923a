//! The end-to-end encryption key directory (F17) in the `sb_keys` bucket.
//!
//! One entry per device, `<tenant>.<user>.<device>`, holds its public keys
//! and its unclaimed one-time prekeys; one per user, `<tenant>.<user>`,
//! lists the user's devices. A claim takes the first unclaimed prekey and
//! writes the entry back with a compare-and-set on the revision it read:
//! two claims racing for one entry cannot both win, so each prekey is
//! handed out exactly once, by any number of gateways at once, without a
//! lock. The loser reads again and takes the next one.
//!
//! Only public keys are stored. Signed prekeys are verified here, on
//! upload, so nobody is handed a prekey its identity key did not sign.

use async_nats::jetstream::kv;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use switchboard_protocol::keys::{
    ClaimedKeys, DeviceKeysUpload, DeviceKeysView, OneTimePrekey, SignedPrekey,
};
use switchboard_protocol::{DeviceId, TenantId, Timestamp, UserId};

use switchboard_nats::kv_key::part;

/// Most unclaimed one-time prekeys a device may hold.
pub const MAX_ONE_TIME_PREKEYS: usize = 200;

/// At or below this many unclaimed prekeys the device is told to upload
/// more.
pub const LOW_PREKEYS: usize = 10;

/// Attempts of one compare-and-set before giving up (each failure means
/// another writer won; a handful of gateways never need this many).
const CAS_ATTEMPTS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    Invalid(String),
    #[error("no keys published for this device")]
    NotFound,
    #[error("too many one-time prekeys: at most {MAX_ONE_TIME_PREKEYS} unclaimed per device")]
    TooMany,
    #[error("the key directory is busy; try again")]
    Contended,
    /// The keys bucket could not be read or written.
    #[error("key directory: {0}")]
    Backbone(#[source] switchboard_nats::Cause),
    /// A stored entry that this release cannot read.
    #[error("key directory: entry {key} does not decode: {source}")]
    Undecodable {
        key: String,
        #[source]
        source: serde_json::Error,
    },
}

/// What the bucket holds per device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceRecord {
    identity_key: String,
    #[serde(default)]
    identity_dh_key: Option<String>,
    signed_prekey: SignedPrekey,
    one_time_prekeys: Vec<OneTimePrekey>,
    updated_at: Timestamp,
}

/// What the bucket holds per user.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UserRecord {
    devices: Vec<DeviceId>,
}

/// The result of a claim, with what the owner should hear of it.
#[derive(Debug, Clone)]
pub struct Claim {
    pub keys: ClaimedKeys,
    /// Unclaimed prekeys left after this claim.
    pub remaining: usize,
}

fn decode_key(what: &str, b64: &str, len: usize) -> Result<Vec<u8>, KeyError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| KeyError::Invalid(format!("{what} is not standard base64")))?;
    if bytes.len() != len {
        return Err(KeyError::Invalid(format!(
            "{what} must be {len} bytes, not {}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// Checks sizes, the signature and the prekey ids of an upload.
pub fn validate(upload: &DeviceKeysUpload) -> Result<(), KeyError> {
    let identity = decode_key("identity_key", &upload.identity_key, 32)?;
    if let Some(dh) = &upload.identity_dh_key {
        decode_key("identity_dh_key", dh, 32)?;
    }
    let spk = &upload.signed_prekey;
    let spk_bytes = decode_key("signed_prekey.public_key", &spk.public_key, 32)?;
    let signature = decode_key("signed_prekey.signature", &spk.signature, 64)?;
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &identity)
        .verify(&spk_bytes, &signature)
        .map_err(|_| {
            KeyError::Invalid(
                "signed_prekey.signature does not verify with identity_key over the prekey's 32 bytes"
                    .into(),
            )
        })?;
    if upload.one_time_prekeys.len() > MAX_ONE_TIME_PREKEYS {
        return Err(KeyError::TooMany);
    }
    let mut ids = std::collections::HashSet::new();
    for k in &upload.one_time_prekeys {
        decode_key("one_time_prekeys[].public_key", &k.public_key, 32)?;
        if !ids.insert(k.key_id) {
            return Err(KeyError::Invalid(format!(
                "one-time prekey id {} appears twice",
                k.key_id
            )));
        }
    }
    Ok(())
}

/// A value of the bucket as every read decodes it: a [`DeviceRecord`] or
/// a [`UserRecord`]. Its lists are as long as the value holds, no more.
pub fn decode<T: for<'de> Deserialize<'de>>(key: &str, value: &[u8]) -> Result<T, KeyError> {
    serde_json::from_slice(value).map_err(|source| KeyError::Undecodable {
        key: key.to_owned(),
        source,
    })
}

#[derive(Clone)]
pub struct KeyDirectory {
    kv: kv::Store,
}

fn nats(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> KeyError {
    KeyError::Backbone(switchboard_nats::cause(e))
}

fn device_key(tenant: &TenantId, user: &UserId, device: &DeviceId) -> String {
    format!(
        "{}.{}.{}",
        part(tenant.as_str()),
        part(user.as_str()),
        part(device.as_str())
    )
}

fn user_key(tenant: &TenantId, user: &UserId) -> String {
    format!("{}.{}", part(tenant.as_str()), part(user.as_str()))
}

impl KeyDirectory {
    pub fn new(kv: kv::Store) -> Self {
        Self { kv }
    }

    /// The value at `key` with its revision (0 when there is none).
    async fn read<T: for<'de> Deserialize<'de>>(
        &self,
        key: &str,
    ) -> Result<Option<(T, u64)>, KeyError> {
        let Some(entry) = self.kv.entry(key).await.map_err(nats)? else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        Ok(Some((decode(key, &entry.value)?, entry.revision)))
    }

    /// Writes `value` if `key` is still at `revision` (0: absent or
    /// deleted). `Ok(false)` when another writer got there first.
    async fn write<T: Serialize>(
        &self,
        key: &str,
        value: &T,
        revision: u64,
    ) -> Result<bool, KeyError> {
        let bytes = serde_json::to_vec(value).map_err(nats)?;
        switchboard_nats::kv_cas::write_if(&self.kv, key, bytes.into(), revision)
            .await
            .map_err(KeyError::Backbone)
    }

    /// Publishes a device's keys (already [`validate`]d). Returns how many
    /// unclaimed one-time prekeys the device has now.
    pub async fn publish(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
        upload: DeviceKeysUpload,
    ) -> Result<usize, KeyError> {
        let key = device_key(tenant, user, device);
        let mut remaining = None;
        for _ in 0..CAS_ATTEMPTS {
            let current = self.read::<DeviceRecord>(&key).await?;
            let (mut prekeys, revision) = match current {
                // The same identity: more prekeys for the same device.
                Some((r, rev)) if r.identity_key == upload.identity_key => {
                    (r.one_time_prekeys, rev)
                }
                // A new identity (or a new device): its old prekeys are
                // useless to anyone.
                Some((_, rev)) => (Vec::new(), rev),
                None => (Vec::new(), 0),
            };
            for k in &upload.one_time_prekeys {
                if !prekeys.iter().any(|p| p.key_id == k.key_id) {
                    prekeys.push(k.clone());
                }
            }
            if prekeys.len() > MAX_ONE_TIME_PREKEYS {
                return Err(KeyError::TooMany);
            }
            let record = DeviceRecord {
                identity_key: upload.identity_key.clone(),
                identity_dh_key: upload.identity_dh_key.clone(),
                signed_prekey: upload.signed_prekey.clone(),
                one_time_prekeys: prekeys,
                updated_at: Timestamp::now(),
            };
            if self.write(&key, &record, revision).await? {
                remaining = Some(record.one_time_prekeys.len());
                break;
            }
        }
        let remaining = remaining.ok_or(KeyError::Contended)?;
        self.list_device(tenant, user, device).await?;
        Ok(remaining)
    }

    /// Adds the device to the user's list (once).
    async fn list_device(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
    ) -> Result<(), KeyError> {
        let key = user_key(tenant, user);
        for _ in 0..CAS_ATTEMPTS {
            let (mut record, revision) = self.read::<UserRecord>(&key).await?.unwrap_or_default();
            if record.devices.contains(device) {
                return Ok(());
            }
            record.devices.push(device.clone());
            if self.write(&key, &record, revision).await? {
                return Ok(());
            }
        }
        Err(KeyError::Contended)
    }

    fn view(user: &UserId, device: &DeviceId, r: DeviceRecord) -> DeviceKeysView {
        DeviceKeysView {
            user_id: user.clone(),
            device_id: device.clone(),
            identity_key: r.identity_key,
            identity_dh_key: r.identity_dh_key,
            signed_prekey: r.signed_prekey,
            one_time_prekeys_remaining: r.one_time_prekeys.len(),
        }
    }

    /// One device's published keys.
    pub async fn device(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
    ) -> Result<DeviceKeysView, KeyError> {
        let (record, _) = self
            .read::<DeviceRecord>(&device_key(tenant, user, device))
            .await?
            .ok_or(KeyError::NotFound)?;
        Ok(Self::view(user, device, record))
    }

    /// Every device of the user that published keys.
    pub async fn devices(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> Result<Vec<DeviceKeysView>, KeyError> {
        let Some((list, _)) = self.read::<UserRecord>(&user_key(tenant, user)).await? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(list.devices.len());
        for d in &list.devices {
            match self.device(tenant, user, d).await {
                Ok(v) => out.push(v),
                Err(KeyError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Hands out one unclaimed one-time prekey of the device (the oldest),
    /// exactly once; `one_time_prekey: None` when none is left.
    pub async fn claim(
        &self,
        tenant: &TenantId,
        user: &UserId,
        device: &DeviceId,
    ) -> Result<Claim, KeyError> {
        let key = device_key(tenant, user, device);
        for _ in 0..CAS_ATTEMPTS {
            let (mut record, revision) = self
                .read::<DeviceRecord>(&key)
                .await?
                .ok_or(KeyError::NotFound)?;
            let taken = if record.one_time_prekeys.is_empty() {
                None
            } else {
                Some(record.one_time_prekeys.remove(0))
            };
            // With nothing to take there is nothing to write.
            if taken.is_some() && !self.write(&key, &record, revision).await? {
                continue;
            }
            let remaining = record.one_time_prekeys.len();
            return Ok(Claim {
                keys: ClaimedKeys {
                    user_id: user.clone(),
                    device_id: device.clone(),
                    identity_key: record.identity_key,
                    identity_dh_key: record.identity_dh_key,
                    signed_prekey: record.signed_prekey,
                    one_time_prekey: taken,
                },
                remaining,
            });
        }
        Err(KeyError::Contended)
    }
}
