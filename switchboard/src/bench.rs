//! The load generator.
//!
//! `bench chat` opens N WebSocket clients in conversations of `group_size`
//! members (2: 1:1 direct conversations), sends R messages per second in
//! total for S seconds, acks deliveries like an app would, and reports
//! sent, acked, delivered and lost messages, throughput, the latency from
//! send to ack and from send to delivery, and (given the server's pids:
//! switchboard and its nats-server) their resident memory, idle per
//! connection and under load, and the CPU they spent per message. With
//! `--link-share`, that share of the messages links to a slow page this
//! generator serves (link previews, v1.3); with `--polls`, every message
//! is a poll and the clients vote rather than react. With
//! `--reaction-rate`, the clients also react (v1.1), each toggling one of
//! a few emoji on the newest message it has seen, and the report counts
//! the `reaction` events they heard.
//!
//! `bench plugin` measures one moderation hook call (`plugin_bench.rs`).
//!
//! `bench export` (`bench/export.rs`) measures finding one user's own
//! messages among others' (the export).
//!
//! `bench channels` (`bench/channels.rs`) measures the channel
//! directory and joins (v1.3).
//! `bench profiles` (`bench/profiles.rs`) measures profile look-ups
//! (v1.3) through a running gateway.
//!
//! `bench backbone` (`bench/backbone.rs`) measures what JetStream keeps
//! per conversation: it publishes one command to each of C distinct ingest
//! subjects and reports the nats-server's memory before and after.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt;
use hdrhistogram::Histogram;
use switchboard_client::{RestClient, TokenSpec, WsClient, mint_hs256};
use switchboard_protocol::ConversationKind;

use crate::config::DEFAULT_DEMO_SECRET;

mod backbone;
mod channels;
mod client;
mod export;
mod process;
mod profiles;

use backbone::{BackboneArgs, ingest_messages};
use client::{Counters, Pace, Shared, client_task, histogram, slow_pages};
use process::{ProcessCpu, and_children, cpu_times, memory_of};

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(clap::Subcommand)]
enum Mode {
    /// Clients chatting through a running gateway.
    Chat(ChatArgs),
    /// JetStream memory per conversation on the ingest stream.
    Backbone(BackboneArgs),
    /// The cost of one moderation plugin call beside native Rust.
    Plugin(crate::plugin_bench::PluginBenchArgs),
    /// The search index (v1.2) over N messages: size and query latency.
    Search(crate::search_bench::SearchBenchArgs),
    /// Finding one user's own messages (the export) among others'.
    Export(export::ExportBenchArgs),
    /// Profile look-ups (v1.3) through a running gateway.
    Profiles(profiles::ProfilesBenchArgs),
    /// The channel directory and joins (v1.3) through a running gateway.
    Channels(channels::ChannelsBenchArgs),
}

#[derive(clap::Args, Clone)]
struct ChatArgs {
    /// The gateway.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Clients (one user and connection each).
    #[arg(long, default_value_t = 200)]
    users: usize,
    /// Members per conversation: 2 for 1:1 direct conversations.
    #[arg(long, default_value_t = 2)]
    group_size: usize,
    /// Messages per second, all clients together.
    #[arg(long, default_value_t = 20_000)]
    rate: u64,
    /// Seconds of sending.
    #[arg(long, default_value_t = 30)]
    duration: u64,
    /// Seconds at the start that are not measured.
    #[arg(long, default_value_t = 3)]
    warmup: u64,
    /// Bytes of text per message.
    #[arg(long, default_value_t = 64)]
    size: usize,
    #[arg(long, default_value = "demo")]
    tenant: String,
    /// The tenant's HS256 secret.
    #[arg(long, env = "SWITCHBOARD_DEMO_SECRET", hide_env_values = true)]
    secret: Option<String>,
    /// Pid of a server process (repeat it: switchboard and its
    /// nats-server), to report their memory and CPU together.
    #[arg(long)]
    server_pid: Vec<u32>,
    /// Count the children of every --server-pid too (the nats-server that
    /// `switchboard dev` runs).
    #[arg(long)]
    with_children: bool,
    /// The deployment's NATS: report how many JetStream messages carried
    /// the sends (the ingest streams' last sequences, before sending and
    /// after the last answer).
    #[arg(long)]
    nats_url: Option<String>,
    /// The deployment's ingest partitions (with --nats-url).
    #[arg(long, default_value_t = 16)]
    partitions: u16,
    /// Reactions per second, all clients together, beside the messages:
    /// each adds or takes back one of a few emoji on the newest message
    /// its client has seen (0: none).
    #[arg(long, default_value_t = 0.0)]
    reaction_rate: f64,
    /// Disappearing messages (v1.2) in every conversation, this many
    /// seconds after they are sent: the server's expiry passes then run
    /// beside the sends (its retention benchmark). 0: off.
    #[arg(long, default_value_t = 0)]
    disappearing_secs: u64,
    /// The share of messages (0 to 1) that carry a link to a page this
    /// load generator serves on 127.0.0.1, slowly (`--link-delay-ms`),
    /// each link its own (no cache hit): link previews' cost (v1.3). The
    /// server must let previews reach it: `[previews] allow_private =
    /// ["127.0.0.1/32"]`.
    #[arg(long, default_value_t = 0.0)]
    link_share: f64,
    /// How long the page takes to answer.
    #[arg(long, default_value_t = 3_000)]
    link_delay_ms: u64,
    /// Every message is a poll of 4 options (v1.3), and the clients vote
    /// (at `--reaction-rate`) rather than react, each choosing the next
    /// option on the newest poll it has seen.
    #[arg(long)]
    polls: bool,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.mode {
        Mode::Chat(a) => chat(a).await,
        Mode::Backbone(a) => backbone::run(a).await,
        Mode::Plugin(a) => crate::plugin_bench::run(a),
        Mode::Search(a) => crate::search_bench::run(a),
        Mode::Export(a) => export::run(a).await,
        Mode::Profiles(a) => profiles::run(a).await,
        Mode::Channels(a) => channels::run(a).await,
    }
}

