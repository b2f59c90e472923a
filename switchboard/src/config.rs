//! Configuration: defaults, then the TOML file, then the environment, then
//! flags (each later source wins). Only this module reads files and
//! environment variables; the library crates take plain config structs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;
use switchboard_gateway::{Limits, MediaConfig, TenantConfig};
use switchboard_plugin_host::PluginLimits;

/// The local demo tenant's secret when `SWITCHBOARD_DEMO_SECRET` is unset.
/// For loopback development only: `switchboard dev` listens on loopback.
pub const DEFAULT_DEMO_SECRET: &str = "switchboard-local-demo-secret";
pub const DEMO_TENANT: &str = "demo";

/// The configuration file. Every field is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Seed servers: one string (comma-separated) or a list.
    pub nats_url: Option<ServerList>,
    /// Credentials and TLS towards NATS (`[nats]`).
    #[serde(default)]
    pub nats: Option<NatsSection>,
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    /// `embedded` (this process opens the store), `nats` (use the store
    /// served by the process that holds it) or `scylla` (every process
    /// connects to the cluster of `[scylla]`).
    pub store: Option<StoreKind>,
    /// The ScyllaDB cluster of `store = "scylla"` (`[scylla]`).
    #[serde(default)]
    pub scylla: Option<switchboard_store_scylla::ScyllaConfig>,
    pub partitions: Option<u16>,
    /// Search (v1.2, `[search]`): the role's index and the shards the
    /// gateways ask.
    #[serde(default)]
    pub search: Option<SearchSection>,
    pub replicas: Option<usize>,
    pub log: Option<String>,
    pub nats_server: Option<PathBuf>,
    pub nats_port: Option<u16>,
    pub demo_secret: Option<String>,
    pub command_timeout_ms: Option<u64>,
    pub receipt_interval_ms: Option<u64>,
    /// How long a dead gateway's users stay online, in milliseconds
    /// (the `sb_presence` bucket's TTL; default 30000).
    pub presence_ttl_ms: Option<u64>,
    /// How long a user's first connection to a gateway waits for every
    /// router of events to route the user there, before `hello`, in
    /// milliseconds (default 1000; at most 10000).
    pub session_sync_timeout_ms: Option<u64>,
    /// Serve `/metrics` on the gateway's own port: default false for
    /// `gateway` (metrics name tenants: scrape `--metrics-listen`), true
    /// for `dev`, which listens on loopback only.
    pub metrics_on_listen: Option<bool>,
    /// The URL clients reach the gateways at (`https://chat.example.com`):
    /// local blob URLs are made on it. Unset: on the listen address, or a
    /// path on the gateway when that is a wildcard address.
    pub public_url: Option<String>,
    /// `Host` names requests may use besides loopback ones and
    /// `public_url`'s: `dev` answers only those (DNS rebinding); a gateway
    /// checks `Host` only when this is set.
    pub allowed_hosts: Option<Vec<String>>,
    /// Serve the browser client at `/` on a gateway (default false;
    /// `switchboard dev` always does). Without dev tokens, it signs in
    /// with a token pasted into it.
    pub web_client: Option<bool>,
    pub fanout_threshold: Option<usize>,
    pub store_request_timeout_ms: Option<u64>,
    pub worker_max_batch: Option<usize>,
    /// How long after sending the sender may edit, in seconds (default 900).
    pub edit_window_secs: Option<u64>,
    /// Groups and channels a user may be put into per day by people they
    /// have not spoken with (default 20; 0: no limit); a tenant's
    /// `unsolicited_groups_per_day` quota replaces it.
    pub unsolicited_groups_per_day: Option<u32>,
    /// JetStream's dedupe window for sends, in milliseconds (default 120000).
    pub duplicate_window_ms: Option<u64>,
    /// How long an undelivered inbox entry waits for its device, in
    /// seconds (default 2592000, 30 days).
    pub inbox_ttl_secs: Option<u64>,
    /// How often expired inbox entries are swept, in seconds (default 3600).
    pub inbox_sweep_secs: Option<u64>,
    /// How often messages past their conversation's retention or
    /// disappearing time are expired, in seconds (default 60): the most a
    /// message outlives its time.
    pub expiry_pass_secs: Option<u64>,
    /// How often every conversation of the tenants with a default
    /// retention is visited, in seconds (default 3600): the most such a
    /// message outlives its time.
    pub tenant_retention_pass_secs: Option<u64>,
    /// Which events go to `SB_EVENTS`: `"webhooks"` (the default: the
    /// types some webhook of their tenant wants) or `"all"` (every event
    /// of every tenant, for operators consuming the stream).
    pub event_stream: Option<switchboard_worker::EventStream>,
    /// On SIGTERM, how long a gateway's connections may take to see their
    /// in-flight sends answered before they are closed with 1012, in
    /// milliseconds (default 10000; at most 15000, inside the 20 s grace).
    pub drain_timeout_ms: Option<u64>,
    /// Publishes a gateway may have waiting for JetStream's ack (default 5000).
    pub jetstream_max_inflight: Option<usize>,
    /// Sends of one partition that travel together in one JetStream
    /// message at most (default 64; 1 sends each alone).
    pub ingest_batch_max_sends: Option<usize>,
    /// Bytes of commands one such message carries at most (default
    /// 262144; at most 524288, under the ingest streams' 1 MiB).
    pub ingest_batch_max_bytes: Option<usize>,
    #[serde(default)]
    pub limits: Option<Limits>,
    /// Uploads: size and type limits, URL lifetimes (`[media]`).
    #[serde(default)]
    pub media: Option<MediaConfig>,
    /// Where blobs live (`[blobs]`): the local directory (default) or S3.
    #[serde(default)]
    pub blobs: Option<BlobsConfig>,
    /// The secret that signs local blob URLs. Every gateway serving the
    /// same blob directory needs the same one; unset, each process makes
    /// up its own (fine for `dev`).
    pub blob_url_secret: Option<String>,
    /// The bearer token of the operator API (`/v1/operator/tenants`);
    /// unset, the API is off. At least 16 bytes.
    pub operator_token: Option<String>,
    /// Limits of tenant plugin calls (`[plugins]`).
    #[serde(default)]
    pub plugins: Option<PluginLimits>,
    /// The push stage's deployment settings (`[push]`); tenants configure
    /// their providers in `sb_tenants`.
    #[serde(default)]
    pub push: Option<PushSection>,
    /// Link previews (`[previews]`, v1.3): on, within their default
    /// bounds, unless it says otherwise.
    #[serde(default)]
    pub previews: Option<PreviewsSection>,
    /// Moving old history to the blob store (`[archive]`); absent, nothing
    /// is archived (archived history is read back either way).
    #[serde(default)]
    pub archive: Option<ArchiveSection>,
    /// Requests each backbone service of this process (the store
    /// service, the session registry's sync, the plugin services) takes
    /// at once, in all and per caller (`[services]`).
    #[serde(default)]
    pub services: Option<switchboard_nats::admission::AdmissionLimits>,
    #[serde(default)]
    pub tenants: Vec<TenantConfig>,
}

