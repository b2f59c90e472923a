//! `switchboard`: one binary, one subcommand per role.
//!
//! - `dev`: everything on one machine (nats-server child, embedded store,
//!   worker and gateway in-process), loopback only.
//! - `gateway` / `worker`: the production roles, against an external NATS.
//! - `token`: mints a token for the local `demo` tenant.
//! - `bench`: the load generator.

mod bench;
mod blobs;
mod config;
mod nats_server;
mod plugin_bench;
mod plugin_cache;
mod plugin_cli;
mod plugin_template;
mod previews_settings;
mod push_settings;
mod run;
mod search_bench;
mod search_role;
mod secrets;
mod setup;
mod stages;
mod sys;
mod telemetry;
mod tenant_cli;
mod traces;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use switchboard_client::{TokenSpec, mint_hs256};

use crate::config::{DEFAULT_DEMO_SECRET, FileConfig, StoreKind, demo_tenant, process_id};
use crate::run::Shutdown;
use crate::setup::{Common, ExternalArgs, Role, Setup, backbone_config};

// The allocator: jemalloc (the default feature), mimalloc when that
// feature is on too, the system's with neither. BENCHMARKS.md, issue 31,
// "Second round", says why: the same work costs glibc's malloc 6-8% more
// CPU per message, and mimalloc a third more memory per idle connection.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "switchboard",
    version,
    about = "Multi-tenant chat edge on NATS JetStream"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run everything on this machine: nats-server, store, worker, gateway.
    Dev(DevArgs),
    /// Run a gateway (WebSocket and REST) against an external NATS.
    Gateway(GatewayArgs),
    /// Run a worker (conversation writers) against an external NATS.
    Worker(WorkerArgs),
    /// Run a search replica (v1.2): its index of messages, its queries.
    Search(WorkerArgs),
    /// Print a token for the local demo tenant.
    Token(TokenArgs),
    /// Administer tenants (keys, quotas) through NATS.
    Tenant(tenant_cli::TenantArgs),
    /// Load generator: N clients in 1:1 conversations.
    Bench(bench::BenchArgs),
    /// A plugin author's local harness: check a component, call a hook.
    Plugin(plugin_cli::PluginArgs),
    /// Work with a configuration without running it.
    #[command(subcommand)]
    Config(ConfigCmd),
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// Check a role's configuration (file, environment, flags) as its
    /// start would, without connecting: one line per problem, exit 1 if any.
    Check(setup::CheckArgs),
}

#[derive(Args)]
struct DevArgs {
    #[command(flatten)]
    common: Common,
    /// Address to serve HTTP and WebSocket on; must be loopback.
    #[arg(long, env = "SWITCHBOARD_LISTEN")]
    listen: Option<SocketAddr>,
    /// Where nats-server, the store and blobs keep their data.
    #[arg(long, env = "SWITCHBOARD_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The nats-server binary (default: PATH, then .venv/bin).
    #[arg(long, env = "SWITCHBOARD_NATS_SERVER")]
    nats_server: Option<PathBuf>,
    /// Port for the local nats-server (0 picks a free one; default 4222).
    #[arg(long, env = "SWITCHBOARD_NATS_PORT")]
    nats_port: Option<u16>,
    /// The store: `embedded` (default) in the data directory, or `scylla`:
    /// the CQL cluster of the file's `[scylla]` table, by default one
    /// node on 127.0.0.1:9042 (`scripts/dev.sh --cql` starts a Cassandra
    /// node there).
    #[arg(long, env = "SWITCHBOARD_STORE", value_enum)]
    store: Option<StoreKind>,
}

#[derive(Args)]
struct GatewayArgs {
    #[command(flatten)]
    external: ExternalArgs,
    /// Address to serve HTTP and WebSocket on (default 0.0.0.0:8080).
    #[arg(long, env = "SWITCHBOARD_LISTEN")]
    listen: Option<SocketAddr>,
}

#[derive(Args)]
struct WorkerArgs {
    #[command(flatten)]
    external: ExternalArgs,
}

