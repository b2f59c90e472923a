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
    pub nats_url: Option<String>,
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
    pub fanout_threshold: Option<usize>,
    pub store_request_timeout_ms: Option<u64>,
    pub worker_max_batch: Option<usize>,
    /// How long after sending the sender may edit, in seconds (default 900).
    pub edit_window_secs: Option<u64>,
    /// JetStream's dedupe window for sends, in milliseconds (default 120000).
    pub duplicate_window_ms: Option<u64>,
    /// How long an undelivered inbox entry waits for its device, in
    /// seconds (default 2592000, 30 days).
    pub inbox_ttl_secs: Option<u64>,
    /// How often expired inbox entries are swept, in seconds (default 3600).
    pub inbox_sweep_secs: Option<u64>,
    /// Publishes a gateway may have waiting for JetStream's ack (default 5000).
    pub jetstream_max_inflight: Option<usize>,
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
    /// Moving old history to the blob store (`[archive]`); absent, nothing
    /// is archived (archived history is read back either way).
    #[serde(default)]
    pub archive: Option<ArchiveSection>,
    #[serde(default)]
    pub tenants: Vec<TenantConfig>,
}

/// `[blobs]`: `backend = "local"` keeps blobs in `<data_dir>/blobs`;
/// `backend = "s3"` in the bucket of `[blobs.s3]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlobsConfig {
    pub backend: BlobBackend,
    #[serde(default)]
    pub s3: Option<switchboard_blob::s3::S3Config>,
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
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PushSection {
    /// A CA certificate (PEM file) to trust besides the public ones: a
    /// private proxy in front of FCM and APNs, or a test server.
    pub ca_file: Option<PathBuf>,
    /// Timeout of one provider call, in milliseconds (default 10000).
    pub timeout_ms: Option<u64>,
    /// Jobs of each push stage in progress at once per worker (default 64).
    pub concurrency: Option<usize>,
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
    /// The S3 settings, credentials from the environment where the file
    /// has none.
    pub fn s3(&self) -> anyhow::Result<switchboard_blob::s3::S3Config> {
        let Some(mut s3) = self.s3.clone() else {
            anyhow::bail!("[blobs] backend = \"s3\" needs a [blobs.s3] table with the bucket");
        };
        if s3.access_key_id.is_empty() {
            s3.access_key_id = std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_default();
        }
        if s3.secret_access_key.is_empty() {
            s3.secret_access_key = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or_default();
        }
        if s3.access_key_id.is_empty() || s3.secret_access_key.is_empty() {
            anyhow::bail!(
                "S3 credentials missing: set access_key_id and secret_access_key in [blobs.s3] or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
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

    pub fn fanout(&self) -> switchboard_backbone::fanout::FanOutPolicy {
        let mut policy = switchboard_backbone::fanout::FanOutPolicy::default();
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
    }
}

/// A name unique to this process, for leases and NATS connection names.
pub fn process_id(role: &str) -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!(
        "{role}-{host}-{}-{:04x}",
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
