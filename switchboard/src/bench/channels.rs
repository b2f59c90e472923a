//! `switchboard bench channels`: what the channel directory and joins
//! cost through a running gateway (v1.3). `--channels` public channels
//! are made (each by its own owner: a channel, then `PATCH` public with a
//! topic; every 100th topic says "rare"), then one reader asks
//! `--lookups` times for the directory's first page, for a page of a `q`
//! every topic matches, for `q=rare` (a page that looks at every row to
//! find 1 in 100) and for a `q` nothing matches (a page that looks at the
//! most rows, 2000, and finds none), `--concurrency` in flight; and
//! `--joins` users each join a random channel. Reports each kind's
//! latency and the asks per second, and what a walk through every page
//! took.

use std::time::Instant;

use anyhow::{Context as _, bail};
use futures::StreamExt;
use hdrhistogram::Histogram;
use serde_json::{Value, json};
use switchboard_client::{RestClient, TokenSpec, mint_hs256};

use super::profiles::measure;
use crate::config::DEFAULT_DEMO_SECRET;

/// Channels made at once while filling.
const FILL_AT_ONCE: usize = 16;

#[derive(clap::Args)]
pub struct ChannelsBenchArgs {
    /// The gateway.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Public channels to make.
    #[arg(long, default_value_t = 1000)]
    channels: usize,
    /// Directory reads of each kind.
    #[arg(long, default_value_t = 300)]
    lookups: usize,
    /// Users who each join one channel.
    #[arg(long, default_value_t = 200)]
    joins: usize,
    /// Reads (and joins) in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    #[arg(long, default_value = "demo")]
    tenant: String,
    /// The tenant's HS256 secret.
    #[arg(long, env = "SWITCHBOARD_DEMO_SECRET", hide_env_values = true)]
    secret: Option<String>,
}

pub async fn run(a: ChannelsBenchArgs) -> anyhow::Result<()> {
    if a.channels == 0 {
        bail!("--channels must be at least 1");
    }
    let secret = a
        .secret
        .clone()
        .unwrap_or_else(|| DEFAULT_DEMO_SECRET.to_owned());
    let rest_of = |u: &str| -> anyhow::Result<RestClient> {
        let token = mint_hs256(&secret, &TokenSpec::new(&a.tenant, u, Some("bench"), 3600))?;
        Ok(RestClient::new(&a.url, &token))
    };
    let run_id: u32 = rand::random::<u32>() % 1_000_000;

    eprintln!("making {} public channels", a.channels);
    let started = Instant::now();
    let mut fills = futures::stream::iter((0..a.channels).map(|i| {
        let owner = rest_of(&format!("ch{run_id}o{i}"));
        async move {
            let owner = owner?;
            let made = call(
                &owner,
                "POST",
                "/v1/conversations",
                json!({
                    "kind": "channel", "title": format!("Bench {run_id} channel {i}"),
                }),
            )
            .await?;
            let id = made["conversation_id"]
                .as_str()
                .context("no conversation_id")?
                .to_owned();
            let topic = if i % 100 == 0 {
                "a rare topic"
            } else {
                "an everyday topic"
            };
            call(
                &owner,
                "PATCH",
                &format!("/v1/conversations/{id}"),
                json!({
                    "visibility": "public", "topic": format!("{topic} of run {run_id}"),
                }),
            )
            .await?;
            anyhow::Ok(id)
        }
    }))
    .buffer_unordered(FILL_AT_ONCE);
    let mut ids = Vec::with_capacity(a.channels);
    while let Some(id) = fills.next().await {
        ids.push(id?);
    }
    eprintln!(
        "made in {:.1} s ({:.0} a second)",
        started.elapsed().as_secs_f64(),
        a.channels as f64 / started.elapsed().as_secs_f64()
    );

    let reader = rest_of(&format!("ch{run_id}reader"))?;
    // A walk through the whole directory, 50 a page.
    let walked = Instant::now();
    let (mut pages, mut listed, mut cursor) = (0, 0, None::<String>);
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/channels?limit=50&cursor={c}"),
            None => "/v1/channels?limit=50".to_owned(),
        };
        let page = call(&reader, "GET", &path, Value::Null).await?;
        pages += 1;
        listed += page["channels"].as_array().map_or(0, Vec::len);
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    println!(
        "{} public channels in the tenant ({} of this run); a walk of every page (50 each): {pages} pages, {listed} channels, {:.0} ms",
        listed,
        a.channels,
        walked.elapsed().as_secs_f64() * 1000.0
    );
    println!(
        "{} reads of each kind, {} in flight",
        a.lookups, a.concurrency
    );
    println!("| read | answers/s | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    let kinds = [
        ("first page (20)", "/v1/channels".to_owned()),
        (
            "`q` every topic matches (20)",
            format!("/v1/channels?q=of%20run%20{run_id}"),
        ),
        (
            "`q=rare`: 1 in 100 matches",
            "/v1/channels?q=rare".to_owned(),
        ),
        (
            "`q` nothing matches",
            "/v1/channels?q=zzzz-nothing".to_owned(),
        ),
    ];
    for (name, path) in kinds {
        let paths = vec![path; a.lookups];
        let (latency, elapsed) = measure(&reader, paths, a.concurrency).await?;
        row(name, a.lookups as f64 / elapsed, &latency);
    }

    // Joins: each of `--joins` users joins a random channel.
    let joiners: Vec<(RestClient, String)> = (0..a.joins)
        .map(|i| {
            let id = ids[rand::random::<u64>() as usize % ids.len()].clone();
            rest_of(&format!("ch{run_id}j{i}")).map(|r| (r, id))
        })
        .collect::<anyhow::Result<_>>()?;
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).context("histogram")?;
    let started = Instant::now();
    let mut joins = futures::stream::iter(joiners.iter().map(|(rest, id)| async move {
        let at = Instant::now();
        call(
            rest,
            "POST",
            &format!("/v1/conversations/{id}/join"),
            Value::Null,
        )
        .await?;
        anyhow::Ok(at.elapsed())
    }))
    .buffer_unordered(a.concurrency.max(1));
    while let Some(took) = joins.next().await {
        latency.record(u64::try_from(took?.as_micros()).unwrap_or(u64::MAX).max(1))?;
    }
    if a.joins > 0 {
        row(
            "`POST .../join`",
            a.joins as f64 / started.elapsed().as_secs_f64(),
            &latency,
        );
    }
    Ok(())
}

fn row(name: &str, per_second: f64, latency: &Histogram<u64>) {
    let ms = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "| {name} | {per_second:.0} | {:.2} ms | {:.2} ms | {:.2} ms |",
        ms(0.5),
        ms(0.99),
        latency.max() as f64 / 1000.0
    );
}

/// One REST call; its JSON answer (null when empty), or why it failed.
async fn call(rest: &RestClient, method: &str, path: &str, body: Value) -> anyhow::Result<Value> {
    let mut request = rest
        .raw()
        .request(method.parse()?, format!("{}{path}", rest.base()))
        .bearer_auth(rest.token());
    if !body.is_null() {
        request = request.json(&body);
    }
    let answer = request.send().await?;
    let status = answer.status();
    let text = answer.text().await?;
    if !status.is_success() {
        bail!("{method} {path}: {status} {text}");
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}
