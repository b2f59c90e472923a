//! `switchboard bench export`: what finding one user's own messages costs
//! (`GET /v1/me/export` reads nothing else), against how much others
//! wrote in the same conversation. An embedded store in a temporary
//! directory gets one group where others write `--others` messages and
//! the user `--own`, spread among them; then the user's messages are read
//! `--rounds` times each way, a page of 200 at a time:
//! - `history`: the conversation's history, kept when the user sent it
//!   (how the export read before its index);
//! - `sent_by`: the user's own index (`Read::SentBy`), as it reads now.
//!
//! Reports the process's CPU time (user + system, `sys::cpu_time`) and
//! the rows each way looked at, per export.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, ConversationKind, DeviceId, Message, MessageId, TenantId,
    Timestamp, UserId,
};
use switchboard_store::embedded::{EmbeddedConfig, EmbeddedStore};
use switchboard_store::{
    ConversationKey, ConversationRecord, HistoryQuery, Mutation, Reads, Store,
};

/// Rows read per page, as the export reads them.
const PAGE: usize = 200;
/// Messages appended per commit while filling.
const FILL_BATCH: u64 = 500;

#[derive(clap::Args)]
pub struct ExportBenchArgs {
    /// Messages others write in the conversation.
    #[arg(long, default_value_t = 20_000)]
    others: u64,
    /// Messages the exporting user writes there, spread among the others'.
    #[arg(long, default_value_t = 3)]
    own: u64,
    /// Exports timed each way.
    #[arg(long, default_value_t = 10)]
    rounds: u32,
    /// Where to build the store (default: a temporary directory, removed
    /// after).
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub async fn run(a: ExportBenchArgs) -> anyhow::Result<()> {
    let temp =
        std::env::temp_dir().join(format!("switchboard-export-bench-{}", std::process::id()));
    let dir = a.dir.clone().unwrap_or_else(|| temp.clone());
    let result = measure(&a, &dir).await;
    if a.dir.is_none() {
        let _ = std::fs::remove_dir_all(&temp);
    }
    result
}

async fn measure(a: &ExportBenchArgs, dir: &std::path::Path) -> anyhow::Result<()> {
    let store = EmbeddedStore::open(&EmbeddedConfig::in_dir(dir)).context("opening the store")?;
    let tenant = TenantId::new("bench")?;
    let (me, other) = (UserId::new("exporter")?, UserId::new("others")?);
    let key = ConversationKey {
        tenant: tenant.clone(),
        conversation_id: ConversationId::new("group")?,
    };
    fill(&store, &key, &me, &other, a.others, a.own).await?;
    println!(
        "one group: {} messages by others, {} by the exporting user; {} exports each way",
        a.others, a.own, a.rounds
    );
    println!("| read | rows looked at | CPU per export (median) | max |");
    println!("|---|---|---|---|");
    for way in [Way::History, Way::SentBy] {
        let mut cpu = Vec::new();
        let mut rows = 0;
        for _ in 0..a.rounds {
            let started = crate::sys::cpu_time();
            let (found, looked_at) = way.read(&store, &key, &me).await?;
            cpu.push(crate::sys::cpu_time().saturating_sub(started));
            anyhow::ensure!(
                found == a.own,
                "{} found {found} of {} messages",
                way.name(),
                a.own
            );
            rows = looked_at;
        }
        cpu.sort_unstable();
        println!(
            "| `{}` | {rows} | {:.2} ms | {:.2} ms |",
            way.name(),
            ms(cpu[cpu.len() / 2]),
            ms(cpu[cpu.len() - 1]),
        );
    }
    Ok(())
}

async fn fill(
    store: &EmbeddedStore,
    key: &ConversationKey,
    me: &UserId,
    other: &UserId,
    others: u64,
    own: u64,
) -> anyhow::Result<()> {
    let now = Timestamp::now();
    store
        .commit(vec![Mutation::CreateConversation {
            record: Box::new(ConversationRecord {
                tenant: key.tenant.clone(),
                conversation_id: key.conversation_id.clone(),
                kind: ConversationKind::Group,
                title: None,
                created_at: now,
                created_by: other.clone(),
                last_seq: 0,
                last_message: None,
                last_activity: now,
                policy: Default::default(),
                custom: Default::default(),
                channel: Default::default(),
                mutes: Vec::new(),
            }),
            members: vec![other.clone(), me.clone()],
            unsolicited: None,
        }])
        .await?;
    let total = others + own;
    // The user's messages at even intervals among the others'.
    let every = total / own.max(1);
    let device = DeviceId::new("bench")?;
    let started = Instant::now();
    let mut seq = 0;
    while seq < total {
        let first = seq;
        let messages: Vec<Message> = (seq + 1..=(seq + FILL_BATCH).min(total))
            .map(|s| {
                let mine = own > 0 && s % every == 0 && s / every <= own;
                let sender = if mine { me } else { other };
                Ok(Message::plain(
                    MessageId::from_u64(s),
                    key.conversation_id.clone(),
                    s,
                    sender.clone(),
                    device.clone(),
                    ClientMsgId::new(format!("m{s}"))?,
                    Some(Content::Text {
                        text: format!("message number {s} of the benchmark's group"),
                    }),
                    now,
                ))
            })
            .collect::<anyhow::Result<_>>()?;
        seq += messages.len() as u64;
        store
            .commit(vec![Mutation::Append {
                key: key.clone(),
                expected_last_seq: first,
                messages,
                inbox: false,
            }])
            .await?;
    }
    eprintln!("filled {total} messages in {:.1?}", started.elapsed());
    Ok(())
}

#[derive(Clone, Copy)]
enum Way {
    History,
    SentBy,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::History => "history",
            Way::SentBy => "sent_by",
        }
    }

    /// The user's messages found, and the rows looked at.
    async fn read(
        self,
        store: &EmbeddedStore,
        key: &ConversationKey,
        me: &UserId,
    ) -> anyhow::Result<(u64, u64)> {
        let (mut found, mut looked_at) = (0, 0);
        let mut before = None;
        loop {
            let seqs: Vec<(u64, bool)> = match self {
                Way::History => store
                    .history(
                        &key.tenant,
                        &key.conversation_id,
                        me,
                        HistoryQuery {
                            before_seq: before,
                            after_seq: None,
                            limit: PAGE,
                            thread_root: None,
                        },
                    )
                    .await?
                    .into_iter()
                    .map(|m| (m.seq, m.sender_id == *me))
                    .collect(),
                Way::SentBy => store
                    .sent_by(key, me, before, PAGE)
                    .await?
                    .into_iter()
                    .map(|r| (r.seq, r.message.is_some_and(|m| m.sender_id == *me)))
                    .collect(),
            };
            let Some(&(oldest, _)) = seqs.last() else {
                return Ok((found, looked_at));
            };
            looked_at += seqs.len() as u64;
            found += seqs.iter().filter(|(_, mine)| *mine).count() as u64;
            before = Some(oldest);
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
