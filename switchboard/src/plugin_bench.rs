//! `bench plugin`: the cost of one moderation hook call, instantiation
//! included, for a component beside a native Rust implementation of the
//! word-list rule (the example plugin's rule), measured on one thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use hdrhistogram::Histogram;
use switchboard_plugin_host::host::Verdict;
use switchboard_plugin_host::{Hook, ModerationInput, PluginHost, PluginLimits};
use switchboard_protocol::content::ContentLimits;
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::{Content, ConversationId, ConversationKind, TenantId, UserId};

#[derive(clap::Args)]
pub struct PluginBenchArgs {
    /// The moderation component.
    #[arg(long, default_value = "plugins/dist/word-list.wasm")]
    component: std::path::PathBuf,
    /// Measured calls per case.
    #[arg(long, default_value_t = 100_000)]
    calls: u64,
    /// Calls before measuring.
    #[arg(long, default_value_t = 10_000)]
    warmup: u64,
    /// Configuration values, `key=value`.
    #[arg(long = "config")]
    config: Vec<String>,
    /// The limits to run under, as in `[plugins]` (default: the defaults).
    #[arg(long)]
    deadline_ms: Option<u64>,
    #[arg(long)]
    memory_bytes: Option<usize>,
    #[arg(long)]
    max_component_bytes: Option<usize>,
}

pub fn run(args: PluginBenchArgs) -> anyhow::Result<()> {
    let bytes = std::fs::read(&args.component)
        .with_context(|| format!("reading {}", args.component.display()))?;
    let mut config = BTreeMap::new();
    for kv in &args.config {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("--config takes key=value, not {kv:?}");
        };
        config.insert(k.to_owned(), v.to_owned());
    }
    let words: Vec<String> = config
        .get("words")
        .map_or("darn,heck", String::as_str)
        .split(',')
        .map(|w| w.trim().to_lowercase())
        .collect();
    let config = Arc::new(config);
    let mut limits = PluginLimits::default();
    if let Some(ms) = args.deadline_ms {
        limits.deadline = std::time::Duration::from_millis(ms);
    }
    if let Some(bytes) = args.memory_bytes {
        limits.memory_bytes = bytes;
    }
    if let Some(bytes) = args.max_component_bytes {
        limits.max_component_bytes = bytes;
    }
    let host = PluginHost::new(limits)?;
    let compiled = host.compile(Hook::Moderation, &bytes)?;
    let tenant = TenantId::new("bench")?;
    let conversation = ConversationId::new("bench-conversation")?;
    let sender = UserId::new("bench-user")?;
    let limits = ContentLimits::default();
    let cases = [
        (
            "clean 64-byte text",
            "the quick brown fox jumps over the lazy dog again and again, ok?",
        ),
        (
            "64-byte text with a listed word",
            "the quick brown fox jumps over the darn lazy dog again and again",
        ),
    ];
    println!(
        "{} calls per case after {} warm-up calls; one thread; component {} ({} bytes)",
        args.calls,
        args.warmup,
        args.component.display(),
        bytes.len()
    );
    println!("| case | implementation | p50 | p99 | p99.9 | max | mean |");
    println!("|---|---|---|---|---|---|---|");
    for (name, text) in cases {
        let content = Content::Text { text: text.into() };
        let input = ModerationInput {
            tenant: &tenant,
            conversation_id: &conversation,
            kind: ConversationKind::Group,
            member_count: 10,
            sender: &sender,
            content: &content,
            options: &SendOptions::default(),
        };
        let wasm = measure(args.warmup, args.calls, || {
            match host.moderate(&compiled, &config, &input, &limits) {
                Ok(Some(Verdict::Allow | Verdict::Rewrite(_))) => Ok(()),
                other => bail!("unexpected answer: {other:?}"),
            }
        })?;
        let native = measure(args.warmup, args.calls, || {
            std::hint::black_box(mask(std::hint::black_box(text), &words));
            Ok(())
        })?;
        for (implementation, h) in [("Wasm component", &wasm), ("native Rust", &native)] {
            println!(
                "| {name} | {implementation} | {} | {} | {} | {} | {} |",
                micros(h.value_at_quantile(0.5)),
                micros(h.value_at_quantile(0.99)),
                micros(h.value_at_quantile(0.999)),
                micros(h.max()),
                micros(h.mean() as u64),
            );
        }
    }
    let counts = host.counts(Hook::Moderation);
    if counts.failures > 0 {
        bail!("{} of {} calls failed", counts.failures, counts.calls);
    }
    Ok(())
}

fn micros(ns: u64) -> String {
    format!("{:.2} µs", ns as f64 / 1000.0)
}

/// Nanoseconds per call.
fn measure(
    warmup: u64,
    calls: u64,
    mut call: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Histogram<u64>> {
    for _ in 0..warmup {
        call()?;
    }
    let mut h = Histogram::<u64>::new(3)?;
    for _ in 0..calls {
        let started = Instant::now();
        call()?;
        h.record(started.elapsed().as_nanos() as u64)?;
    }
    Ok(h)
}

/// The word-list rule, natively: whole words from the list, ignoring
/// case, have their letters replaced by `*`.
fn mask(text: &str, words: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut start = None;
    let listed = |w: &str| {
        if w.is_ascii() {
            words.iter().any(|l| l.eq_ignore_ascii_case(w))
        } else {
            let lower = w.to_lowercase();
            words.contains(&lower)
        }
    };
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (true, Some(_)) => {}
            (false, Some(s)) => {
                push_word(&mut out, &text[s..i], listed(&text[s..i]));
                out.push(c);
                start = None;
            }
            (false, None) => out.push(c),
        }
    }
    if let Some(s) = start {
        push_word(&mut out, &text[s..], listed(&text[s..]));
    }
    out
}

fn push_word(out: &mut String, word: &str, masked: bool) {
    if masked {
        out.extend(word.chars().map(|_| '*'));
    } else {
        out.push_str(word);
    }
}
