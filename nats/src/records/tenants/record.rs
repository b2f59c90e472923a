//! A tenant's record as the `sb_tenants` bucket stores it ([`TenantRecord`]:
//! keys, quotas, push settings, origins), how the operator API shows it
//! ([`RedactedTenant`]), decoding a key's value, and the errors of tenant
//! records.

use serde::{Deserialize, Serialize};
use switchboard_protocol::content::ContentLimits;
use switchboard_protocol::moderation::Blocklist;
use switchboard_protocol::safety::MAX_RETENTION_DAYS;
use switchboard_protocol::webhooks::{EventType, MAX_WEBHOOKS, WebhookEndpoint};
use switchboard_protocol::{TenantId, Timestamp};

use crate::kv_key;

use super::error::TenantError;
use super::validation::{MAX_CLAIM_LEN, MAX_PUSH_DELAY_MS, check_origins, is_http_url};

/// Limits of one tenant. `None` leaves the deployment's default (or no
/// limit where there is none). Connection and per-tenant rate limits are
/// counted per gateway process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct TenantQuotas {
    /// Open WebSocket connections of one user.
    pub max_connections_per_user: Option<u32>,
    /// Open WebSocket connections of the whole tenant.
    pub max_connections: Option<u32>,
    /// Messages (sends and edits) per second of one connection.
    #[cfg_attr(feature = "schema", schemars(extend("exclusiveMinimum" = 0)))]
    pub messages_per_second_per_connection: Option<f64>,
    /// Messages per second of the whole tenant.
    #[cfg_attr(feature = "schema", schemars(extend("exclusiveMinimum" = 0)))]
    pub messages_per_second: Option<f64>,
    /// Members of one conversation.
    pub max_members_per_conversation: Option<u32>,
    /// Bytes of a message's text, caption or ciphertext.
    pub max_message_bytes: Option<u32>,
    /// Plugin calls of the tenant: wall-clock budget, fuel and memory of
    /// one call. They lower the deployment's `[plugins]` limits, never
    /// raise them.
    pub plugin_deadline_ms: Option<u32>,
    pub plugin_fuel: Option<u64>,
    pub plugin_memory_bytes: Option<u32>,
    /// Groups and channels a user may be put into per day by people they
    /// have not spoken with; 0 is no limit. Left out when unset, so that
    /// processes of releases before it still read the record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsolicited_groups_per_day: Option<u32>,
    /// Bytes of uploaded media one user may keep stored; replaces the
    /// deployment's `[media] max_stored_bytes_per_user`. Left out when
    /// unset, as the one above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_media_bytes_per_user: Option<u64>,
    /// Bytes of uploaded media the whole tenant may keep stored;
    /// replaces `[media] max_stored_bytes_per_tenant`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_media_bytes: Option<u64>,
}

impl TenantQuotas {
    /// The tenant's content limits: the deployment's `base`, lowered by
    /// its `max_message_bytes`. Every way a send comes in, and every
    /// moderator's rewrite, is held to these.
    pub fn content_limits(&self, base: &ContentLimits) -> ContentLimits {
        let mut limits = *base;
        if let Some(max) = self.max_message_bytes {
            let max = usize::try_from(max).unwrap_or(usize::MAX);
            limits.max_text_bytes = limits.max_text_bytes.min(max);
            limits.max_ciphertext_bytes = limits.max_ciphertext_bytes.min(max);
        }
        limits
    }

