//! The records of `sb_plugins` and the names on the backbone: a version
//! as the bucket holds it, the key of a tenant's hook (active and shadow),
//! the object of a component in `sb_plugin_code`. Plain data, read by the
//! rest of the crate; it reads only the hook names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use switchboard_nats::kv_key;
use switchboard_protocol::{TenantId, Timestamp};

use crate::hook::Hook;

/// What moderation does when its plugin fails. The other hooks always
/// fall back to the built-in default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Refuse the message (`unavailable`): nothing unmoderated is stored.
    #[default]
    Closed,
    /// Store the message as sent.
    Open,
}

/// How a version became active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    Deploy,
    Rollback,
}

/// The value of `sb_plugins` key `<tenant>.<hook>`: one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VersionRecord {
    /// `sha256:<hex>` of the component; the object `<tenant>.<digest>`.
    pub digest: String,
    pub size: u64,
    /// The values the plugin reads through the `config` import.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    #[serde(default)]
    pub on_failure: OnFailure,
    pub activation: Activation,
    pub activated_at: Timestamp,
    pub activated_by: String,
}

pub fn kv_key(tenant: &TenantId, hook: Hook) -> String {
    format!("{}.{}", kv_key::part(tenant.as_str()), hook.as_str())
}

/// Where a version is installed: the active one decides; a shadow runs
/// beside it on the same input, without effect (`shadow.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Active,
    Shadow,
}

/// The key of the tenant's shadow version for the hook.
pub fn shadow_kv_key(tenant: &TenantId, hook: Hook) -> String {
    format!("{}.shadow", kv_key(tenant, hook))
}

/// Where processes answer how they run a tenant's hook: every gateway
/// and worker replies to a request on `sb.plugins.status.<key>`, the key
/// as in `sb_plugins`.
pub const STATUS_SUBJECT_PREFIX: &str = "sb.plugins.status";

pub fn object_name(tenant: &TenantId, digest: &str) -> String {
    format!("{}.{}", tenant.as_str(), digest)
}

/// The digest of `name` if it is one of `tenant`'s objects. Tenant ids
/// may hold dots and digests never do, so `acme.x.sha256:...` is tenant
/// `acme.x`'s, never `acme`'s.
pub fn digest_of_object<'a>(tenant: &TenantId, name: &'a str) -> Option<&'a str> {
    name.strip_prefix(tenant.as_str())?
        .strip_prefix('.')
        .filter(|digest| digest.starts_with("sha256:") && !digest.contains('.'))
}

/// The tenant, hook and slot an `sb_plugins` key names, if it names them.
pub fn parse_key(key: &str) -> Option<(TenantId, Hook, Slot)> {
    let (tenant, rest) = key.split_once('.')?;
    let (hook, slot) = match rest.strip_suffix(".shadow") {
        Some(hook) => (hook, Slot::Shadow),
        None => (rest, Slot::Active),
    };
    Some((
        TenantId::new(kv_key::id(tenant)?).ok()?,
        Hook::parse(hook)?,
        slot,
    ))
}

/// One entry of a hook's version list, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VersionEntry {
    pub revision: u64,
    /// `null` for a removal (the built-in default from then on).
    #[serde(flatten)]
    pub record: Option<VersionRecord>,
}