/// Seed servers as the file gives them.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ServerList {
    /// `"nats://a:4222,nats://b:4222"`
    Joined(String),
    /// `["nats://a:4222", "nats://b:4222"]`
    List(Vec<String>),
}

impl ServerList {
    fn servers(&self) -> Vec<String> {
        match self {
            Self::Joined(s) => switchboard_nats::parse_servers(s),
            Self::List(l) => l
                .iter()
                .flat_map(|s| switchboard_nats::parse_servers(s))
                .collect(),
        }
    }
}

/// `[nats]`: how this process authenticates to NATS and which TLS it
/// speaks. At most one authentication method. Secrets may also come from
/// the environment (`SWITCHBOARD_NATS_PASSWORD`, `SWITCHBOARD_NATS_TOKEN`,
/// `SWITCHBOARD_NATS_NKEY_SEED`, or their `_FILE` forms: `secrets.rs`),
/// which wins over the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NatsSection {
    pub user: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    /// A file holding an NKey seed (`SU...`).
    pub nkey_seed_file: Option<PathBuf>,
    /// An NKey seed itself: only from `SWITCHBOARD_NATS_NKEY_SEED`.
    #[serde(skip)]
    pub nkey_seed: Option<String>,
    /// A `.creds` file (decentralised JWT auth, as `nsc` writes it).
    pub creds_file: Option<PathBuf>,
    /// A PEM file of CA certificates to trust for the servers.
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key (PEM) for mutual TLS.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Refuse any server that does not speak TLS (implied by a CA or a
    /// client certificate).
    pub tls_required: Option<bool>,
    /// Create and update the streams and buckets at start-up (default
    /// true). A process whose NATS user may not manage JetStream sets it
    /// false and only checks that they exist.
    pub define_backbone: Option<bool>,
}

