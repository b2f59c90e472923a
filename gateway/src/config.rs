//! The gateway's settings. Plain data: the binary fills it from the
//! configuration file, the environment and flags.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchboard_plugin_host::fanout::FanOutPolicy;
use switchboard_protocol::ContentLimits;

/// Uploads (F13): what may be uploaded and how long signed URLs live.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MediaConfig {
    /// Largest upload, in bytes; larger requests get 413 `too_large`.
    pub max_bytes: u64,
    /// Content types that may be uploaded: `type/` allows a whole type
    /// (`image/`), anything else one exact type (`application/pdf`).
    pub allowed_mime: Vec<String>,
    /// How long an upload URL stays valid, in seconds.
    pub upload_url_secs: u64,
    /// How long a download URL stays valid, in seconds.
    pub download_url_secs: u64,
    /// Uploads no message references are deleted once they are this old,
    /// in seconds (a client sends the message within moments of the
    /// upload; a day leaves room for retries and slow networks).
    pub gc_grace_secs: u64,
    /// How often this gateway looks for such uploads, in seconds; 0 never.
    /// The same walk counts what each user and tenant stores.
    pub gc_every_secs: u64,
    /// Bytes of uploads one user may keep stored (the tenant quota
    /// `max_media_bytes_per_user` replaces it); a grant past it gets 429
    /// `quota_exceeded`.
    pub max_stored_bytes_per_user: u64,
    /// Bytes of uploads one tenant may keep stored (the tenant quota
    /// `max_media_bytes` replaces it).
    pub max_stored_bytes_per_tenant: u64,
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            max_bytes: 25 << 20,
            allowed_mime: [
                "image/",
                "audio/",
                "video/",
                "application/pdf",
                "text/plain",
            ]
            .map(String::from)
            .to_vec(),
            upload_url_secs: 900,
            download_url_secs: 300,
            gc_grace_secs: 86_400,
            gc_every_secs: 3600,
            max_stored_bytes_per_user: 10 << 30,
            max_stored_bytes_per_tenant: 1 << 40,
        }
    }
}

impl MediaConfig {
    pub fn allows(&self, mime: &str) -> bool {
        self.allowed_mime.iter().any(|a| {
            if a.ends_with('/') {
                mime.starts_with(a.as_str())
            } else {
                mime == a
            }
        })
    }
}

