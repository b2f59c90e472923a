//! `switchboard bench profiles`: what profile look-ups cost through a
//! running gateway (v1.3). `--users` users each set a profile (`PATCH
//! /v1/me/profile`: a display name, a status, 16 at a time); then one
//! reader asks `--lookups` times for `--ids` random users at once (`GET
//! /v1/users?ids=`), `--concurrency` asks in flight, and once as many
//! times for one user (`GET /v1/users/{user}`). Reports each kind's
//! latency and the asks per second.

use std::time::Instant;

use anyhow::{Context as _, bail};
use futures::StreamExt;
use hdrhistogram::Histogram;
use serde_json::json;
use switchboard_client::{RestClient, TokenSpec, mint_hs256};

use crate::config::DEFAULT_DEMO_SECRET;

/// Profiles set at once while filling.
const FILL_AT_ONCE: usize = 16;

#[derive(clap::Args)]
pub struct ProfilesBenchArgs {
    /// The gateway.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Users with a profile.
    #[arg(long, default_value_t = 10_000)]
    users: usize,
    /// Users named per list look-up (at most 100).
    #[arg(long, default_value_t = 100)]
    ids: usize,
    /// Look-ups of each kind.
    #[arg(long, default_value_t = 500)]
    lookups: usize,
    /// Look-ups in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    #[arg(long, default_value = "demo")]
    tenant: String,
    /// The tenant's HS256 secret.
    #[arg(long, env = "SWITCHBOARD_DEMO_SECRET", hide_env_values = true)]
    secret: Option<String>,
}

pub async fn run(a: ProfilesBenchArgs) -> anyhow::Result<()> {
    if a.users == 0 || a.ids == 0 || a.ids > 100 {
        bail!("--users must be at least 1 and --ids 1 to 100");
    }
    let secret = a
        .secret
        .clone()
        .unwrap_or_else(|| DEFAULT_DEMO_SECRET.to_owned());
    let token = |u: &str| mint_hs256(&secret, &TokenSpec::new(&a.tenant, u, Some("bench"), 3600));
    let run_id: u32 = rand::random::<u32>() % 1_000_000;
    let users: Vec<String> = (0..a.users).map(|i| format!("p{run_id}u{i}")).collect();

    eprintln!("setting {} profiles", a.users);
    let started = Instant::now();
    let mut fills = futures::stream::iter(users.iter().enumerate().map(|(i, u)| {
        let rest = token(u).map(|t| RestClient::new(&a.url, &t));
        async move {
            let rest = rest?;
            let body = json!({
                "display_name": format!("Bench user {i}"),
                "status": { "text": "measuring look-ups", "emoji": "📏" },
            });
            let answer = rest
                .raw()
                .patch(format!("{}/v1/me/profile", rest.base()))
                .bearer_auth(rest.token())
                .json(&body)
                .send()
                .await?;
            if !answer.status().is_success() {
                bail!("PATCH /v1/me/profile: {}", answer.status());
            }
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(FILL_AT_ONCE);
    while let Some(done) = fills.next().await {
        done?;
    }
    eprintln!(
        "set in {:.1} s ({:.0} a second)",
        started.elapsed().as_secs_f64(),
        a.users as f64 / started.elapsed().as_secs_f64()
    );

    let reader = RestClient::new(&a.url, &token(&format!("p{run_id}reader"))?);
    println!(
        "{} users with profiles; {} look-ups of each kind, {} in flight",
        a.users, a.lookups, a.concurrency
    );
    println!("| look-up | answers/s | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    for list in [true, false] {
        let paths: Vec<String> = (0..a.lookups)
            .map(|_| {
                if list {
                    let ids: Vec<&str> = (0..a.ids)
                        .map(|_| users[rand::random::<u64>() as usize % users.len()].as_str())
                        .collect();
                    format!("/v1/users?ids={}", ids.join(","))
                } else {
                    let u = &users[rand::random::<u64>() as usize % users.len()];
                    format!("/v1/users/{u}")
                }
            })
            .collect();
        let (latency, elapsed) = measure(&reader, paths, a.concurrency).await?;
        let ms = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "| {} | {:.0} | {:.2} ms | {:.2} ms | {:.2} ms |",
            if list {
                format!("`GET /v1/users?ids=` ({} ids)", a.ids)
            } else {
                "`GET /v1/users/{user}`".to_owned()
            },
            a.lookups as f64 / elapsed,
            ms(0.5),
            ms(0.99),
            latency.max() as f64 / 1000.0
        );
    }
    Ok(())
}

/// Asks every path, `concurrency` at once: each answer's latency (µs)
/// and the seconds it all took.
pub(super) async fn measure(
    reader: &RestClient,
    paths: Vec<String>,
    concurrency: usize,
) -> anyhow::Result<(Histogram<u64>, f64)> {
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).context("histogram")?;
    let started = Instant::now();
    let mut asks = futures::stream::iter(paths.into_iter().map(|path| async move {
        let at = Instant::now();
        let answer = reader
            .raw()
            .get(format!("{}{path}", reader.base()))
            .bearer_auth(reader.token())
            .send()
            .await?;
        let status = answer.status();
        answer.bytes().await?;
        if !status.is_success() {
            bail!("GET {path}: {status}");
        }
        anyhow::Ok(at.elapsed())
    }))
    .buffer_unordered(concurrency.max(1));
    while let Some(took) = asks.next().await {
        latency.record(u64::try_from(took?.as_micros()).unwrap_or(u64::MAX).max(1))?;
    }
    Ok((latency, started.elapsed().as_secs_f64()))
}