/// The NATS flags every process that connects to NATS takes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NatsArgs {
    /// NATS seed server URL(s), comma-separated (`tls://` for TLS).
    #[arg(long, env = "SWITCHBOARD_NATS_URL")]
    pub nats_url: Option<String>,
    /// A `.creds` file (NATS decentralised JWT auth).
    #[arg(long, env = "SWITCHBOARD_NATS_CREDS")]
    pub nats_creds: Option<PathBuf>,
    /// A file holding an NKey seed.
    #[arg(long, env = "SWITCHBOARD_NATS_NKEY_SEED_FILE")]
    pub nats_nkey_seed_file: Option<PathBuf>,
    /// NATS user (the password comes from SWITCHBOARD_NATS_PASSWORD or
    /// the file's `[nats] password`).
    #[arg(long, env = "SWITCHBOARD_NATS_USER")]
    pub nats_user: Option<String>,
    /// CA certificates (PEM) to trust for the NATS servers.
    #[arg(long, env = "SWITCHBOARD_NATS_CA")]
    pub nats_ca: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS with NATS.
    #[arg(long, env = "SWITCHBOARD_NATS_CERT", requires = "nats_key")]
    pub nats_cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, env = "SWITCHBOARD_NATS_KEY", requires = "nats_cert")]
    pub nats_key: Option<PathBuf>,
    /// Create and update the streams and buckets at start-up (default
    /// true); false only checks that they exist (a NATS user that may not
    /// manage JetStream).
    #[arg(long, env = "SWITCHBOARD_DEFINE_BACKBONE")]
    pub define_backbone: Option<bool>,
}

/// Where an NKey seed comes from.
enum NkeySeed {
    Value(String),
    File(PathBuf),
}

fn read_secret_file(what: &str, path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the NATS {what} {}", path.display()))?;
    let text = text.trim().to_owned();
    if text.is_empty() {
        anyhow::bail!("the NATS {what} {} is empty", path.display());
    }
    Ok(text)
}

fn existing_file(what: &str, path: &Path) -> anyhow::Result<PathBuf> {
    if !path.is_file() {
        anyhow::bail!("the NATS {what} {} does not exist", path.display());
    }
    Ok(path.to_path_buf())
}