/// Limits on what one client may send. Every limit answers with a
/// documented error, never a dropped connection, unless noted.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest WebSocket text frame accepted; larger ones get `too_large`.
    pub max_frame_bytes: usize,
    /// Frames above this close the connection (code 1009): they are not
    /// even buffered. At least `max_frame_bytes`.
    pub hard_max_frame_bytes: usize,
    /// Largest REST request body; larger ones get 413 `too_large`.
    pub max_body_bytes: usize,
    /// Text, caption and ciphertext sizes.
    pub content: ContentLimits,
    /// Sends per second per connection (token bucket refill rate).
    pub sends_per_second: f64,
    /// Burst of sends a connection may make at once.
    pub send_burst: f64,
    /// Messages per second of one user across their connections on this
    /// gateway, and their burst (`rate_limited` past it).
    pub sends_per_second_per_user: f64,
    pub send_burst_per_user: f64,
    /// Typing indicators per second per connection, and their burst.
    pub typing_per_second: f64,
    pub typing_burst: f64,
    /// In a conversation that fans out on read, the `reaction` events of
    /// one message are coalesced over this window: each member's devices
    /// get the latest (it carries every count) once per window, not one
    /// per reaction. The reactor's own devices get theirs at once. 0:
    /// every reaction is delivered as it comes.
    pub reaction_coalesce_ms: u64,
    /// Sends per connection waiting for their answer (`ack` or `error`);
    /// past it a send is refused `rate_limited`.
    pub max_inflight_sends: usize,
    /// Bytes of the frames of a connection's sends JetStream has not
    /// stored yet (what the partition's ingest queue holds of it); past it
    /// a send is refused `rate_limited`. One send is always taken.
    pub max_inflight_send_bytes: usize,
    /// Bytes of frames queued for one connection; past this the client is
    /// not reading, its queue is dropped and the connection closed (1013),
    /// and it replays its backlog when it reconnects. A replay
    /// (`pull_backlog`) fills at most half of it.
    pub outbound_queue_bytes: usize,
    /// A socket write that cannot finish in this long (the client takes
    /// no bytes) closes the connection (1013).
    pub slow_client_timeout_ms: u64,
    /// How often the server pings an open WebSocket...
    pub ping_interval_ms: u64,
    /// ...and how long it then waits to hear anything back (a pong or any
    /// frame) before closing it (1001).
    pub pong_timeout_ms: u64,
    /// A session lives until its token's `exp` plus this grace, unless the
    /// client sends a fresh token (`refresh`); then it is closed (4001).
    pub token_expiry_grace_ms: u64,
    /// The longest a token may be valid: `exp - iat`, or `exp` less now
    /// for a token without `iat`; a longer one gets 401 `unauthorized`.
    pub max_token_lifetime_secs: u64,
    /// A tenant's JSON Web Key Set is fetched again this long after its
    /// last fetch...
    pub jwks_refresh_secs: u64,
    /// ...and at most once per this long when a token names a key it
    /// lacks, or after a failed fetch.
    pub jwks_min_refetch_secs: u64,
    /// The largest key set document read; a larger one fails the fetch
    /// (the keys held stay).
    pub jwks_max_bytes: usize,
    /// The most one key set fetch may take, connecting included.
    pub jwks_timeout_ms: u64,
    /// Whether a key set's URL (or a redirect from it) may be a private
    /// address: for an identity provider on the operator's own network.
    pub jwks_allow_private_targets: bool,
    /// HTTP: the whole request head must arrive within this...
    pub http_header_timeout_ms: u64,
    /// ...the body may pause for at most this between chunks...
    pub http_body_timeout_ms: u64,
    /// ...and a keep-alive connection with no request is closed after this.
    pub http_idle_timeout_ms: u64,
    /// An HTTP response whose bytes make no progress for this long (the
    /// client does not read: say it pipelines requests and never reads the
    /// answers) closes its connection at once, with what was unsent.
    pub http_write_timeout_ms: u64,
    /// Bytes hyper buffers for one HTTP connection each way: the longest
    /// request head, the pipelined requests read ahead of their turn, and
    /// the answers not yet taken by the socket (at least 8192).
    pub http_buffer_bytes: usize,
    /// Open TCP connections (HTTP and WebSocket) on this gateway; past it
    /// new ones are answered 503 `unavailable` and closed.
    pub max_connections: usize,
    /// Open TCP connections from one IP address; past it 429
    /// `rate_limited`. An IPv6 client counts by its address's first
    /// `ipv6_prefix_len` bits (one host often owns a /64); IPv4, also
    /// IPv4-mapped IPv6, by the whole address.
    pub max_connections_per_ip: usize,
    pub ipv6_prefix_len: u8,
    /// WebSocket connections of one user on this gateway when the tenant
    /// sets no `max_connections_per_user` quota; past it 429
    /// `quota_exceeded`.
    pub max_connections_per_user: u32,
    /// WebSocket connects of one user per second on this gateway, and
    /// their burst (each one writes the session registry); past it 429
    /// `rate_limited`.
    pub connects_per_second: f64,
    pub connect_burst: f64,
    /// REST requests of one user per second on this gateway, and their
    /// burst; past it 429 `rate_limited`.
    pub rest_requests_per_second: f64,
    pub rest_request_burst: f64,
    /// `ack_delivered` and `ack_read` frames per second per connection,
    /// and their burst (each can make a receipt for every member); past
    /// it an `error` `rate_limited`, and the ack is dropped.
    pub acks_per_second: f64,
    pub ack_burst: f64,
    /// Members one user may add per minute on this gateway (creating a
    /// conversation adds its members); past it 429 `rate_limited`.
    pub members_added_per_minute: f64,
    /// Replays of a moderation version over history
    /// (`POST /v1/admin/plugins/moderation/replay`) per tenant per minute
    /// on this gateway, one at a time; past it 429 `rate_limited`.
    pub plugin_replays_per_minute: f64,
    /// Messages one replay runs over at most (400 `invalid_request` past
    /// it), and its wall-clock budget: past it the replay stops and says
    /// so (`truncated`).
    pub plugin_replay_max_messages: usize,
    pub plugin_replay_budget_ms: u64,
    /// Upload grants (`POST /v1/media`) per user per minute, and the bytes
    /// they may grant per hour, per user and per tenant, on this gateway;
    /// past them 429 `rate_limited`.
    pub uploads_per_minute: f64,
    /// Reports (`POST .../reports`) of one user per minute on this
    /// gateway (v1.2); past it 429 `rate_limited`.
    pub reports_per_minute: f64,
    /// Profile changes (`PATCH /v1/me/profile`, and an admin's of
    /// someone's `custom`) by one user per minute on this gateway (v1.3):
    /// each is an event to everyone who shares a conversation with the
    /// user; past it 429 `rate_limited`.
    pub profile_updates_per_minute: f64,
    /// Tenant-wide bans in force one tenant keeps (v1.3, `PUT
    /// /v1/admin/bans/{user}`): every gateway holds them all in memory;
    /// past it 409 `conflict`.
    pub max_tenant_bans: usize,
    /// Exports (`GET /v1/me/export`) of one user per hour on this gateway
    /// (v1.2): each reads all they sent; past it 429 `rate_limited`.
    pub exports_per_hour: f64,
    /// Wrong operator tokens one client address may give per minute on
    /// this gateway; past it, every operator API request from that address
    /// (the right token included) is answered 429 until the minute refills.
    pub operator_failures_per_minute: u32,
    pub upload_bytes_per_hour_per_user: u64,
    pub upload_bytes_per_hour_per_tenant: u64,
    /// Members in `POST /v1/conversations` and member additions.
    pub max_members_per_request: usize,
    /// Longest conversation title, in characters (`max_title_bytes`, its
    /// old name, is read too).
    #[serde(alias = "max_title_bytes")]
    pub max_title_chars: usize,
    /// Default and maximum `limit` of `pull_backlog`.
    pub backlog_default_limit: usize,
    pub backlog_max_limit: usize,
    /// Default and maximum `limit` of a page of `GET /v1/conversations`
    /// (a larger `limit` is capped).
    pub conversations_default_limit: usize,
    pub conversations_max_limit: usize,
    /// Key-directory claims per second of one user (per gateway), and
    /// their burst: one user cannot drain everyone's one-time prekeys.
    pub key_claims_per_second: f64,
    pub key_claim_burst: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_bytes: 64 * 1024,
            hard_max_frame_bytes: 1024 * 1024,
            max_body_bytes: 64 * 1024,
            content: ContentLimits::default(),
            sends_per_second: 200.0,
            send_burst: 400.0,
            sends_per_second_per_user: 400.0,
            send_burst_per_user: 800.0,
            typing_per_second: 2.0,
            typing_burst: 4.0,
            reaction_coalesce_ms: 500,
            max_inflight_sends: 1024,
            max_inflight_send_bytes: 4 * 1024 * 1024,
            outbound_queue_bytes: 1 << 20,
            slow_client_timeout_ms: 10_000,
            ping_interval_ms: 30_000,
            pong_timeout_ms: 20_000,
            token_expiry_grace_ms: 5_000,
            max_token_lifetime_secs: 86_400,
            jwks_refresh_secs: 300,
            jwks_min_refetch_secs: 30,
            jwks_max_bytes: 64 * 1024,
            jwks_timeout_ms: 5_000,
            jwks_allow_private_targets: false,
            http_header_timeout_ms: 10_000,
            http_body_timeout_ms: 10_000,
            http_idle_timeout_ms: 60_000,
            http_write_timeout_ms: 30_000,
            http_buffer_bytes: 256 * 1024,
            max_connections: 20_000,
            max_connections_per_ip: 256,
            ipv6_prefix_len: 64,
            max_connections_per_user: 32,
            connects_per_second: 5.0,
            connect_burst: 60.0,
            rest_requests_per_second: 20.0,
            rest_request_burst: 60.0,
            acks_per_second: 50.0,
            ack_burst: 200.0,
            members_added_per_minute: 1000.0,
            plugin_replays_per_minute: 6.0,
            plugin_replay_max_messages: 1000,
            plugin_replay_budget_ms: 10_000,
            uploads_per_minute: 30.0,
            reports_per_minute: 10.0,
            profile_updates_per_minute: 10.0,
            exports_per_hour: 4.0,
            max_tenant_bans: 100_000,
            operator_failures_per_minute: 10,
            upload_bytes_per_hour_per_user: 2 << 30,
            upload_bytes_per_hour_per_tenant: 100 << 30,
            max_members_per_request: 1000,
            max_title_chars: 256,
            backlog_default_limit: 200,
            backlog_max_limit: 1000,
            conversations_default_limit: 50,
            conversations_max_limit: 200,
            key_claims_per_second: 5.0,
            key_claim_burst: 20.0,
        }
    }
}

