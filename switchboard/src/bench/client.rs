//! One client of `bench chat`: its sends (texts, some with a link, or
//! polls), reactions or votes, and acks, and what it measures of the
//! answers; the slow page server links point to.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hdrhistogram::Histogram;
use serde::Deserialize;
use switchboard_client::WsClient;

/// The emoji a client toggles, in turn.
const EMOJI: [&str; 8] = ["👍", "❤️", "😂", "🎉", "😮", "😢", "🙏", "🔥"];

#[derive(Default)]
pub(super) struct Counters {
    pub(super) sent: AtomicU64,
    pub(super) acked: AtomicU64,
    pub(super) delivered: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) reactions_sent: AtomicU64,
    pub(super) reactions_heard: AtomicU64,
    /// `message_updated` frames: link previews' cards, with --link-share.
    pub(super) updates_heard: AtomicU64,
}

pub(super) struct Shared {
    pub(super) epoch: Instant,
    /// Nanoseconds since `epoch` of the latest ack or delivery.
    pub(super) last_event_ns: AtomicU64,
    pub(super) measure_from: Duration,
    pub(super) sending: AtomicBool,
    pub(super) finished: AtomicBool,
    pub(super) counters: Counters,
}

pub(super) struct TaskResult {
    pub(super) ack_us: Histogram<u64>,
    pub(super) delivery_us: Histogram<u64>,
    pub(super) errors: HashMap<String, u64>,
    /// `client_msg_id`s sent and never acked, to look up in the logs.
    pub(super) unacked: Vec<String>,
}

#[derive(Deserialize)]
struct FrameRef<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    client_msg_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    code: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<MessageRef<'a>>,
    /// An `ack`'s.
    #[serde(default, borrow)]
    message_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct MessageRef<'a> {
    #[serde(borrow)]
    conversation_id: Cow<'a, str>,
    #[serde(borrow)]
    message_id: Cow<'a, str>,
    seq: u64,
    #[serde(default, borrow)]
    content: Option<ContentRef<'a>>,
}

#[derive(Deserialize)]
struct ContentRef<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    /// A poll's, which carries the send time as a text does.
    #[serde(default, borrow)]
    question: Option<Cow<'a, str>>,
}

pub(super) fn histogram() -> anyhow::Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 120_000_000, 3).context("histogram")
}

/// What one client does: where, how often, how large.
pub(super) struct Pace {
    pub(super) conversation: String,
    /// Between two sends.
    pub(super) interval: Duration,
    /// Between two reactions; none without reactions.
    pub(super) react_every: Option<Duration>,
    pub(super) size: usize,
    /// Every how many messages one carries a link, and where to.
    pub(super) links: Option<(u64, String)>,
    /// Polls and votes rather than texts and reactions.
    pub(super) polls: bool,
}