/// How this process reaches NATS: flags, then the environment, then the
/// file, then `nats://127.0.0.1:4222` without auth.
pub fn nats_config(
    args: &NatsArgs,
    file: &FileConfig,
    name: &str,
) -> anyhow::Result<switchboard_nats::NatsConfig> {
    use switchboard_nats::{NatsAuth, NatsConfig, NatsTls};
    let section = file.nats.clone().unwrap_or_default();
    let servers = match (&args.nats_url, &file.nats_url) {
        (Some(flag), _) => switchboard_nats::parse_servers(flag),
        (None, Some(list)) => list.servers(),
        (None, None) => vec!["nats://127.0.0.1:4222".to_owned()],
    };
    if servers.is_empty() {
        anyhow::bail!("the NATS server list is empty");
    }
    let user = args.nats_user.clone().or(section.user.clone());
    // The environment's secrets are in `section` already (`secrets::apply`).
    let password = section.password.clone();
    let token = section.token.clone();
    let nkey_path = args
        .nats_nkey_seed_file
        .clone()
        .or(section.nkey_seed_file.clone());
    let nkey = match (section.nkey_seed.clone(), nkey_path) {
        (Some(_), Some(path)) => anyhow::bail!(
            "both SWITCHBOARD_NATS_NKEY_SEED and an NKey seed file ({}) are given: give one of them",
            path.display()
        ),
        (Some(seed), None) => Some(NkeySeed::Value(seed)),
        (None, Some(path)) => Some(NkeySeed::File(path)),
        (None, None) => None,
    };
    let creds = args.nats_creds.clone().or(section.creds_file.clone());
    let methods = [
        user.is_some(),
        token.is_some(),
        nkey.is_some(),
        creds.is_some(),
    ];
    if methods.iter().filter(|m| **m).count() > 1 {
        anyhow::bail!(
            "NATS authentication: give one of user and password, token, NKey seed file or credentials file"
        );
    }
    let auth = if let Some(user) = user {
        let Some(password) = password else {
            anyhow::bail!(
                "NATS user {user:?} needs a password (SWITCHBOARD_NATS_PASSWORD, SWITCHBOARD_NATS_PASSWORD_FILE or [nats] password)"
            );
        };
        NatsAuth::UserPassword { user, password }
    } else if password.is_some() {
        anyhow::bail!(
            "a NATS password was given without a user (set SWITCHBOARD_NATS_USER or [nats] user)"
        );
    } else if let Some(token) = token {
        NatsAuth::Token(token)
    } else if let Some(seed) = nkey {
        NatsAuth::NKey(match seed {
            NkeySeed::Value(seed) => seed,
            NkeySeed::File(path) => read_secret_file("NKey seed file", &path)?,
        })
    } else if let Some(path) = creds {
        // Whole: the file's decorations end in line breaks its parser needs.
        let text = read_secret_file("credentials file", &path)?;
        NatsAuth::Credentials(format!("{text}\n"))
    } else {
        NatsAuth::None
    };
    let ca_file = args
        .nats_ca
        .clone()
        .or(section.ca_file.clone())
        .map(|p| existing_file("CA file", &p))
        .transpose()?;
    let client_cert = match (
        args.nats_cert.clone().or(section.cert_file.clone()),
        args.nats_key.clone().or(section.key_file.clone()),
    ) {
        (Some(cert), Some(key)) => Some((
            existing_file("client certificate", &cert)?,
            existing_file("client key", &key)?,
        )),
        (None, None) => None,
        _ => anyhow::bail!("a NATS client certificate needs both cert_file and key_file"),
    };
    let required = section
        .tls_required
        .unwrap_or(ca_file.is_some() || client_cert.is_some());
    Ok(NatsConfig {
        servers,
        name: name.to_owned(),
        auth,
        tls: NatsTls {
            ca_file,
            client_cert,
            required,
        },
        inbox_prefix: None,
    })
}

/// `[blobs]`: `backend = "local"` keeps blobs in `<data_dir>/blobs`;
/// `backend = "s3"` in the bucket of `[blobs.s3]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlobsConfig {
    pub backend: BlobBackend,
    #[serde(default)]
    pub s3: Option<switchboard_blob::s3::S3Config>,
    /// The largest object Switchboard writes to the blob store itself and
    /// reads back whole (message archives), in bytes (default 256 MiB).
    #[serde(default)]
    pub max_object_bytes: Option<u64>,
}