    /// Sets one quota from its name and a value (`none` removes it).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), TenantError> {
        let bad = || TenantError::Invalid(format!("{name} = {value:?} is not a number or none"));
        let int = || -> Result<Option<u32>, TenantError> {
            if value == "none" {
                Ok(None)
            } else {
                value.parse().map(Some).map_err(|_| bad())
            }
        };
        let big = || -> Result<Option<u64>, TenantError> {
            if value == "none" {
                Ok(None)
            } else {
                value.parse().map(Some).map_err(|_| bad())
            }
        };
        let rate = || -> Result<Option<f64>, TenantError> {
            if value == "none" {
                return Ok(None);
            }
            match value.parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
                _ => Err(bad()),
            }
        };
        match name {
            "max_connections_per_user" => self.max_connections_per_user = int()?,
            "max_connections" => self.max_connections = int()?,
            "messages_per_second_per_connection" => {
                self.messages_per_second_per_connection = rate()?;
            }
            "messages_per_second" => self.messages_per_second = rate()?,
            "max_members_per_conversation" => self.max_members_per_conversation = int()?,
            "max_message_bytes" => self.max_message_bytes = int()?,
            "plugin_deadline_ms" => self.plugin_deadline_ms = int()?,
            "plugin_memory_bytes" => self.plugin_memory_bytes = int()?,
            "unsolicited_groups_per_day" => self.unsolicited_groups_per_day = int()?,
            "plugin_fuel" => self.plugin_fuel = big()?,
            "max_media_bytes_per_user" => self.max_media_bytes_per_user = big()?,
            "max_media_bytes" => self.max_media_bytes = big()?,
            other => {
                return Err(TenantError::Invalid(format!(
                    "no quota {other:?}; the quotas are max_connections_per_user, max_connections, messages_per_second_per_connection, messages_per_second, max_members_per_conversation, max_message_bytes, plugin_deadline_ms, plugin_fuel, plugin_memory_bytes, max_media_bytes_per_user, max_media_bytes, unsolicited_groups_per_day"
                )));
            }
        }
        Ok(())
    }
}

/// What a push shows (F15). Ciphertext never shows more than `sender`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PreviewMode {
    /// "New message" only.
    Off,
    /// The sender, no content.
    #[default]
    Sender,
    /// The sender and the message's one-line preview (truncated).
    Text,
}

/// A tenant's webhook: a POST per push, signed with `secret`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// An `http(s)` URL with a host name or IPv4 address ([`is_http_url`]).
    #[cfg_attr(feature = "schema", schemars(length(max = super::validation::MAX_HTTP_URL_LEN), pattern(super::validation::HTTP_URL_PATTERN)))]
    pub url: String,
    /// HMAC-SHA256 key of `X-Switchboard-Signature`; at least 16 characters.
    #[cfg_attr(feature = "schema", schemars(length(min = 16)))]
    pub secret: String,
}

/// Firebase Cloud Messaging, HTTP v1 API, with a service account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct FcmSettings {
    pub project_id: String,
    /// The service account's `client_email` and `private_key` (PEM, RSA).
    pub client_email: String,
    pub private_key: String,
    /// OAuth 2.0 token endpoint (the service account's `token_uri`).
    #[serde(default = "default_fcm_token_url")]
    pub token_url: String,
    #[serde(default = "default_fcm_base_url")]
    pub base_url: String,
}

fn default_fcm_token_url() -> String {
    "https://oauth2.googleapis.com/token".into()
}

fn default_fcm_base_url() -> String {
    "https://fcm.googleapis.com".into()
}

/// Apple Push Notification service, token-based authentication.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ApnsSettings {
    pub team_id: String,
    pub key_id: String,
    /// The `.p8` signing key (PEM, P-256).
    pub private_key: String,
    /// The app's bundle id (`apns-topic`).
    pub topic: String,
    /// `https://api.push.apple.com`, or the sandbox's.
    #[serde(default = "default_apns_base_url")]
    pub base_url: String,
}

fn default_apns_base_url() -> String {
    "https://api.push.apple.com".into()
}

/// A tenant's push notifications: providers, preview and timing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PushSettings {
    #[serde(default)]
    pub preview: PreviewMode,
    /// How long a device has to acknowledge a message before it gets a
    /// push (a connected device acks at once and gets none).
    #[serde(default = "default_push_delay_ms")]
    #[cfg_attr(feature = "schema", schemars(range(max = MAX_PUSH_DELAY_MS)))]
    pub delay_ms: u64,
    /// After a push, further messages of the same conversation within this
    /// window push nothing to that device.
    #[serde(default = "default_collapse_ms")]
    pub collapse_ms: u64,
    /// Attempts of one push before it goes to the dead letters.
    #[serde(default = "default_max_attempts")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_attempts: u32,
    #[serde(default, deserialize_with = "optional_object")]
    pub webhook: Option<WebhookSettings>,
    #[serde(default, deserialize_with = "optional_object")]
    pub fcm: Option<FcmSettings>,
    #[serde(default, deserialize_with = "optional_object")]
    pub apns: Option<ApnsSettings>,
}