/// Members named in one request when a conversation is created.
const MEMBERS_PER_REQUEST: usize = 500;

fn quantiles(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "none".into();
    }
    let ms = |us: u64| us as f64 / 1000.0;
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms ({} samples)",
        ms(h.value_at_quantile(0.5)),
        ms(h.value_at_quantile(0.99)),
        ms(h.value_at_quantile(0.999)),
        ms(h.max()),
        h.len()
    )
}

async fn chat(mut a: ChatArgs) -> anyhow::Result<()> {
    if a.with_children {
        a.server_pid = and_children(&a.server_pid);
    }
    if !a.server_pid.is_empty() {
        eprintln!("server processes: {:?}", a.server_pid);
    }
    if a.users < 2 || a.group_size < 2 || !a.users.is_multiple_of(a.group_size) {
        bail!("--users must be a multiple of --group-size (at least 2)");
    }
    let secret = a
        .secret
        .clone()
        .unwrap_or_else(|| DEFAULT_DEMO_SECRET.to_owned());
    let run_id: u32 = rand::random::<u32>() % 1_000_000;
    let users: Vec<String> = (0..a.users).map(|i| format!("b{run_id}u{i}")).collect();
    let token = |u: &str| mint_hs256(&secret, &TokenSpec::new(&a.tenant, u, Some("bench"), 3600));
    let ws_url = a.url.replacen("http", "ws", 1);

    eprintln!("creating {} conversations", a.users / a.group_size);
    let groups: Vec<Vec<String>> = users.chunks(a.group_size).map(|c| c.to_vec()).collect();
    let kind = if a.group_size == 2 {
        ConversationKind::Direct
    } else {
        ConversationKind::Group
    };
    let disappearing_secs = a.disappearing_secs;
    let mut created = futures::stream::iter(groups.iter().cloned())
        .map(|g| {
            let rest = RestClient::new(&a.url, &token(&g[0]).unwrap_or_default());
            async move {
                // A large channel is made in steps: one request names at
                // most a few hundred members (the gateway's limit on
                // members per request, and on the request body).
                let others: Vec<&str> = g[1..].iter().map(String::as_str).collect();
                let mut steps = others.chunks(MEMBERS_PER_REQUEST);
                let first = steps.next().unwrap_or_default();
                let (view, _) = rest.create_conversation(kind, first, None).await?;
                let id = view.conversation_id.as_str().to_owned();
                for more in steps {
                    rest.add_members(&id, more).await?;
                }
                if disappearing_secs > 0 {
                    let patch = serde_json::json!({ "disappearing_secs": disappearing_secs });
                    let answer = rest
                        .raw()
                        .patch(format!("{}/v1/conversations/{id}", rest.base()))
                        .bearer_auth(rest.token())
                        .json(&patch)
                        .send()
                        .await?;
                    if !answer.status().is_success() {
                        bail!("disappearing messages refused: {}", answer.status());
                    }
                }
                Ok::<_, anyhow::Error>((g, id))
            }
        })
        .buffer_unordered(32);
    let mut conversation_of: HashMap<String, String> = HashMap::new();
    while let Some(r) = created.next().await {
        let (g, conv) = r?;
        for u in g {
            conversation_of.insert(u, conv.clone());
        }
    }

    let before = memory_of(&a.server_pid);
    eprintln!("connecting {} clients", a.users);
    let mut connections = Vec::new();
    let mut connecting = futures::stream::iter(users.iter().cloned())
        .map(|u| {
            let url = ws_url.clone();
            let t = token(&u);
            async move { Ok::<_, anyhow::Error>((u, WsClient::connect(&url, &t?).await?)) }
        })
        .buffer_unordered(50);
    while let Some(c) = connecting.next().await {
        connections.push(c?);
    }
    drop(connecting);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = memory_of(&a.server_pid);

    let backbone = match &a.nats_url {
        Some(url) => {
            let client = async_nats::connect(url.as_str())
                .await
                .with_context(|| format!("connecting to {url}"))?;
            let js = async_nats::jetstream::new(client);
            let before = ingest_messages(&js, a.partitions).await?;
            Some((js, before))
        }
        None => None,
    };

    let shared = Arc::new(Shared {
        epoch: Instant::now(),
        last_event_ns: AtomicU64::new(0),
        measure_from: Duration::from_secs(a.warmup),
        sending: AtomicBool::new(true),
        finished: AtomicBool::new(false),
        counters: Counters::default(),
    });
    let per_user_rate = a.rate as f64 / a.users as f64;
    // Below one message per client per run, most clients never send: the
    // rate stays what was asked (a large channel at a few messages a second).
    let interval = Duration::from_secs_f64(1.0 / per_user_rate.max(1e-6));
    let react_every =
        (a.reaction_rate > 0.0).then(|| Duration::from_secs_f64(a.users as f64 / a.reaction_rate));
    eprintln!(
        "sending {} msg/s for {}s ({:.4} msg/s per client, first {}s not measured)",
        a.rate, a.duration, per_user_rate, a.warmup
    );
    let links = if a.link_share > 0.0 {
        let base = slow_pages(Duration::from_millis(a.link_delay_ms)).await?;
        let every = (1.0 / a.link_share.min(1.0)).round().max(1.0) as u64;
        eprintln!(
            "one message in {every} links to {base}/p/..., answered after {} ms",
            a.link_delay_ms
        );
        Some((every, base))
    } else {
        None
    };
    let mut tasks = Vec::new();
    for (user, ws) in connections {
        let conv = conversation_of.get(&user).cloned().unwrap_or_default();
        let pace = Pace {
            conversation: conv,
            interval,
            react_every,
            size: a.size,
            links: links.clone(),
            polls: a.polls,
        };
        tasks.push(tokio::spawn(client_task(ws, user, pace, shared.clone())));
    }

    let start = Instant::now();
    let cpu_at_start = cpu_times(&a.server_pid);
    let mut peak_rss = 0;
    while start.elapsed() < Duration::from_secs(a.duration) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Some((rss, _)) = memory_of(&a.server_pid) {
            peak_rss = peak_rss.max(rss);
        }
    }
    shared.sending.store(false, Ordering::Relaxed);
    let sending_time = start.elapsed();
    // Let sends already past the check above be counted before comparing.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let receivers = (a.group_size - 1) as u64;
    let grace = Instant::now() + Duration::from_secs(10);
    while Instant::now() < grace {
        let c = &shared.counters;
        let sent = c.sent.load(Ordering::Relaxed);
        if c.acked.load(Ordering::Relaxed) >= sent
            && c.delivered.load(Ordering::Relaxed) >= sent * receivers
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let at_end = memory_of(&a.server_pid);
    let cpu_at_end = cpu_times(&a.server_pid);
    // Until the last ack or delivery: the CPU spent on the backlog counts.
    let cpu_window = start.elapsed();
    shared.finished.store(true, Ordering::Relaxed);

    let mut ack_us = histogram()?;
    let mut delivery_us = histogram()?;
    let mut errors: HashMap<String, u64> = HashMap::new();
    let mut unacked: Vec<String> = Vec::new();
    for t in tasks {
        match t.await {
            Ok(Ok(r)) => {
                ack_us.add(&r.ack_us).ok();
                delivery_us.add(&r.delivery_us).ok();
                for (k, v) in r.errors {
                    *errors.entry(k).or_default() += v;
                }
                unacked.extend(r.unacked);
            }
            Ok(Err(e)) => eprintln!("a client failed: {e}"),
            Err(e) => eprintln!("a client task failed: {e}"),
        }
    }
    let c = &shared.counters;
    let (sent, acked, delivered) = (
        c.sent.load(Ordering::Relaxed),
        c.acked.load(Ordering::Relaxed),
        c.delivered.load(Ordering::Relaxed),
    );
    let secs = sending_time.as_secs_f64();
    // Throughput over the time until the last ack or delivery, so a backlog
    // drained after the sending stopped does not inflate it.
    let busy = (shared.last_event_ns.load(Ordering::Relaxed) as f64 / 1e9).max(secs);
    println!("switchboard bench chat");
    println!(
        "  clients {}, conversations of {}, {} bytes of text, {} s",
        a.users, a.group_size, a.size, a.duration
    );
    println!("  offered          {} msg/s", a.rate);
    println!(
        "  sent             {sent} ({:.0} msg/s)",
        sent as f64 / secs
    );
    println!(
        "  acked            {acked} ({:.0} msg/s over {busy:.1} s; not acked 10 s after sending stopped: {})",
        acked as f64 / busy,
        sent.saturating_sub(acked)
    );
    println!(
        "  delivered        {delivered} of {} expected ({:.0} msg/s; missing: {})",
        acked * receivers,
        delivered as f64 / busy,
        (acked * receivers).saturating_sub(delivered)
    );
    if a.reaction_rate > 0.0 {
        let (reacted, heard) = (
            c.reactions_sent.load(Ordering::Relaxed),
            c.reactions_heard.load(Ordering::Relaxed),
        );
        let (what, event) = if a.polls {
            ("votes", "poll_updated")
        } else {
            ("reactions", "reaction")
        };
        println!(
            "  {what:<16} {reacted} sent ({:.1}/s); {heard} {event} events heard ({:.1} each)",
            reacted as f64 / secs,
            heard as f64 / reacted.max(1) as f64
        );
    }
    if a.link_share > 0.0 {
        println!(
            "  link previews    {} message_updated heard",
            c.updates_heard.load(Ordering::Relaxed)
        );
    }
    println!("  errors           {errors:?}");
    if !unacked.is_empty() {
        unacked.sort();
        unacked.truncate(10);
        println!("  unacked (first)  {}", unacked.join(" "));
    }
    println!("  send to ack      {}", quantiles(&ack_us));
    println!("  send to delivery {}", quantiles(&delivery_us));
    if let (Some((b, _)), Some((i, _))) = (before, idle) {
        println!(
            "  server RSS       {} MiB before clients, {} MiB with {} idle clients ({:.1} KiB per connection)",
            b / 1024,
            i / 1024,
            a.users,
            i.saturating_sub(b) as f64 / a.users as f64
        );
    }
    if let (Some(from), Some(to)) = (cpu_at_start, cpu_at_end) {
        let per_process: Vec<ProcessCpu> = to.iter().zip(&from).map(|(t, f)| t.since(f)).collect();
        let spent: Duration = per_process.iter().map(ProcessCpu::total).sum();
        let per_message = |d: Duration| d.as_secs_f64() * 1e6 / acked.max(1) as f64;
        println!(
            "  server CPU       {:.2} cores over {:.1} s, {:.0} us per acked message (every --server-pid together)",
            spent.as_secs_f64() / cpu_window.as_secs_f64(),
            cpu_window.as_secs_f64(),
            per_message(spent)
        );
        for p in &per_process {
            println!(
                "    {} ({}): {:.0} us per acked message ({:.0} user, {:.0} system)",
                p.name,
                p.pid,
                per_message(p.total()),
                per_message(p.user),
                per_message(p.system)
            );
        }
    }
    if let Some((js, before)) = &backbone {
        let carried = ingest_messages(js, a.partitions)
            .await?
            .saturating_sub(*before);
        println!(
            "  ingest messages  {carried} JetStream messages carried the {acked} acked sends ({:.2} sends per message)",
            acked as f64 / carried.max(1) as f64
        );
    }
    if let Some((end, hwm)) = at_end {
        println!(
            "  server RSS       {} MiB peak while sending (sampled), {} MiB at the end, {} MiB high-water mark",
            peak_rss / 1024,
            end / 1024,
            hwm / 1024
        );
    }
    Ok(())
}