impl BlobsConfig {
    /// The largest object written or read whole, of `[blobs]` or the
    /// default.
    pub fn max_object_bytes(blobs: Option<&Self>) -> u64 {
        blobs
            .and_then(|b| b.max_object_bytes)
            .unwrap_or(switchboard_blob::DEFAULT_MAX_OBJECT_BYTES)
    }
}

/// `[archive]` (F14): day buckets at least `after_days` old move to the
/// blob store of `[blobs]`, one compressed object per conversation and day.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveSection {
    /// Age in whole days (today's bucket is 0 days old). Keep it above the
    /// inbox lifetime: archiving drops the inbox entries of what it moves.
    pub after_days: u32,
    /// How often the leader worker looks for old buckets (default 3600).
    #[serde(default = "default_archive_every")]
    pub every_secs: u64,
    /// Most buckets one look moves (default 10000).
    #[serde(default = "default_archive_max")]
    pub max_per_scan: usize,
}

/// `[push]`: how the push stage reaches the providers.
/// `[search]`: the `switchboard search` role (v1.2) and where gateways
/// send queries.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchSection {
    /// Whether search runs (default true): false stops the writers'
    /// feed of `SB_INDEX` and `dev`'s replica (gateways then answer
    /// search with 503).
    pub enabled: Option<bool>,
    /// Shards tenants are spread over (default 1); the same in every
    /// gateway and search replica.
    pub shards: Option<u16>,
    /// This replica's shard, 0 to `shards - 1` (default 0).
    pub shard: Option<u16>,
    /// Where this replica keeps its index (default `<data_dir>/search`).
    pub dir: Option<PathBuf>,
    /// At most this long between a change reaching the replica and being
    /// searchable (default 500 ms).
    pub commit_every_ms: Option<u64>,
    /// The index writer's memory (default 64 MiB).
    pub memory_bytes: Option<usize>,
    /// Queries computing at once on a replica (default: its cores), of
    /// one tenant (4) and of one user (2); past the last two a query is
    /// answered 429, past the first it waits its turn.
    pub max_concurrent_queries: Option<usize>,
    pub tenant_concurrent_queries: Option<usize>,
    pub user_concurrent_queries: Option<usize>,
    /// A query's time on a replica, its wait included (default 4000 ms;
    /// at most 4500, as gateways wait 5 s): past it, it stops computing
    /// and is answered 503.
    pub query_timeout_ms: Option<u64>,
}

impl SearchSection {
    /// A search replica's settings, its index under `data_dir` unless
    /// `dir` says where.
    pub fn replica(
        &self,
        data_dir: &std::path::Path,
    ) -> anyhow::Result<switchboard_search::SearchConfig> {
        let dir = self.dir.clone().unwrap_or_else(|| data_dir.join("search"));
        let mut config = switchboard_search::SearchConfig::new(dir);
        let shards = self.shards.unwrap_or(1).max(1);
        let shard = self.shard.unwrap_or(0);
        if shard >= shards {
            anyhow::bail!("[search] shard {shard} is not below shards {shards}");
        }
        config.shard = switchboard_search::Shard {
            index: shard,
            count: shards,
        };
        if let Some(ms) = self.commit_every_ms {
            config.commit_every = std::time::Duration::from_millis(ms.clamp(10, 2_000));
        }
        if let Some(n) = self.max_concurrent_queries {
            config.queries.concurrent = n.max(1);
        }
        if let Some(n) = self.tenant_concurrent_queries {
            config.queries.per_tenant = n.max(1);
        }
        if let Some(n) = self.user_concurrent_queries {
            config.queries.per_user = n.max(1);
        }
        if let Some(ms) = self.query_timeout_ms {
            if !(1..=4500).contains(&ms) {
                anyhow::bail!(
                    "[search] query_timeout_ms must be 1 to 4500 (gateways wait 5 s), not {ms}"
                );
            }
            config.queries.timeout = std::time::Duration::from_millis(ms);
        }
        if let Some(bytes) = self.memory_bytes {
            config.memory_bytes = bytes;
        }
        Ok(config)
    }
}

