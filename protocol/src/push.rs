//! Push registration (F15): `PUT /v1/devices/{device}/push` tells
//! Switchboard how to reach a device that is not connected.

use serde::{Deserialize, Serialize};

/// Which service delivers to the device. The tenant configures each
/// provider's credentials; a device only names its own address there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PushProvider {
    /// The tenant's own HTTPS endpoint (which may fan out to anything).
    Webhook,
    /// Firebase Cloud Messaging (Android, web).
    Fcm,
    /// Apple Push Notification service.
    Apns,
}

/// `PUT /v1/devices/{device}/push` body, and what `GET` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PushRegistration {
    pub provider: PushProvider,
    /// The device's token at that provider (FCM registration token, APNs
    /// device token in hex, or whatever the tenant's webhook expects). At
    /// most 4096 bytes.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = MAX_PUSH_TOKEN_BYTES)))]
    pub token: String,
}

pub const MAX_PUSH_TOKEN_BYTES: usize = 4096;
