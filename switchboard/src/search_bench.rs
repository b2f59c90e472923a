//! `switchboard bench search`: the search index (v1.2) at scale, in this
//! process, as a search replica runs it: N messages of chat-like text
//! indexed and committed, then queries scoped to one user's
//! conversations, timed one by one. Prints the index's size on disk,
//! the indexing rate and the query latencies (p50, p99, max).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use switchboard_nats::search::IndexOp;
use switchboard_protocol::{ConversationId, MessageId, TenantId, Timestamp, UserId};
use switchboard_search::MAX_CONVERSATIONS;

#[derive(clap::Args)]
pub struct SearchBenchArgs {
    /// Messages to index.
    #[arg(long, default_value_t = 1_000_000)]
    messages: u64,
    /// Conversations they are spread over (one tenant).
    #[arg(long, default_value_t = 20_000)]
    conversations: u64,
    /// Conversations one querying user is a member of.
    #[arg(long, default_value_t = 200)]
    member_of: u64,
    /// Queries to time.
    #[arg(long, default_value_t = 2_000)]
    queries: usize,
    /// Where to build the index (default: a temporary directory, removed
    /// after).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// A small deterministic generator (xorshift), so runs compare.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Roughly Zipf over `n`: small ranks far more often, as words are.
    fn zipf(&mut self, n: u64) -> u64 {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((n as f64).powf(u) as u64).saturating_sub(1).min(n - 1)
    }
}

/// A vocabulary of made-up words, each 3 to 9 letters.
fn vocabulary(rng: &mut Rng, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let len = 3 + (rng.next() % 7) as usize;
            (0..len)
                .map(|_| char::from(b'a' + (rng.next() % 26) as u8))
                .collect()
        })
        .collect()
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The most costly queries the query language lets a user write, beside
/// a plain word: the most common words, all of them required; a phrase of
/// them; and the widest prefixes (the 3-letter ones that stand for the
/// most words), each at the bounds of `switchboard_search::query`.
fn hardest(words: &[String]) -> Vec<(&'static str, String)> {
    use switchboard_search::query::{MAX_PREFIX_TERMS, MAX_TERMS};
    let common: Vec<&str> = words.iter().take(MAX_TERMS).map(String::as_str).collect();
    let mut by_prefix: std::collections::BTreeMap<&str, usize> = Default::default();
    for w in words {
        if let Some(p) = w.get(..3) {
            *by_prefix.entry(p).or_default() += 1;
        }
    }
    let mut prefixes: Vec<(&str, usize)> = by_prefix
        .into_iter()
        .filter(|(_, n)| *n <= MAX_PREFIX_TERMS)
        .collect();
    prefixes.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let widest: Vec<String> = prefixes
        .iter()
        .take(MAX_TERMS)
        .map(|(p, _)| format!("{p}*"))
        .collect();
    vec![
        ("a plain word", words[10].clone()),
        ("the 16 most common words", common.join(" ")),
        ("a phrase of them", format!("\"{}\"", common.join(" "))),
        ("16 of the widest prefixes", widest.join(" ")),
        ("the widest prefix, alone", widest[0].clone()),
    ]
}

pub fn run(args: SearchBenchArgs) -> anyhow::Result<()> {
    let temp =
        std::env::temp_dir().join(format!("switchboard-search-bench-{}", std::process::id()));
    let dir = args.dir.clone().unwrap_or_else(|| temp.clone());
    let (mut index, _) = switchboard_search::open(&dir, 256 << 20).context("opening the index")?;
    let tenant = TenantId::new("bench")?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let words = vocabulary(&mut rng, 20_000);
    let conversation = |i: u64| ConversationId::new(format!("c{i}"));
    let sender = UserId::new("u1")?;
    let started = Instant::now();
    for n in 0..args.messages {
        let c = rng.next() % args.conversations.max(1);
        let length = 3 + (rng.next() % 14) as usize;
        let text: Vec<&str> = (0..length)
            .map(|_| words[rng.zipf(words.len() as u64) as usize].as_str())
            .collect();
        index.apply(&IndexOp::Put {
            tenant: tenant.clone(),
            conversation_id: conversation(c)?,
            seq: n + 1,
            message_id: MessageId::from_u64(n + 1),
            sender: sender.clone(),
            created_at: Timestamp::now(),
            text: text.join(" "),
            expires_at: None,
        })?;
        if (n + 1) % 100_000 == 0 {
            index.commit(n + 1)?;
        }
    }
    index.commit(args.messages)?;
    let indexing = started.elapsed();
    let size = dir_bytes(&dir);
    let searching = index.searching();
    let member_of: Vec<ConversationId> = (0..args.member_of.min(args.conversations))
        .map(|i| conversation(i * (args.conversations / args.member_of.max(1)).max(1)))
        .collect::<Result<_, _>>()?;
    let mut took = Vec::with_capacity(args.queries);
    let mut found = 0usize;
    for q in 0..args.queries {
        // One word of middling frequency, or two together.
        let a = &words[10 + rng.zipf(2_000) as usize];
        let query = if q % 2 == 0 {
            a.clone()
        } else {
            format!("{a} {}", words[rng.zipf(500) as usize])
        };
        let t = Instant::now();
        let forever = switchboard_search::Deadline::new(t + Duration::from_secs(3600));
        let (hits, _) = searching.search(&tenant, &member_of, &query, 20, 0, &forever)?;
        took.push(t.elapsed());
        found += hits.len();
    }
    took.sort();
    let pct = |p: f64| took[((took.len() as f64 * p) as usize).min(took.len() - 1)];
    println!(
        "indexed {} messages over {} conversations in {:.1} s ({:.0} messages/s)",
        args.messages,
        args.conversations,
        indexing.as_secs_f64(),
        args.messages as f64 / indexing.as_secs_f64()
    );
    println!(
        "index size {:.1} MiB ({:.1} MiB per million messages)",
        size as f64 / 1048576.0,
        size as f64 / 1048576.0 / (args.messages as f64 / 1e6)
    );
    println!(
        "{} queries over {} conversations: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({:.1} results each on average)",
        took.len(),
        member_of.len(),
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        took.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        found as f64 / took.len() as f64
    );
    let everywhere: Vec<ConversationId> = (0..args.conversations.min(MAX_CONVERSATIONS as u64))
        .map(conversation)
        .collect::<Result<_, _>>()?;
    for (label, query) in hardest(&words) {
        for (scope, conversations) in [("member of", &member_of), ("every", &everywhere)] {
            let mut took = Vec::with_capacity(20);
            let mut outcome = String::new();
            for _ in 0..20 {
                let t = Instant::now();
                let forever = switchboard_search::Deadline::new(t + Duration::from_secs(3600));
                outcome = match searching.search(&tenant, conversations, &query, 50, 0, &forever) {
                    Ok((hits, _)) => format!("{} hits", hits.len()),
                    Err(e) => format!("refused: {e}"),
                };
                took.push(t.elapsed());
            }
            took.sort();
            println!(
                "{label}, {scope} ({} conversations): p50 {:.2} ms, max {:.2} ms ({outcome})",
                conversations.len(),
                took[took.len() / 2].as_secs_f64() * 1e3,
                took[took.len() - 1].as_secs_f64() * 1e3,
            );
        }
    }
    drop(index);
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&temp);
    }
    Ok(())
}