/// `[previews]`: the link previews stage of every worker (v1.3).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PreviewsSection {
    /// `false`: no message is unfurled, whatever its tenant says (the
    /// stage does not run, writers publish no job). Default `true`.
    pub enabled: Option<bool>,
    /// The whole fetch of one link (every redirect, the page's head) and
    /// of its image, each, in milliseconds (default 5000).
    pub timeout_ms: Option<u64>,
    /// Connecting, per hop, in milliseconds (default 2000).
    pub connect_timeout_ms: Option<u64>,
    /// Redirects followed at most (default 5).
    pub max_redirects: Option<usize>,
    /// Bytes of a page read at most (default 524288: its head is at the
    /// start).
    pub max_page_bytes: Option<usize>,
    /// The largest image kept (default 2097152); a larger one leaves the
    /// card without.
    pub max_image_bytes: Option<usize>,
    /// Jobs in progress at once per worker (default 64), and of one
    /// tenant (default 16; its others wait up to 10 s, then are shed).
    pub concurrency: Option<usize>,
    pub tenant_concurrency: Option<usize>,
    /// Private networks a link may reach (`"10.1.0.0/16"`, `"127.0.0.1"`);
    /// none by default: a link to a private address, or one that
    /// resolves or redirects to one, gets no card.
    pub allow_private: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PushSection {
    /// A CA certificate (PEM file) to trust besides the public ones: a
    /// private proxy in front of FCM and APNs, or a test server.
    pub ca_file: Option<PathBuf>,
    /// Timeout of one provider call, in milliseconds (default 10000):
    /// connecting, sending and reading the answer.
    pub timeout_ms: Option<u64>,
    /// Timeout of connecting to a provider, within `timeout_ms` (default
    /// 5000).
    pub connect_timeout_ms: Option<u64>,
    /// Jobs of each push stage in progress at once per worker (default 64).
    pub concurrency: Option<usize>,
    /// Provider calls of one tenant in progress at once per worker
    /// (default 8); more wait in JetStream.
    pub tenant_concurrency: Option<usize>,
    /// Sends of one tenant waiting in `SB_PUSH` past which its messages
    /// queue no more pushes (default 1000).
    pub tenant_max_queued: Option<u64>,
    /// Bytes read of an answer whose status is all that counts (a
    /// webhook's; default 4096).
    pub status_answer_max_bytes: Option<usize>,
    /// Bytes read of an answer that is parsed (the FCM token endpoint's,
    /// FCM's and APNs' error reasons; default 16384).
    pub parsed_answer_max_bytes: Option<usize>,
    /// Let tenants' provider and webhook URLs point at private addresses
    /// (loopback, RFC 1918, link-local); off by default. Outbound
    /// webhooks (v1.2) follow it too.
    pub allow_private_targets: bool,
    /// Outbound webhooks (v1.2): attempts of one event at one endpoint
    /// before its dead letter (8), the first retry's delay (1000 ms) and
    /// the longest (60000 ms).
    pub webhook_max_attempts: Option<u32>,
    pub webhook_first_retry_ms: Option<u64>,
    pub webhook_max_retry_ms: Option<u64>,
    /// Webhook calls in progress at once per worker (64) and per tenant
    /// (8).
    pub webhook_concurrency: Option<usize>,
    pub webhook_tenant_concurrency: Option<usize>,
    /// Events of one tenant handed to the dispatcher and not yet
    /// delivered or dead-lettered (500): its consumer's
    /// `max_ack_pending`, the share no other tenant waits behind.
    pub webhook_tenant_in_flight: Option<i64>,
    /// An endpoint is given up on for `webhook_cool_down_ms` (300000) when
    /// at least `webhook_failure_ratio` (0.75) of its last
    /// `webhook_failure_window` calls (20) failed, counted once half the
    /// window has been tried.
    pub webhook_failure_window: Option<u32>,
    pub webhook_failure_ratio: Option<f64>,
    pub webhook_cool_down_ms: Option<u64>,
}

