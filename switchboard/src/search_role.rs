//! `switchboard search` (v1.2): a search replica against an external
//! NATS (`dev` runs one too, on its own store).

use anyhow::Context as _;

use crate::run::{self, Shutdown};
use crate::setup::{self, ExternalArgs, Role, Setup};
use crate::telemetry;

/// Runs a search replica until a signal.
pub async fn run(args: ExternalArgs) -> anyhow::Result<()> {
    let Setup {
        file,
        backbone,
        nats,
        kind,
        data_dir,
        ..
    } = setup::prepare(Role::Search, &args, None)?;
    let traces = args.common.observe(&file, "search")?;
    let exposition = telemetry::install("search")?;
    let client = run::backbone(&nats, &backbone).await?;
    let store = run::store(kind, &client, &data_dir, &file).await?;
    let config = file.search.clone().unwrap_or_default().replica(&data_dir)?;
    if let Some(addr) = args.common.metrics_listen {
        let ready = telemetry::readiness(&client, &store, None);
        let bound = telemetry::serve(addr, exposition, ready).await?;
        println!("switchboard: metrics on http://{bound}/metrics");
    }
    println!(
        "switchboard: search replica of shard {} of {} ready, index in {}",
        config.shard.index,
        config.shard.count,
        config.dir.display()
    );
    let result =
        switchboard_search::run(config, client.clone(), store, Shutdown::on_signals().wait()).await;
    client.flush().await.ok();
    traces.shutdown().await;
    result.context("search")
}