#[derive(Args)]
struct TokenArgs {
    /// The user (JWT `sub`).
    #[arg(long)]
    user: String,
    /// The device (JWT `device`).
    #[arg(long)]
    device: Option<String>,
    #[arg(long, default_value = "demo")]
    tenant: String,
    /// Lifetime in seconds.
    #[arg(long, default_value_t = 86_400)]
    ttl: u64,
    /// Grant the tenant's admin role.
    #[arg(long)]
    admin: bool,
    /// A bot user's token (`"bot": true`), for a backend that sends over
    /// REST.
    #[arg(long)]
    bot: bool,
    /// HS256 secret (default: SWITCHBOARD_DEMO_SECRET, then the local default).
    #[arg(long, env = "SWITCHBOARD_DEMO_SECRET", hide_env_values = true)]
    secret: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Dev(args) => dev(args).await,
        Cmd::Gateway(args) => gateway(args).await,
        Cmd::Worker(args) => worker(args).await,
        Cmd::Search(args) => search_role::run(args.external).await,
        Cmd::Token(args) => token(args),
        Cmd::Tenant(args) => tenant_cli::run(args).await,
        Cmd::Bench(args) => bench::run(args).await,
        Cmd::Config(ConfigCmd::Check(args)) => {
            if !setup::check(&args) {
                std::process::exit(1);
            }
            Ok(())
        }
        Cmd::Plugin(args) => {
            // The plugin's own log lines, on stderr.
            let _logs = traces::init(Some("warn,plugin=debug"), None, "plugin")?;
            if !plugin_cli::run(args)? {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

async fn dev(args: DevArgs) -> anyhow::Result<()> {
    let mut file = secrets::load(args.common.config.as_deref())?;
    let traces = args.common.observe(&file, "dev")?;
    let listen = args
        .listen
        .or(file.listen.as_deref().map(str::parse).transpose()?)
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
    if !listen.ip().is_loopback() {
        bail!(
            "`switchboard dev` listens on loopback only; {listen} is not (use `switchboard gateway` to serve a network)"
        );
    }
    let data_dir = args
        .data_dir
        .clone()
        .or(file.data_dir.clone())
        .unwrap_or_else(|| PathBuf::from("switchboard-data"));
    let binary = nats_server::find_binary(args.nats_server.clone().or(file.nats_server.clone()))?;
    let port = match args.nats_port.or(file.nats_port).unwrap_or(4222) {
        0 => nats_server::free_port()?,
        p => p,
    };
    let secret = file
        .demo_secret
        .clone()
        .unwrap_or_else(|| DEFAULT_DEMO_SECRET.to_owned());
    file.tenants.retain(|t| t.id != config::DEMO_TENANT);
    file.tenants.push(demo_tenant(&secret));
    // Local by design: a newcomer's webhook receiver runs on this machine
    // too. A `[push]` section of the file decides for itself.
    if file.push.is_none() {
        file.push = Some(config::PushSection {
            allow_private_targets: true,
            ..Default::default()
        });
    }

    let locked = nats_server::DataDirLock::acquire(&data_dir)?;
    // Started here, on the main task: see `sys::die_with_parent`.
    let nats = nats_server::NatsServer::start(&binary, &data_dir, port, &locked).await?;
    let result = dev_inner(&args, &file, &nats, listen, &data_dir).await;
    nats.stop().await;
    traces.shutdown().await;
    result
}

/// The demo tenant's secret, as `dev` put it among the file's tenants.
fn demo_secret(file: &FileConfig) -> Option<String> {
    file.tenants
        .iter()
        .find(|t| t.id == config::DEMO_TENANT)
        .and_then(|t| t.hs256_secrets.first())
        .cloned()
}

async fn dev_inner(
    args: &DevArgs,
    file: &FileConfig,
    nats: &nats_server::NatsServer,
    listen: SocketAddr,
    data_dir: &std::path::Path,
) -> anyhow::Result<()> {
    let backbone = backbone_config(&args.common, file);
    let name = process_id("dev");
    let exposition = telemetry::install("dev")?;
    let client = run::backbone(
        &switchboard_nats::NatsConfig::new(&nats.url, &name),
        &backbone,
    )
    .await?;
    let store = match args.store.or(file.store).unwrap_or(StoreKind::Embedded) {
        StoreKind::Embedded => run::embedded_store(&client, data_dir, file)?,
        StoreKind::Scylla => run::store(StoreKind::Scylla, &client, data_dir, file).await?,
        StoreKind::Nats => {
            bail!("`switchboard dev` holds its own store: --store embedded or scylla, not nats")
        }
    };
    let ids = run::lease_ids(&client, &name, &backbone).await?;
    if let Some(secret) = demo_secret(file) {
        run::demo_tenant_record(&client, &secret).await?;
    }
    let mut gateway_config = run::gateway_config(name.clone(), &backbone, file);
    let keys = run::token_keys(&gateway_config)?;
    let tenants = run::tenants(&client, Some(keys.clone())).await?;
    let plugins = run::plugins(&client, file, &tenants, &name).await?;
    let shutdown = Shutdown::on_signals();

    // The worker gets a connection of its own, as it would in its own
    // process: one connection's I/O task would otherwise carry all traffic.
    let worker_client = switchboard_nats::connect(&switchboard_nats::NatsConfig::new(
        &nats.url,
        &format!("{name}-worker"),
    ))
    .await?;
    let push = stages::push_stage(
        &worker_client,
        store.clone(),
        &tenants,
        file,
        data_dir,
        backbone.partitions,
        plugins.clone(),
    )
    .await?;
    run::plugin_deploys(&worker_client, plugins.clone(), file).await?;
    // Its identity outlives the process, like a store-holding worker's:
    // after a crash it takes its partitions back at once.
    let worker_config = run::worker_config(config::store_worker_id(data_dir), &backbone, file)?;
    if let Some(addr) = args.common.metrics_listen {
        let ready = telemetry::readiness(&client, &store, Some(worker_config.status.clone()));
        let bound = telemetry::serve(addr, exposition.clone(), ready).await?;
        println!("switchboard: metrics on http://{bound}/metrics");
    }
    let worker = tokio::spawn(switchboard_worker::run(
        worker_config,
        worker_client,
        store.clone(),
        Arc::new(ids.clone()),
        Some(plugins.clone()),
        tenants.clone(),
        shutdown.clone().wait(),
    ));
    // A search replica beside them (v1.2), on the store in this process.
    let search = if file.search_enabled() {
        let (client, store) = (search_client(&nats.url, &name).await?, store.clone());
        let config = file.search.clone().unwrap_or_default().replica(data_dir)?;
        let stop = shutdown.clone().wait();
        Some(tokio::spawn(async move {
            if let Err(e) = switchboard_search::run(config, client, store, stop).await {
                tracing::error!(error = %e, "search failed");
            }
        }))
    } else {
        None
    };
    gateway_config.metrics = file.metrics_on_listen.unwrap_or(true).then_some(exposition);
    // On loopback, a page whose DNS name turns into 127.0.0.1 could
    // otherwise call it: only loopback and configured names are answered.
    gateway_config.allowed_hosts = Some(file.allowed_hosts.clone().unwrap_or_default());
    gateway_config.serve_web_client = true;
    gateway_config.dev_tokens = demo_secret(file).map(|secret| switchboard_gateway::DevTokens {
        tenant: config::DEMO_TENANT.to_owned(),
        hs256_secret: secret,
    });
    let nats_url = nats.url.clone();
    let nats_dir = nats.data_dir.clone();
    let media = run::media_store(data_dir, file)?;
    let gateway = run::gateway_parts(run::GatewayInputs {
        config: gateway_config,
        keys,
        tenants,
        client: client.clone(),
        store,
        ids: Arc::new(ids),
        plugins,
        media,
    })
    .await?;
    let served = run::gateway(
        gateway,
        listen,
        shutdown.clone(),
        move |addr| {
            println!(
                "\nSwitchboard dev is running (stop with Ctrl-C).\n\
                 \n  web client   http://{addr}/\
                 \n  WebSocket    ws://{addr}/v1/ws?token=<JWT>\
                 \n  REST         http://{addr}/v1/conversations\
                 \n  OpenAPI      http://{addr}/v1/openapi.json\
                 \n  health       http://{addr}/healthz  http://{addr}/readyz\
                 \n  metrics      http://{addr}/metrics\
                 \n  NATS         {nats_url} (JetStream data in {})\
                 \n  tokens       switchboard token --user alice   (tenant `demo`, secret from SWITCHBOARD_DEMO_SECRET)\n",
                nats_dir.display()
            );
        },
    )
    .await;
    let worker_result = worker.await;
    if let Some(search) = search {
        search.abort();
    }
    for task in push {
        task.abort();
    }
    match worker_result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "worker failed"),
        Err(e) => tracing::error!(error = %e, "worker task failed"),
    }
    // Bounded: a client whose server is gone would wait forever.
    let _ = tokio::time::timeout(Duration::from_secs(5), client.flush()).await;
    served
}

/// `dev`'s search replica's own connection.
async fn search_client(url: &str, name: &str) -> anyhow::Result<async_nats::Client> {
    Ok(
        switchboard_nats::connect(&switchboard_nats::NatsConfig::new(
            url,
            &format!("{name}-search"),
        ))
        .await?,
    )
}

async fn gateway(args: GatewayArgs) -> anyhow::Result<()> {
    let Setup {
        file,
        backbone,
        name,
        nats,
        kind,
        data_dir,
        listen,
    } = setup::prepare(Role::Gateway, &args.external, args.listen)?;
    let traces = args.external.common.observe(&file, "gateway")?;
    let exposition = telemetry::install("gateway")?;
    let client = run::backbone(&nats, &backbone).await?;
    let store = run::store(kind, &client, &data_dir, &file).await?;
    let ids = run::lease_ids(&client, &name, &backbone).await?;
    let mut config = run::gateway_config(name.clone(), &backbone, &file);
    let keys = run::token_keys(&config)?;
    let tenants = run::tenants(&client, Some(keys.clone())).await?;
    let plugins = run::plugins(&client, &file, &tenants, &name).await?;
    config.serve_web_client = file.web_client.unwrap_or(false);
    // Off by default: metrics name tenants, and the listener is public.
    config.metrics = file
        .metrics_on_listen
        .unwrap_or(false)
        .then_some(exposition.clone());
    if let Some(addr) = args.external.common.metrics_listen {
        let ready = telemetry::readiness(&client, &store, None);
        let bound = telemetry::serve(addr, exposition, ready).await?;
        println!("switchboard: metrics on http://{bound}/metrics");
    }
    let media = run::media_store(&data_dir, &file)?;
    if media.local.is_some() && file.public_url.is_none() {
        tracing::warn!(
            %listen,
            "no public_url: local blob URLs are made on the listen address (paths on 0.0.0.0); behind a proxy, set public_url"
        );
    }
    let gateway = run::gateway_parts(run::GatewayInputs {
        config,
        keys,
        tenants,
        client: client.clone(),
        store,
        ids: Arc::new(ids),
        plugins,
        media,
    })
    .await?;
    let result = run::gateway(gateway, listen, Shutdown::on_signals(), |_| {}).await;
    client.flush().await.ok();
    traces.shutdown().await;
    result
}

async fn worker(args: WorkerArgs) -> anyhow::Result<()> {
    let Setup {
        file,
        backbone,
        name,
        nats,
        kind,
        data_dir,
        ..
    } = setup::prepare(Role::Worker, &args.external, None)?;
    let traces = args.external.common.observe(&file, "worker")?;
    let exposition = telemetry::install("worker")?;
    // The store is served before JetStream is waited for: it needs only
    // core NATS, and every writer in the cluster waits for it, also while
    // JetStream elects leaders after a NATS node was lost with this
    // worker (which once held the store back for 10 s).
    let client = switchboard_nats::connect(&nats).await?;
    let store = run::store(kind, &client, &data_dir, &file).await?;
    run::define(&client, &backbone).await?;
    let ids = run::lease_ids(&client, &name, &backbone).await?;
    let tenants = run::tenants(&client, None).await?;
    let plugins = run::plugins(&client, &file, &tenants, &name).await?;
    let push = stages::push_stage(
        &client,
        store.clone(),
        &tenants,
        &file,
        &data_dir,
        backbone.partitions,
        plugins.clone(),
    )
    .await?;
    run::plugin_deploys(&client, plugins.clone(), &file).await?;
    // The worker holding the embedded store keeps its identity across
    // restarts, so that it takes its partition leases back at once
    // instead of waiting for them to expire: the store's lock file makes
    // it the only live worker of that identity.
    let worker_id = if kind == StoreKind::Embedded {
        config::store_worker_id(&data_dir)
    } else {
        name.clone()
    };
    let worker_config = run::worker_config(worker_id.clone(), &backbone, &file)?;
    if let Some(addr) = args.external.common.metrics_listen {
        let ready = telemetry::readiness(&client, &store, Some(worker_config.status.clone()));
        let bound = telemetry::serve(addr, exposition, ready).await?;
        println!("switchboard: metrics on http://{bound}/metrics");
    }
    println!("switchboard: worker {worker_id} ready");
    let result = switchboard_worker::run(
        worker_config,
        client.clone(),
        store,
        Arc::new(ids),
        Some(plugins),
        tenants,
        Shutdown::on_signals().wait(),
    )
    .await;
    for task in push {
        task.abort();
    }
    client.flush().await.ok();
    traces.shutdown().await;
    result.context("worker")
}

fn token(args: TokenArgs) -> anyhow::Result<()> {
    let secret = args
        .secret
        .unwrap_or_else(|| DEFAULT_DEMO_SECRET.to_owned());
    let mut spec = TokenSpec::new(&args.tenant, &args.user, args.device.as_deref(), args.ttl);
    if args.admin {
        spec = spec.admin();
    }
    if args.bot {
        spec = spec.bot();
    }
    println!("{}", mint_hs256(&secret, &spec)?);
    Ok(())
}