/// A struct from a JSON object only: serde's derive also takes an array
/// of the fields in order, which no operator means and the OpenAPI
/// document does not allow.
pub fn object<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::de::Error as _;
    let fields = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
    T::deserialize(serde_json::Value::Object(fields)).map_err(D::Error::custom)
}

/// As [`object`], or `null`.
pub fn optional_object<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::de::Error as _;
    match Option::<serde_json::Map<String, serde_json::Value>>::deserialize(d)? {
        Some(fields) => T::deserialize(serde_json::Value::Object(fields))
            .map(Some)
            .map_err(D::Error::custom),
        None => Ok(None),
    }
}

fn default_push_delay_ms() -> u64 {
    3000
}

fn default_collapse_ms() -> u64 {
    30_000
}

fn default_max_attempts() -> u32 {
    5
}

/// One tenant: its keys (two of a kind may be valid at once, for rotation)
/// and its quotas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantRecord {
    pub id: TenantId,
    /// HS256 shared secrets, at least 16 bytes each.
    #[serde(default)]
    pub hs256_secrets: Vec<String>,
    /// Ed25519 public keys (32 bytes, base64) for EdDSA tokens.
    #[serde(default)]
    pub ed25519_public_keys: Vec<String>,
    #[serde(default, deserialize_with = "object")]
    pub quotas: TenantQuotas,
    /// Push notifications; `None` sends none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "optional_object"
    )]
    pub push: Option<PushSettings>,
    /// Web origins (`https://chat.example.com`) whose browser clients may
    /// call the API and open WebSockets with the tenant's tokens; none by
    /// default (native clients send no origin and are not affected).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_origins: Vec<String>,
    /// The `iss` every token of the tenant must carry; `None`: any or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// A value the `aud` of every token of the tenant must be or contain;
    /// `None`: any or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// Where the tenant's identity provider publishes its signing keys (a
    /// JSON Web Key Set: RS256, ES256 and EdDSA keys): gateways fetch it,
    /// keep it, and fetch it again on a schedule and when a token names a
    /// key it lacks. `None`: only the keys above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_url: Option<String>,
    /// Outbound webhooks (v1.2): endpoints that get the tenant's events,
    /// at most 10. Also set by tenant admins (`PUT /v1/admin/webhooks`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<WebhookEndpoint>,
    /// The tenant's default retention (v1.2): messages of a conversation
    /// that sets no `retention_days` of its own go after this many days.
    /// `None`: kept unless the conversation says otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u32>,
    /// The tenant's word list (v1.3), applied to every text before its
    /// plugin; set by tenant admins (`PUT /v1/admin/blocklist`). Stored
    /// normalized (`Blocklist::normalized`); `None`: no list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocklist: Option<Blocklist>,
    /// What the tenant's pushes say, per kind (v1.3); set by tenant
    /// admins (`PUT /v1/admin/push/templates`), checked when set
    /// (`PushTemplates::check`); `None`: the default wording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_templates: Option<switchboard_protocol::push_templates::PushTemplates>,
    /// Whether the tenant's messages get link previews (v1.3); set by
    /// tenant admins (`PUT /v1/admin/previews`); `None`: on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_previews: Option<bool>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl TenantRecord {
    pub fn new(id: TenantId) -> Self {
        let now = Timestamp::now();
        Self {
            id,
            hs256_secrets: Vec::new(),
            ed25519_public_keys: Vec::new(),
            quotas: TenantQuotas::default(),
            push: None,
            allowed_origins: Vec::new(),
            issuer: None,
            audience: None,
            jwks_url: None,
            webhooks: Vec::new(),
            retention_days: None,
            blocklist: None,
            push_templates: None,
            link_previews: None,
            created_at: now,
            updated_at: now,
        }
    }

    /// What an operator can be shown: secrets as fingerprints only.
    /// The webhooks, their secrets as fingerprints.
    pub fn redacted_webhooks(&self) -> Vec<WebhookEndpoint> {
        self.webhooks
            .iter()
            .map(|w| WebhookEndpoint {
                secret: fingerprint(&w.secret),
                ..w.clone()
            })
            .collect()
    }

    /// Whether events of `kind` go anywhere.
    pub fn wants_events(&self, kind: EventType) -> bool {
        self.webhooks.iter().any(|w| w.wants(kind))
    }

    pub fn redacted(&self) -> RedactedTenant {
        let push = self.push.clone().map(|mut p| {
            if let Some(w) = &mut p.webhook {
                w.secret = fingerprint(&w.secret);
            }
            if let Some(f) = &mut p.fcm {
                f.private_key = fingerprint(&f.private_key);
            }
            if let Some(a) = &mut p.apns {
                a.private_key = fingerprint(&a.private_key);
            }
            p
        });
        RedactedTenant {
            id: self.id.clone(),
            hs256_secrets: self.hs256_secrets.iter().map(|s| fingerprint(s)).collect(),
            ed25519_public_keys: self.ed25519_public_keys.clone(),
            quotas: self.quotas,
            allowed_origins: self.allowed_origins.clone(),
            issuer: self.issuer.clone(),
            audience: self.audience.clone(),
            jwks_url: self.jwks_url.clone(),
            webhooks: self.redacted_webhooks(),
            push,
            retention_days: self.retention_days,
            blocklist: self.blocklist.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A tenant as the operator API and CLI show it: every secret (HS256
/// secrets, the webhook's secret, the FCM and APNs private keys) replaced
/// by its fingerprint, `sha256:<16 hex digits>`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "Tenant"))]
pub struct RedactedTenant {
    pub id: TenantId,
    /// Fingerprints (`sha256:<16 hex digits>`) of the HS256 secrets.
    pub hs256_secrets: Vec<String>,
    /// Ed25519 public keys, base64 (32 bytes).
    pub ed25519_public_keys: Vec<String>,
    pub quotas: TenantQuotas,
    /// Web origins whose browser clients may use the tenant's tokens.
    pub allowed_origins: Vec<String>,
    /// The `iss` the tenant's tokens must carry (`null`: not checked).
    pub issuer: Option<String>,
    /// What the tenant's tokens' `aud` must be or contain (`null`: not
    /// checked).
    pub audience: Option<String>,
    /// The identity provider's JSON Web Key Set (`null`: none).
    pub jwks_url: Option<String>,
    /// Outbound webhooks (v1.2), secrets as fingerprints.
    pub webhooks: Vec<WebhookEndpoint>,
    /// Push notifications (`null`: none), secrets as fingerprints.
    pub push: Option<PushSettings>,
    /// Days after which messages go where a conversation sets no
    /// retention of its own (`null`: kept).
    pub retention_days: Option<u32>,
    /// The tenant's word list (`null`: none).
    pub blocklist: Option<Blocklist>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The first 8 bytes of a secret's SHA-256, hex: enough to tell secrets
/// apart when rotating, useless for forging tokens.
pub fn fingerprint(secret: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, secret.as_bytes());
    let hex: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// The tenant an `sb_tenants` key names, if it names one.
pub fn tenant_of_key(key: &str) -> Option<TenantId> {
    kv_key::id(key).and_then(|id| TenantId::new(id).ok())
}

/// The value of tenant `id`'s key as every follower reads it: refused when
/// it does not decode or names another tenant.
pub fn decode_record(id: &TenantId, value: &[u8]) -> Result<TenantRecord, TenantError> {
    let record: TenantRecord =
        serde_json::from_slice(value).map_err(|source| TenantError::Undecodable {
            id: id.to_string(),
            source,
        })?;
    if record.id != *id {
        return Err(TenantError::Invalid(format!(
            "the record of tenant {id} names tenant {}",
            record.id
        )));
    }
    Ok(record)
}

/// Checks a tenant's outbound webhooks (v1.2): at most
/// [`MAX_WEBHOOKS`], each an http(s) URL with a secret of at least 16
/// characters and at least one event.
pub fn check_webhooks(webhooks: &[WebhookEndpoint]) -> Result<(), TenantError> {
    if webhooks.len() > MAX_WEBHOOKS {
        return Err(TenantError::Invalid(format!(
            "at most {MAX_WEBHOOKS} webhooks"
        )));
    }
    for w in webhooks {
        if !is_http_url(&w.url) {
            return Err(TenantError::Invalid(format!(
                "webhook url {:?} must be an http(s) URL with a host name or IPv4 address",
                w.url
            )));
        }
        if w.secret.chars().count() < 16 {
            return Err(TenantError::Invalid(
                "a webhook secret must be at least 16 characters".into(),
            ));
        }
        if w.events.is_empty() {
            return Err(TenantError::Invalid(format!(
                "webhook {} names no event",
                w.url
            )));
        }
    }
    Ok(())
}

/// Checks keys the way the gateways will use them, so that a record every
/// gateway would refuse is never written.
pub fn validate(record: &TenantRecord) -> Result<(), TenantError> {
    use base64::Engine as _;
    // Characters, as the OpenAPI document's minLength counts them (16
    // characters are at least 16 bytes).
    for s in &record.hs256_secrets {
        if s.chars().count() < 16 {
            return Err(TenantError::Invalid(
                "HS256 secrets must be at least 16 characters".into(),
            ));
        }
    }
    for k in &record.ed25519_public_keys {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(k.trim())
            .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(k.trim()))
            .map_err(|_| TenantError::Invalid(format!("Ed25519 key {k:?} is not base64")))?;
        if raw.len() != 32 {
            return Err(TenantError::Invalid(
                "Ed25519 public keys are 32 bytes".into(),
            ));
        }
    }
    check_origins(&record.allowed_origins)?;
    check_webhooks(&record.webhooks)?;
    if let Some(days) = record.retention_days
        && !(1..=MAX_RETENTION_DAYS).contains(&days)
    {
        return Err(TenantError::Invalid(format!(
            "retention_days is 1 to {MAX_RETENTION_DAYS}, or null for none"
        )));
    }
    if let Some(list) = &record.blocklist {
        let normalized = list
            .clone()
            .normalized()
            .map_err(|e| TenantError::Invalid(format!("blocklist: {e}")))?;
        if normalized != *list {
            return Err(TenantError::Invalid(
                "blocklist: words are kept in lower case, sorted, each once (PUT /v1/admin/blocklist stores them so)".into(),
            ));
        }
    }
    if record.jwks_url.as_deref().is_some_and(|u| !is_http_url(u)) {
        return Err(TenantError::Invalid(
            "jwks_url must be an http(s) URL with a host name or IPv4 address".into(),
        ));
    }
    if let Some(p) = &record.push {
        if let Some(w) = &p.webhook {
            if !is_http_url(&w.url) {
                return Err(TenantError::Invalid(
                    "push.webhook.url must be an http(s) URL with a host name or IPv4 address"
                        .into(),
                ));
            }
            if w.secret.chars().count() < 16 {
                return Err(TenantError::Invalid(
                    "push.webhook.secret must be at least 16 characters".into(),
                ));
            }
        }
        if p.delay_ms > MAX_PUSH_DELAY_MS {
            return Err(TenantError::Invalid(format!(
                "push.delay_ms must be at most {MAX_PUSH_DELAY_MS}"
            )));
        }
        if p.max_attempts == 0 {
            return Err(TenantError::Invalid(
                "push.max_attempts must be at least 1".into(),
            ));
        }
    }
    for (name, value) in [("issuer", &record.issuer), ("audience", &record.audience)] {
        if value
            .as_ref()
            .is_some_and(|v| v.is_empty() || v.chars().count() > MAX_CLAIM_LEN)
        {
            return Err(TenantError::Invalid(format!(
                "{name} must be 1 to {MAX_CLAIM_LEN} characters"
            )));
        }
    }
    let q = &record.quotas;
    for (name, v) in [
        ("messages_per_second", q.messages_per_second),
        (
            "messages_per_second_per_connection",
            q.messages_per_second_per_connection,
        ),
    ] {
        if v.is_some_and(|v| !v.is_finite() || v <= 0.0) {
            return Err(TenantError::Invalid(format!("{name} must be above 0")));
        }
    }
    Ok(())
}
