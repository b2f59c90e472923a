//! What a gateway or worker reads and checks before it connects, in one
//! place: its start runs [`prepare`] and stops on any problem, and
//! `switchboard config check --role <role>` runs the same [`prepare`] and
//! prints every problem, so that a configuration that passes the check
//! gets past start-up's own checks.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use switchboard_nats::definitions::BackboneConfig;

use crate::config::{self, BlobBackend, FileConfig, StoreKind, demo_tenant, process_id};
use crate::{run, secrets, traces};

#[derive(Args)]
pub struct Common {
    /// Configuration file (TOML); see deploy/switchboard.example.toml.
    #[arg(long, env = "SWITCHBOARD_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log filter, e.g. `info` or `switchboard_worker=debug` (default
    /// `info`; `switchboard dev`: warnings and errors only).
    #[arg(long, env = "SWITCHBOARD_LOG")]
    pub log: Option<String>,
    /// Ingest partitions (fixed for a deployment; default 16).
    #[arg(long, env = "SWITCHBOARD_PARTITIONS")]
    pub partitions: Option<u16>,
    /// Replicas of streams and buckets (1 on one server, 3 in a cluster).
    #[arg(long, env = "SWITCHBOARD_REPLICAS")]
    pub replicas: Option<usize>,
    /// Also serve `/metrics`, `/healthz` and `/readyz` on this address
    /// (a worker's only HTTP; a gateway serves them on its own port too).
    #[arg(long, env = "SWITCHBOARD_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Export traces over OTLP/HTTP to this collector, e.g.
    /// `http://otel-collector:4318` (`/v1/traces` is added). Off when
    /// unset; see docs/operations.md, "Traces".
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

impl Common {
    /// Logs, and traces if configured (`traces.rs`).
    pub fn observe(&self, file: &FileConfig, process: &str) -> anyhow::Result<traces::Traces> {
        traces::init(
            self.log.as_deref().or(file.log.as_deref()),
            traces::otlp_endpoint(self.otlp_endpoint.as_deref()),
            process,
        )
    }
}

#[derive(Args)]
pub struct ExternalArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub nats: config::NatsArgs,
    /// Where the store is: `embedded` here, `nats` (served by the
    /// process that holds the embedded store), or `scylla` (the cluster
    /// of the file's `[scylla]` table).
    #[arg(long, env = "SWITCHBOARD_STORE", value_enum)]
    pub store: Option<StoreKind>,
    /// Data directory of the embedded store.
    #[arg(long, env = "SWITCHBOARD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

/// The roles that run against an external NATS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    Gateway,
    Worker,
    /// A search replica (v1.2).
    Search,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Self::Gateway => "gateway",
            Self::Worker => "worker",
            Self::Search => "search",
        }
    }
}

/// `switchboard config check`: the role's flags and environment, checked
/// without connecting to anything.
#[derive(Args)]
pub struct CheckArgs {
    /// The role whose start-up checks to run.
    #[arg(long, value_enum)]
    pub role: Role,
    #[command(flatten)]
    pub external: ExternalArgs,
    /// A gateway's listen address (as `switchboard gateway --listen`).
    #[arg(long, env = "SWITCHBOARD_LISTEN")]
    pub listen: Option<SocketAddr>,
}

/// What a gateway or worker reads before it connects.
pub struct Setup {
    pub file: FileConfig,
    pub backbone: BackboneConfig,
    /// This process's name (leases, NATS connection name).
    pub name: String,
    pub nats: switchboard_nats::NatsConfig,
    pub kind: StoreKind,
    pub data_dir: PathBuf,
    /// Where a gateway listens.
    pub listen: SocketAddr,
}

/// Every problem [`prepare`] found, one line each.
#[derive(Debug)]
pub struct Problems(pub Vec<String>);

impl std::fmt::Display for Problems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the configuration has {} problem(s):", self.0.len())?;
        for problem in &self.0 {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}

pub fn backbone_config(common: &Common, file: &FileConfig) -> BackboneConfig {
    let defaults = BackboneConfig::default();
    BackboneConfig {
        partitions: common
            .partitions
            .or(file.partitions)
            .unwrap_or(defaults.partitions)
            .max(1),
        replicas: common
            .replicas
            .or(file.replicas)
            .unwrap_or(defaults.replicas)
            .max(1),
        duplicate_window: file
            .duplicate_window_ms
            .map(std::time::Duration::from_millis),
        presence_ttl: file.presence_ttl(),
        define: file
            .nats
            .as_ref()
            .and_then(|n| n.define_backbone)
            .unwrap_or(defaults.define),
    }
}

