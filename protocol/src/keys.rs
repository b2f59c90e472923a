//! The end-to-end encryption key directory (F17): what a device publishes
//! so that others can start an encrypted session with it, and what a claim
//! hands out. Keys travel as standard base64 (with padding) of their raw
//! bytes; the server checks their sizes and the signed prekey's signature
//! and never holds a private key.
//!
//! The shapes fit the Signal protocol's X3DH and Olm (Matrix) alike: an
//! Ed25519 identity key signs; an optional Curve25519 identity key is the
//! long-term key of the key agreement (Olm's "identity key"; X3DH derives
//! it from the signing key instead); a signed prekey (Olm's fallback key)
//! is used when one-time prekeys run out.

use serde::{Deserialize, Serialize};

use crate::{DeviceId, UserId};

/// A one-time prekey: handed out once, then gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OneTimePrekey {
    /// Chosen by the device; unique among its unclaimed prekeys.
    pub key_id: u32,
    /// Curve25519 public key, base64 (32 bytes).
    pub public_key: String,
}

/// The medium-term prekey, signed by the identity key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SignedPrekey {
    pub key_id: u32,
    /// Curve25519 public key, base64 (32 bytes).
    pub public_key: String,
    /// Ed25519 signature by `identity_key` over the 32 raw bytes of
    /// `public_key`, base64 (64 bytes).
    pub signature: String,
}

/// `PUT /v1/devices/{device}/keys`: the caller's device publishes its
/// keys. The identity keys and the signed prekey replace what was there;
/// the one-time prekeys join the unclaimed ones (all of them are replaced
/// when the identity key changes: a reinstalled device).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DeviceKeysUpload {
    /// Ed25519 public key, base64 (32 bytes).
    pub identity_key: String,
    /// Curve25519 public key, base64 (32 bytes), for protocols with a
    /// separate key-agreement identity (Olm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_dh_key: Option<String>,
    pub signed_prekey: SignedPrekey,
    #[serde(default)]
    pub one_time_prekeys: Vec<OneTimePrekey>,
}

/// A device's published keys as others see them (`GET
/// /v1/users/{user}/devices`; the caller's own device at `GET
/// /v1/devices/{device}/keys`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceKeysView {
    pub user_id: UserId,
    pub device_id: DeviceId,
    pub identity_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_dh_key: Option<String>,
    pub signed_prekey: SignedPrekey,
    /// Unclaimed one-time prekeys left.
    pub one_time_prekeys_remaining: usize,
}

/// `GET /v1/users/{user}/devices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct UserDevices {
    pub user_id: UserId,
    pub devices: Vec<DeviceKeysView>,
}

/// `POST /v1/users/{user}/devices/{device}/claim`: what a session needs.
/// `one_time_prekey` is `null` when the device has none left; the session
/// then starts from the signed prekey alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClaimedKeys {
    pub user_id: UserId,
    pub device_id: DeviceId,
    pub identity_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_dh_key: Option<String>,
    pub signed_prekey: SignedPrekey,
    pub one_time_prekey: Option<OneTimePrekey>,
}