fn default_archive_every() -> u64 {
    3600
}

fn default_archive_max() -> usize {
    10_000
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlobBackend {
    Local,
    S3,
}

impl BlobsConfig {
    /// The S3 settings, with their credentials.
    pub fn s3(&self) -> anyhow::Result<switchboard_blob::s3::S3Config> {
        let Some(s3) = self.s3.clone() else {
            anyhow::bail!("[blobs] backend = \"s3\" needs a [blobs.s3] table with the bucket");
        };
        // The environment's keys are in it already (`secrets::apply`).
        if s3.access_key_id.is_empty() || s3.secret_access_key.is_empty() {
            anyhow::bail!(
                "S3 credentials missing: set access_key_id and secret_access_key in [blobs.s3], or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or their _FILE variants)"
            );
        }
        Ok(s3)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    Embedded,
    Nats,
    Scylla,
}

impl FileConfig {
    pub fn load(path: Option<&Path>) -> anyhow::Result<Self> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading configuration file {}", path.display()))?;
        toml::from_str(&text)
            .with_context(|| format!("parsing configuration file {}", path.display()))
    }

    /// Whether search runs (`[search] enabled`, default true).
    pub fn search_enabled(&self) -> bool {
        self.search.as_ref().and_then(|s| s.enabled).unwrap_or(true)
    }

    pub fn command_timeout(&self) -> Duration {
        Duration::from_millis(self.command_timeout_ms.unwrap_or(10_000))
    }

    pub fn receipt_interval(&self) -> Duration {
        Duration::from_millis(self.receipt_interval_ms.unwrap_or(1000).max(10))
    }

    pub fn presence_ttl(&self) -> Option<Duration> {
        self.presence_ttl_ms
            .map(|ms| Duration::from_millis(ms.max(1000)))
    }

    pub fn fanout(&self) -> switchboard_plugin_host::fanout::FanOutPolicy {
        let mut policy = switchboard_plugin_host::fanout::FanOutPolicy::default();
        if let Some(t) = self.fanout_threshold {
            policy.threshold = t;
        }
        policy
    }

    pub fn store_request_timeout(&self) -> Duration {
        Duration::from_millis(self.store_request_timeout_ms.unwrap_or(10_000))
    }
}

/// The demo tenant, whose HS256 secret comes from `SWITCHBOARD_DEMO_SECRET`.
pub fn demo_tenant(secret: &str) -> TenantConfig {
    TenantConfig {
        id: DEMO_TENANT.to_owned(),
        hs256_secrets: vec![secret.to_owned()],
        ed25519_public_keys: Vec::new(),
        allowed_origins: Vec::new(),
        jwks_url: None,
    }
}

/// The worker identity of the process holding the embedded store in
/// `data_dir`: the same across restarts (host and the directory's path),
/// and held by one live process at a time, since the store takes a lock.
pub fn store_worker_id(data_dir: &Path) -> String {
    let path = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    // FNV-1a: a short, stable tag of the path for the lease keys.
    let tag = path
        .to_string_lossy()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    format!("worker-{}-store-{:08x}", host_name(), tag as u32)
}

fn host_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// A name unique to this process, for leases and NATS connection names.
pub fn process_id(role: &str) -> String {
    format!(
        "{role}-{}-{}-{:04x}",
        host_name(),
        std::process::id(),
        rand::random::<u16>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_file() {
        let text = r#"
            nats_url = "nats://10.0.0.1:4222"
            listen = "0.0.0.0:8080"
            store = "nats"
            partitions = 32
            [limits]
            max_frame_bytes = 1024
            [[tenants]]
            id = "acme"
            hs256_secrets = ["0123456789abcdef"]
        "#;
        let f: FileConfig = toml::from_str(text).unwrap();
        assert_eq!(f.store, Some(StoreKind::Nats));
        assert_eq!(f.limits.unwrap().max_frame_bytes, 1024);
        assert_eq!(f.tenants[0].id, "acme");
        assert!(
            toml::from_str::<FileConfig>("nats_ulr = \"x\"").is_err(),
            "typos are errors"
        );
    }

    #[test]
    fn nats_seeds_come_as_a_joined_string_or_a_list() {
        let joined: FileConfig =
            toml::from_str("nats_url = \"nats://a:4222, nats://b:4222\"").unwrap();
        let list: FileConfig =
            toml::from_str("nats_url = [\"nats://a:4222\", \"nats://b:4222\"]").unwrap();
        let none = NatsArgs::default();
        for f in [&joined, &list] {
            let c = nats_config(&none, f, "t").unwrap();
            assert_eq!(c.servers, ["nats://a:4222", "nats://b:4222"]);
        }
        let flag = NatsArgs {
            nats_url: Some("nats://c:1,nats://d:2".into()),
            ..NatsArgs::default()
        };
        assert_eq!(
            nats_config(&flag, &list, "t").unwrap().servers,
            ["nats://c:1", "nats://d:2"],
            "the flag wins over the file"
        );
    }

    #[test]
    fn nats_auth_takes_one_method_and_reads_secret_files() {
        let seed = std::env::temp_dir().join(format!("sb-test-seed-{}.nk", std::process::id()));
        std::fs::write(&seed, "SUAEXAMPLESEED\n").unwrap();
        let f: FileConfig = toml::from_str(&format!(
            "[nats]\nnkey_seed_file = {:?}\n",
            seed.display().to_string()
        ))
        .unwrap();
        let c = nats_config(&NatsArgs::default(), &f, "t").unwrap();
        assert!(matches!(c.auth, switchboard_nats::NatsAuth::NKey(ref s) if s == "SUAEXAMPLESEED"));
        let both: FileConfig =
            toml::from_str("[nats]\nuser = \"gw\"\npassword = \"p\"\ntoken = \"t\"\n").unwrap();
        assert!(nats_config(&NatsArgs::default(), &both, "t").is_err());
        let no_password: FileConfig = toml::from_str("[nats]\nuser = \"gw\"\n").unwrap();
        assert!(nats_config(&NatsArgs::default(), &no_password, "t").is_err());
        let missing_ca: FileConfig =
            toml::from_str("[nats]\nca_file = \"/nonexistent/ca.pem\"\n").unwrap();
        let err = nats_config(&NatsArgs::default(), &missing_ca, "t").unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
        let _ = std::fs::remove_file(&seed);
    }

    #[test]
    fn the_example_file_is_valid() {
        let text = include_str!("../../deploy/switchboard.example.toml");
        let f: FileConfig = toml::from_str(text).unwrap();
        assert_eq!(f.inbox_ttl_secs, Some(30 * 24 * 3600));
    }

    #[test]
    fn parses_scylla_and_archive_settings() {
        let text = r#"
            store = "scylla"
            [scylla]
            nodes = ["10.0.0.5:9042", "10.0.0.6:9042"]
            keyspace = "switchboard"
            local_dc = "eu"
            consistency = "local_quorum"
            replication = { strategy = "network_topology", datacenters = { eu = 3, us = 3 } }
            [archive]
            after_days = 90
        "#;
        let f: FileConfig = toml::from_str(text).unwrap();
        assert_eq!(f.store, Some(StoreKind::Scylla));
        let scylla = f.scylla.unwrap();
        assert_eq!(scylla.nodes.len(), 2);
        assert_eq!(scylla.local_dc.as_deref(), Some("eu"));
        assert!(scylla.validate().is_ok());
        let archive = f.archive.unwrap();
        assert_eq!((archive.after_days, archive.every_secs), (90, 3600));
        assert!(
            toml::from_str::<FileConfig>("[archive]\nevery_secs = 1").is_err(),
            "after_days is required"
        );
    }
}