/// Reads the role's configuration (file, environment, flags) and checks
/// everything that can be checked without connecting: each problem found,
/// not only the first.
pub fn prepare(
    role: Role,
    args: &ExternalArgs,
    listen: Option<SocketAddr>,
) -> Result<Setup, Problems> {
    let mut file = FileConfig::load(args.common.config.as_deref())
        .map_err(|e| Problems(vec![format!("{e:#}")]))?;
    let mut problems = Vec::new();
    let mut note = |result: anyhow::Result<()>| {
        if let Err(e) = result {
            problems.push(format!("{e:#}"));
        }
    };
    let mut secret_problems = Vec::new();
    secrets::apply(&mut file, &mut secret_problems);
    if let Some(secret) = file.demo_secret.clone() {
        file.tenants.retain(|t| t.id != config::DEMO_TENANT);
        file.tenants.push(demo_tenant(&secret));
    }
    let mut backbone = backbone_config(&args.common, &file);
    if let Some(define) = args.nats.define_backbone {
        backbone.define = define;
    }
    let name = process_id(role.name());
    // A gateway's replies under a prefix of their own: the secure
    // permissions keep every other reply out of its reach.
    let nats = config::nats_config(&args.nats, &file, &name).map(|n| match role {
        Role::Gateway => n.with_inbox_prefix(switchboard_nats::GATEWAY_INBOX_PREFIX),
        Role::Worker | Role::Search => n,
    });
    let default_store = match role {
        Role::Worker => StoreKind::Embedded,
        Role::Gateway | Role::Search => StoreKind::Nats,
    };
    let kind = args.store.or(file.store).unwrap_or(default_store);
    let data_dir = args
        .data_dir
        .clone()
        .or(file.data_dir.clone())
        .unwrap_or_else(|| PathBuf::from("switchboard-data"));
    let listen = match (listen, file.listen.as_deref()) {
        (Some(flag), _) => flag,
        (None, Some(text)) => text.parse().unwrap_or_else(|e| {
            note(Err(anyhow::anyhow!("listen {text:?}: {e}")));
            SocketAddr::from(([0, 0, 0, 0], 8080))
        }),
        (None, None) => SocketAddr::from(([0, 0, 0, 0], 8080)),
    };
    if kind == StoreKind::Scylla {
        note(run::scylla_config(&file).map(drop));
    }
    // Archived history is read with the blob store's credentials.
    if let Some(blobs) = file.blobs.as_ref().filter(|b| b.backend == BlobBackend::S3) {
        note(blobs.s3().map(drop));
    }
    match role {
        Role::Gateway => {
            if file.tenants.is_empty() {
                note(Err(anyhow::anyhow!(
                    "no tenants configured: add [[tenants]] to the configuration file or set SWITCHBOARD_DEMO_SECRET"
                )));
            }
            let config = run::gateway_config(name.clone(), &backbone, &file);
            // The same check the gateway library makes when it starts.
            note(config.check().map_err(anyhow::Error::msg));
            note(run::token_keys(&config).map(drop));
            if file
                .blobs
                .as_ref()
                .is_none_or(|b| b.backend == BlobBackend::Local)
            {
                note(run::blob_url_signer(&file).map(drop));
            }
        }
        Role::Worker => {
            note(run::worker_config(name.clone(), &backbone, &file).map(drop));
            note(crate::push_settings::outbound_config(&file).map(drop));
        }
        Role::Search => {
            if kind == StoreKind::Embedded {
                note(Err(anyhow::anyhow!(
                    "a search replica reads the store of another process: store = \"nats\" or \"scylla\""
                )));
            }
            note(
                file.search
                    .clone()
                    .unwrap_or_default()
                    .replica(&data_dir)
                    .map(drop),
            );
        }
    }
    match nats {
        Ok(nats) if problems.is_empty() && secret_problems.is_empty() => Ok(Setup {
            file,
            backbone,
            name,
            nats,
            kind,
            data_dir,
            listen,
        }),
        nats => {
            let mut all = secret_problems;
            if let Err(e) = nats {
                all.push(format!("{e:#}"));
            }
            all.extend(problems);
            Err(Problems(all))
        }
    }
}

/// Runs the check; prints one line per problem, or a summary. Returns
/// whether the configuration passed.
pub fn check(args: &CheckArgs) -> bool {
    match prepare(args.role, &args.external, args.listen) {
        Ok(setup) => {
            let auth = match &setup.nats.auth {
                switchboard_nats::NatsAuth::UserPassword { user, .. } => {
                    format!("user {user:?}")
                }
                switchboard_nats::NatsAuth::Token(_) => "a token".to_owned(),
                switchboard_nats::NatsAuth::NKey(_) => "an NKey".to_owned(),
                switchboard_nats::NatsAuth::Credentials(_) => "a credentials file".to_owned(),
                switchboard_nats::NatsAuth::None => "no authentication".to_owned(),
            };
            println!(
                "ok: {} configuration: NATS {} as {auth}{}, store {}, {} partitions, {} replicas, define_backbone {}, {} tenant(s) in the file",
                args.role.name(),
                setup.nats.servers.join(","),
                if setup.nats.tls.required {
                    " over TLS"
                } else {
                    ""
                },
                format!("{:?}", setup.kind).to_lowercase(),
                setup.backbone.partitions,
                setup.backbone.replicas,
                setup.backbone.define,
                setup.file.tenants.len(),
            );
            true
        }
        Err(Problems(problems)) => {
            for problem in &problems {
                println!("problem: {problem}");
            }
            eprintln!(
                "switchboard config check: {} problem(s) in the {} configuration",
                problems.len(),
                args.role.name()
            );
            false
        }
    }
}
