//! A steady stream of sends for fault tests: one one-to-one conversation
//! per ingest partition, each with a sender that resends until acked and
//! reconnects to the next gateway when its own goes away; and the tools
//! to say what a fault cost: a timeline of what was done, and the longest
//! stretch without an ack.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard_nats::subject::partition_of;
use switchboard_protocol::{ConversationId, ConversationKind, TenantId};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::Cluster;
use crate::reliable::{Acked, Session};

/// A conversation of the load: its id, its sender, its other member.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub id: String,
    pub sender: String,
    pub reader: String,
    pub partition: u16,
}

/// One send: when it was first sent and when its ack came, and the index
/// of its conversation.
#[derive(Debug, Clone, Copy)]
pub struct SendTimes {
    pub sent: Instant,
    pub acked: Instant,
    pub conversation: usize,
}

/// What one sender had acked: (user, client_msg_id, ack), in send order.
pub type AckedSends = Vec<(String, String, Acked)>;

pub struct SteadySends {
    pub conversations: Vec<Conversation>,
    sends: Arc<Mutex<Vec<SendTimes>>>,
    stop: Arc<AtomicBool>,
    senders: Vec<JoinHandle<AckedSends>>,
}

impl SteadySends {
    /// Creates one conversation per partition (users named `<prefix><i>a`
    /// and `b`) and starts their senders, half of them on each gateway.
    pub async fn start(
        cluster: &Cluster,
        partitions: u16,
        prefix: &str,
        resend_after: Duration,
    ) -> Self {
        let tenant = TenantId::new(crate::TENANT).unwrap();
        let mut by_partition: HashMap<u16, Conversation> = HashMap::new();
        for i in 0..200 {
            if by_partition.len() == usize::from(partitions) {
                break;
            }
            let (a, b) = (format!("{prefix}{i}a"), format!("{prefix}{i}b"));
            let id = cluster.create(ConversationKind::Direct, &a, &[&b]).await;
            let partition = partition_of(&tenant, &ConversationId::new(&id).unwrap(), partitions);
            by_partition.entry(partition).or_insert(Conversation {
                id,
                sender: a,
                reader: b,
                partition,
            });
        }
        assert_eq!(by_partition.len(), usize::from(partitions));
        let mut conversations: Vec<Conversation> = by_partition.into_values().collect();
        conversations.sort_by_key(|c| c.partition);

        let sends: Arc<Mutex<Vec<SendTimes>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let mut senders = Vec::new();
        for (i, c) in conversations.iter().enumerate() {
            let mut urls = cluster.ws_urls();
            urls.rotate_left(i % 2);
            let mut session = Session::new(urls, cluster.token(&c.sender, "sender"));
            session.resend_after = resend_after;
            let (conv, user) = (c.id.clone(), c.sender.clone());
            let (stop, sends) = (stop.clone(), sends.clone());
            senders.push(tokio::spawn(async move {
                let mut acked = Vec::new();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let id = format!("{user}-{n:05}");
                    let sent = Instant::now();
                    let ack = session
                        .send(&conv, &id, &format!("{user} {n}"), Duration::from_secs(90))
                        .await
                        .unwrap_or_else(|| panic!("{id} was never acked"));
                    sends.lock().unwrap().push(SendTimes {
                        sent,
                        acked: Instant::now(),
                        conversation: i,
                    });
                    acked.push((user.clone(), id, ack));
                    n += 1;
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                acked
            }));
        }
        Self {
            conversations,
            sends,
            stop,
            senders,
        }
    }

    /// Every send acked so far.
    pub fn sends(&self) -> Vec<SendTimes> {
        self.sends.lock().unwrap().clone()
    }

    /// Stops the senders after their current send; what each acked, by
    /// conversation id.
    pub async fn stop(self) -> (HashMap<String, AckedSends>, Vec<SendTimes>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut acked = HashMap::new();
        for (c, s) in self.conversations.iter().zip(self.senders) {
            acked.insert(c.id.clone(), s.await.unwrap());
        }
        let sends = self.sends.lock().unwrap().clone();
        (acked, sends)
    }
}

/// The longest stretch without an ack between `from` and `to`, and where
/// it started.
pub fn longest_gap(acks: &[Instant], from: Instant, to: Instant) -> (Duration, Instant) {
    let mut times: Vec<Instant> = acks
        .iter()
        .copied()
        .filter(|t| *t >= from && *t <= to)
        .collect();
    times.sort();
    let mut worst = (Duration::ZERO, from);
    let mut last = from;
    for t in times.into_iter().chain(std::iter::once(to)) {
        if t - last > worst.0 {
            worst = (t - last, last);
        }
        last = t;
    }
    worst
}

/// When something was done to the cluster, for the report: each mark is
/// printed with its wall-clock time, to read beside the processes' logs.
#[derive(Default)]
pub struct Timeline {
    pub events: Vec<(Instant, String)>,
}

impl Timeline {
    pub fn mark(&mut self, what: impl Into<String>) -> Instant {
        let what = what.into();
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() % 86_400_000);
        eprintln!(
            "cluster faults: {:02}:{:02}:{:02}.{:03} UTC {what}",
            ms / 3_600_000,
            ms / 60_000 % 60,
            ms / 1000 % 60,
            ms % 1000
        );
        let now = Instant::now();
        self.events.push((now, what));
        now
    }

    /// `t` as "1.2s after <the last event before it>".
    pub fn when(&self, t: Instant) -> String {
        self.events
            .iter()
            .rev()
            .find(|(e, _)| *e <= t)
            .map_or("before the first fault".to_owned(), |(e, what)| {
                format!("{:.1}s after {what}", (t - *e).as_secs_f32())
            })
    }

    /// What each event cost: the longest wait of a send made between it
    /// and the next event, and the longest stretch without any ack.
    pub fn report(&self, sends: &[SendTimes], to: Instant) {
        let acks: Vec<Instant> = sends.iter().map(|s| s.acked).collect();
        for (i, (at, what)) in self.events.iter().enumerate() {
            let until = self.events.get(i + 1).map_or(to, |(t, _)| *t);
            let worst = sends
                .iter()
                .filter(|s| s.sent >= *at && s.sent < until)
                .map(|s| s.acked - s.sent)
                .max()
                .unwrap_or_default();
            let (gap, _) = longest_gap(&acks, *at, until);
            eprintln!(
                "cluster faults: after {what}: a send waited up to {:.2}s, no ack for up to {:.2}s",
                worst.as_secs_f32(),
                gap.as_secs_f32()
            );
        }
    }
}