/// One tenant's token verification keys. Two of a kind may be valid at
/// once, for rotation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    pub id: String,
    /// HS256 shared secrets (UTF-8 strings).
    #[serde(default)]
    pub hs256_secrets: Vec<String>,
    /// Ed25519 public keys for EdDSA tokens: 32 raw bytes, base64.
    #[serde(default)]
    pub ed25519_public_keys: Vec<String>,
    /// Web origins whose browser clients may use the tenant's tokens
    /// (CORS and WebSocket `Origin`); see `browser.rs`.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// The tenant's identity provider's JSON Web Key Set (RS256, ES256
    /// and EdDSA signing keys), fetched and kept by every gateway.
    #[serde(default)]
    pub jwks_url: Option<String>,
}

#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Shown in logs and as the NATS client name.
    pub gateway_id: String,
    pub limits: Limits,
    pub tenants: Vec<TenantConfig>,
    /// How long a REST command waits for its writer before answering 503.
    pub command_timeout: Duration,
    /// The receipt window: how often a connection's `ack_delivered` and
    /// `ack_read` marks are written and broadcast (in between they are
    /// coalesced per conversation, so a burst of acks is one write and one
    /// `receipt` per member).
    pub receipt_interval: Duration,
    /// Where messages fan out on write and where on read.
    pub fanout: FanOutPolicy,
    /// How long a `typing` `start` holds at the receiver unless refreshed.
    pub typing_expiry: Duration,
    /// The `sb_presence` bucket's TTL; keys are refreshed every third of it.
    pub presence_ttl: Duration,
    /// The longest a user's first connection here waits for every router
    /// of events to route the user here before `hello` (a router that
    /// died is waited for this long until its key expires).
    pub session_sync_timeout: Duration,
    /// Ingest partitions (the backbone's setting).
    pub partitions: u16,
    /// Search shards (v1.2): a tenant's queries go to
    /// `sb.search.<shard_of(tenant)>`. The search replicas' setting.
    pub search_shards: u16,
    /// Publishes to JetStream this gateway may have waiting for their
    /// acknowledgement at once; past it, sends wait (backpressure).
    pub jetstream_max_inflight: usize,
    /// Sends that queued up for one partition travel together in one
    /// JetStream message (`ingest.rs`): at most this many (1: every send
    /// alone)...
    pub ingest_batch_max_sends: usize,
    /// ...and at most this many bytes of commands (a larger send goes
    /// alone). Keep it under the ingest streams' `max_msg_size` (1 MiB).
    pub ingest_batch_max_bytes: usize,
    /// Uploads and downloads of media.
    pub media: MediaConfig,
    /// Serve the browser client at `/` (dev mode).
    pub serve_web_client: bool,
    /// Dev mode only: mint tokens for this tenant at `POST /v1/dev/token`,
    /// so the browser client can sign in without a backend of its own.
    pub dev_tokens: Option<DevTokens>,
    /// The bearer token of the operator API (`/v1/operator/...`); `None`
    /// turns the API off.
    pub operator_token: Option<String>,
    /// On shutdown, how long connections may take to see their in-flight
    /// sends answered before they are told to reconnect (1012).
    pub drain_timeout: Duration,
    /// Serve the process's Prometheus metrics at `/metrics`; `None` does
    /// not (they may be served on a listener of their own instead).
    pub metrics: Option<crate::metrics::Exposition>,
    /// Requests each backbone service of this gateway (the session
    /// registry's sync) takes at once, in all and per caller.
    pub services: switchboard_nats::admission::AdmissionLimits,
    /// The URL clients reach the gateways at (`https://chat.example.com`):
    /// the local blob store's upload and download URLs are made on it.
    /// `None`: on the address the gateway listens on, or, when that is a
    /// wildcard (`0.0.0.0`), as a path on the gateway. Never the request's
    /// `Host`, which the client chooses.
    pub public_url: Option<String>,
    /// Host names (with or without a port) requests may name in `Host`
    /// besides loopback names and addresses, and `public_url`'s host;
    /// others get 403 `forbidden` (a DNS-rebinding page names its own).
    /// `None` takes any `Host` (a gateway behind a proxy: nothing is
    /// derived from it).
    pub allowed_hosts: Option<Vec<String>>,
}