pub(super) async fn client_task(
    ws: WsClient,
    user: String,
    pace: Pace,
    shared: Arc<Shared>,
) -> anyhow::Result<TaskResult> {
    let Pace {
        conversation,
        interval,
        react_every,
        size,
        links,
        polls,
    } = pace;
    let (mut tx, mut rx) = ws.split();
    let mut result = TaskResult {
        ack_us: histogram()?,
        delivery_us: histogram()?,
        errors: HashMap::new(),
        unacked: Vec::new(),
    };
    // Spread the clients' first sends over one interval.
    let offset = Duration::from_nanos(rand::random::<u64>() % interval.as_nanos().max(1) as u64);
    let mut send_tick = tokio::time::interval_at(tokio::time::Instant::now() + offset, interval);
    send_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut ack_tick = tokio::time::interval(Duration::from_millis(100));
    // Reactions are spread over their own interval: where clients send
    // rarely (a large channel), the send offset would hold most of them
    // back past the end of the run.
    let reacting = react_every.is_some();
    let react_every = react_every.unwrap_or(Duration::from_secs(3600));
    let react_offset =
        Duration::from_nanos(rand::random::<u64>() % react_every.as_nanos().max(1) as u64);
    let mut react_tick =
        tokio::time::interval_at(tokio::time::Instant::now() + react_offset, react_every);
    react_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    // The newest message seen, and which emoji this client has on it.
    let mut newest: Option<String> = None;
    let mut mine = [false; EMOJI.len()];
    let mut turn = 0usize;
    let mut pending: HashMap<u64, Instant> = HashMap::new();
    let mut marks: HashMap<String, u64> = HashMap::new();
    let mut n: u64 = 0;
    let padding = "x".repeat(size.saturating_sub(20));
    loop {
        tokio::select! {
            _ = send_tick.tick(), if shared.sending.load(Ordering::Relaxed) => {
                // The guard was read when this select began, possibly
                // before sending stopped: a send after that would be
                // counted without time to be acked.
                if !shared.sending.load(Ordering::Relaxed) {
                    continue;
                }
                let now = Instant::now();
                let sent_ns = now.duration_since(shared.epoch).as_nanos() as u64;
                let content = if polls {
                    format!(
                        r#"{{"kind":"poll","question":"{sent_ns:020}{padding}","options":[{{"id":"o0","text":"a"}},{{"id":"o1","text":"b"}},{{"id":"o2","text":"c"}},{{"id":"o3","text":"d"}}]}}"#
                    )
                } else {
                    let link = match &links {
                        Some((every, base)) if n.is_multiple_of(*every) => format!(" {base}/p/{user}-{n}"),
                        _ => String::new(),
                    };
                    format!(r#"{{"kind":"text","text":"{sent_ns:020}{padding}{link}"}}"#)
                };
                let frame = format!(
                    r#"{{"type":"send_message","client_msg_id":"{user}-{n}","conversation_id":"{conversation}","content":{content}}}"#
                );
                tx.feed_text(frame).await?;
                tx.flush().await?;
                pending.insert(n, now);
                n += 1;
                shared.counters.sent.fetch_add(1, Ordering::Relaxed);
            }
            _ = react_tick.tick(), if reacting && shared.sending.load(Ordering::Relaxed) => {
                let Some(message_id) = &newest else { continue };
                if polls {
                    let option = turn % 4;
                    turn += 1;
                    tx.feed_text(format!(
                        r#"{{"type":"vote","conversation_id":"{conversation}","message_id":"{message_id}","option_ids":["o{option}"]}}"#
                    ))
                    .await?;
                    tx.flush().await?;
                    shared.counters.reactions_sent.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let i = turn % EMOJI.len();
                turn += 1;
                let action = if mine[i] { "remove" } else { "add" };
                mine[i] = !mine[i];
                tx.feed_text(format!(
                    r#"{{"type":"react","conversation_id":"{conversation}","message_id":"{message_id}","emoji":"{}","action":"{action}"}}"#,
                    EMOJI[i]
                ))
                .await?;
                tx.flush().await?;
                shared.counters.reactions_sent.fetch_add(1, Ordering::Relaxed);
            }
            _ = ack_tick.tick() => {
                for (conv, seq) in marks.drain() {
                    tx.feed_text(format!(r#"{{"type":"ack_delivered","conversation_id":"{conv}","seq":{seq}}}"#)).await?;
                }
                tx.flush().await?;
                if shared.finished.load(Ordering::Relaxed) {
                    break;
                }
            }
            text = rx.next_text() => {
                let text = text?;
                let now = Instant::now();
                let Ok(frame) = serde_json::from_str::<FrameRef<'_>>(&text) else {
                    continue;
                };
                match frame.kind.as_ref() {
                    "ack" => {
                        let k = frame
                            .client_msg_id
                            .as_deref()
                            .and_then(|id| id.rsplit('-').next())
                            .and_then(|k| k.parse::<u64>().ok());
                        if let Some(id) = &frame.message_id
                            && newest.as_deref() != Some(id.as_ref())
                        {
                            newest = Some(id.clone().into_owned());
                            mine = [false; EMOJI.len()];
                        }
                        if let Some(sent) = k.and_then(|k| pending.remove(&k)) {
                            shared.counters.acked.fetch_add(1, Ordering::Relaxed);
                            shared.last_event_ns.fetch_max(now.duration_since(shared.epoch).as_nanos() as u64, Ordering::Relaxed);
                            if sent.duration_since(shared.epoch) >= shared.measure_from {
                                let _ = result.ack_us.record(now.duration_since(sent).as_micros().max(1) as u64);
                            }
                        }
                    }
                    "message" => {
                        let Some(m) = frame.message else { continue };
                        if newest.as_deref() != Some(m.message_id.as_ref()) {
                            newest = Some(m.message_id.clone().into_owned());
                            mine = [false; EMOJI.len()];
                        }
                        let mark = marks.entry(m.conversation_id.into_owned()).or_insert(0);
                        *mark = (*mark).max(m.seq);
                        let sent_ns = m
                            .content
                            .and_then(|c| c.text.or(c.question))
                            .and_then(|t| t.get(..20).and_then(|p| p.parse::<u64>().ok()));
                        if let Some(sent_ns) = sent_ns {
                            shared.counters.delivered.fetch_add(1, Ordering::Relaxed);
                            shared.last_event_ns.fetch_max(now.duration_since(shared.epoch).as_nanos() as u64, Ordering::Relaxed);
                            let sent = Duration::from_nanos(sent_ns);
                            if sent >= shared.measure_from {
                                let now_ns = now.duration_since(shared.epoch);
                                let _ = result.delivery_us.record(now_ns.saturating_sub(sent).as_micros().max(1) as u64);
                            }
                        }
                    }
                    "reaction" | "poll_updated" => {
                        shared.counters.reactions_heard.fetch_add(1, Ordering::Relaxed);
                    }
                    "message_updated" => {
                        shared.counters.updates_heard.fetch_add(1, Ordering::Relaxed);
                    }
                    "error" => {
                        shared.counters.errors.fetch_add(1, Ordering::Relaxed);
                        *result.errors.entry(frame.code.unwrap_or_default().into_owned()).or_default() += 1;
                    }
                    _ => {}
                }
            }
        }
    }
    result.unacked = pending.keys().map(|n| format!("{user}-{n}")).collect();
    Ok(result)
}

/// A page server on 127.0.0.1 that answers every request after `delay`
/// with a small page (a title and a description): the slow site link
/// previews fetch. Its base URL.
pub(super) async fn slow_pages(delay: Duration) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                tokio::time::sleep(delay).await;
                let body = r#"<html><head><meta property="og:title" content="A slow page"><meta name="description" content="Answered late on purpose."></head><body></body></html>"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    Ok(base)
}