/// The tenant whose tokens `POST /v1/dev/token` mints (dev mode only).
#[derive(Debug, Clone)]
pub struct DevTokens {
    pub tenant: String,
    pub hs256_secret: String,
}

impl GatewayConfig {
    /// Refuses settings no gateway can work with, saying which.
    pub fn check(&self) -> Result<(), String> {
        if self.limits.hard_max_frame_bytes < self.limits.max_frame_bytes {
            return Err("hard_max_frame_bytes must be at least max_frame_bytes".into());
        }
        if self.operator_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err("operator_token must be at least 16 bytes".into());
        }
        if self.limits.jwks_refresh_secs == 0 || self.limits.jwks_timeout_ms == 0 {
            return Err("jwks_refresh_secs and jwks_timeout_ms must be at least 1".into());
        }
        if self.limits.ipv6_prefix_len > 128 {
            return Err("ipv6_prefix_len is at most 128".into());
        }
        if self.limits.max_token_lifetime_secs == 0 {
            return Err("max_token_lifetime_secs must be at least 1".into());
        }
        if let Some(url) = &self.public_url
            && !is_base_url(url)
        {
            return Err(format!(
                "public_url {url:?} is not an http(s) URL of a host: scheme, host, optional port and path, no query"
            ));
        }
        Ok(())
    }

    pub fn new(gateway_id: String, tenants: Vec<TenantConfig>) -> Self {
        Self {
            gateway_id,
            limits: Limits::default(),
            tenants,
            command_timeout: Duration::from_secs(10),
            receipt_interval: Duration::from_secs(1),
            fanout: FanOutPolicy::default(),
            typing_expiry: Duration::from_secs(5),
            presence_ttl: Duration::from_secs(30),
            session_sync_timeout: Duration::from_secs(1),
            partitions: 16,
            search_shards: 1,
            jetstream_max_inflight: 5000,
            ingest_batch_max_sends: 64,
            ingest_batch_max_bytes: 256 * 1024,
            media: MediaConfig::default(),
            serve_web_client: false,
            dev_tokens: None,
            operator_token: None,
            drain_timeout: Duration::from_secs(10),
            metrics: None,
            services: Default::default(),
            public_url: None,
            allowed_hosts: None,
        }
    }
}

/// `http(s)://host[:port][/path]`, printable, without query or fragment.
fn is_base_url(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    !authority.is_empty()
        && !authority.contains('@')
        && url.len() <= 2048
        && url
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_urls_are_checked() {
        let mut config = GatewayConfig::new("g".into(), Vec::new());
        for ok in [
            "https://chat.example.com",
            "https://chat.example.com/",
            "http://127.0.0.1:8080",
            "https://example.com/chat",
        ] {
            config.public_url = Some(ok.into());
            assert!(config.check().is_ok(), "{ok}");
        }
        for bad in [
            "chat.example.com",
            "ftp://x",
            "https://",
            "https://a b",
            "https://x/?q=1",
            "https://user@x",
        ] {
            config.public_url = Some(bad.into());
            assert!(config.check().is_err(), "{bad}");
        }
        config.public_url = None;
        config.limits.ipv6_prefix_len = 129;
        assert!(config.check().is_err());
        config.limits.ipv6_prefix_len = 128;
        assert!(config.check().is_ok());
    }
}
