//! The search index feed (v1.2), and the writers' acks that follow it.
//!
//! What a commit changed of searchable text is stored on `SB_INDEX`
//! before the commands that made it are acked, so that a crash between
//! the two repeats the commands, and their changes with them. Stored
//! one message per batch, the feed cost every batch a JetStream
//! publish, and a delivery to each search replica: at everyday rates,
//! where batches are one send each, as much as the send itself. So each
//! worker has one feed task: writers queue a batch's changes with the
//! batch's ack and go on with their next batch; the task gathers what
//! every partition queued within [`WINDOW`] into one message on
//! `sb.index.<worker>` (a line per change, in queue order, so each
//! partition's changes keep their order), and acks the batches once it
//! is stored, the last of each partition's consumer (they ack all). The
//! acks of a partition thus follow its feed by at most a window, which
//! no client waits for: events went out at the commit. The expiry and
//! the erasure, which commit outside batches, queue their changes the
//! same way and wait until they are stored ([`IndexFeed::store`]).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream;
use switchboard_nats::BackboneError;
use switchboard_nats::publish::{HEADER_TTL, publish_stored, ttl_until};
use switchboard_nats::search::{IndexOp, index_subject};
use tokio::sync::{mpsc, oneshot};

use crate::sequencer::Outcome;

/// How long the feed task gathers what writers queue before it stores
/// it: well inside search's freshness (2 s) and the writer consumer's
/// `ack_wait` (30 s).
const WINDOW: Duration = Duration::from_millis(50);

/// Most batches queued at once; a writer whose batch does not fit waits.
const QUEUED: usize = 1024;

/// The index changes of a batch's outcomes: a sent message's text, an
/// edit's new text, a deletion. A send answered as a retry is put again:
/// after a crash between a commit and its feed, its first put was lost
/// (a put is idempotent).
pub(crate) fn ops_of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Vec<IndexOp> {
    let mut ops = Vec::new();
    for outcome in outcomes {
        match outcome {
            // A shadow-banned sender's message (v1.3) is found by nobody.
            Outcome::Deliver { message, .. }
            | Outcome::Answer { message, .. }
            | Outcome::Update { message, .. }
                if message.shadow => {}
            Outcome::Deliver {
                tenant, message, ..
            }
            | Outcome::Answer { tenant, message } => ops.extend(IndexOp::put_of(tenant, message)),
            Outcome::Update {
                tenant, message, ..
            } => ops.push(
                IndexOp::put_of(tenant, message).unwrap_or_else(|| IndexOp::Remove {
                    tenant: tenant.clone(),
                    conversation_id: message.conversation_id.clone(),
                    seqs: vec![message.seq],
                }),
            ),
            _ => {}
        }
    }
    ops
}

/// The most bytes of changes in one feed message: well under the
/// stream's `max_msg_size` (4 MiB), so a large round goes in several.
const MAX_FEED_MESSAGE: usize = 1 << 20;

/// A writer's batch, to ack once its changes are stored.
pub(crate) struct BatchAck {
    /// The batch's last message: acking it acks the batch.
    pub message: jetstream::Message,
    /// Its stream sequence.
    pub seq: u64,
    /// Its consumer's ack floor, which the writer reads to purge.
    pub acked_through: Arc<AtomicU64>,
}

enum Queued {
    Batch {
        ops: Vec<IndexOp>,
        // Boxed: a message is large, and a waiting store is not.
        ack: Option<Box<BatchAck>>,
    },
    Store {
        ops: Vec<IndexOp>,
        stored: oneshot::Sender<Result<(), BackboneError>>,
    },
}

/// A worker's feed task, shared by its writers, expiry and erasure.
pub(crate) struct IndexFeed {
    queue: mpsc::Sender<Queued>,
}

impl IndexFeed {
    /// Starts the task; with `enabled` false (`[search] enabled = false`)
    /// it stores no changes and only acks.
    pub fn start(js: jetstream::Context, worker: &str, enabled: bool) -> Self {
        let (queue, queued) = mpsc::channel(QUEUED);
        tokio::spawn(run(js, index_subject(worker), enabled, queued));
        Self { queue }
    }

    /// Queues a batch's changes and its ack behind everything queued
    /// before; waits only while the queue is full.
    pub async fn settle(&self, ops: Vec<IndexOp>, ack: Option<BatchAck>) {
        // The task runs as long as the process does.
        let ack = ack.map(Box::new);
        let _ = self.queue.send(Queued::Batch { ops, ack }).await;
    }

    /// Waits until everything queued before is stored and its batches
    /// acked (or the task is gone): for a writer handing its partition
    /// over.
    pub async fn flush(&self) {
        let _ = self.store(Vec::new()).await;
    }

    /// Stores `ops` behind everything queued before, and says whether
    /// they were stored: for the callers that must not go on without.
    pub async fn store(&self, ops: Vec<IndexOp>) -> Result<(), BackboneError> {
        let stopped = || BackboneError::Unavailable("the index feed stopped".into());
        let (stored, answer) = oneshot::channel();
        self.queue
            .send(Queued::Store { ops, stored })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn run(
    js: jetstream::Context,
    subject: String,
    enabled: bool,
    mut queued: mpsc::Receiver<Queued>,
) {
    while let Some(first) = queued.recv().await {
        // A caller waiting on its changes is not kept waiting.
        let mut waited_for = matches!(first, Queued::Store { .. });
        let mut round = vec![first];
        let until = tokio::time::Instant::now() + WINDOW;
        while !waited_for && round.len() < QUEUED {
            match tokio::time::timeout_at(until, queued.recv()).await {
                Ok(Some(next)) => {
                    waited_for = matches!(next, Queued::Store { .. });
                    round.push(next);
                }
                Ok(None) | Err(_) => break,
            }
        }
        settle_round(&js, &subject, enabled, round).await;
    }
}

/// Stores a round's changes, then acks its batches and answers its
/// waiting callers. A failure to store is counted and logged; the
/// batches are acked all the same (the index gets those changes at its
/// next rebuild), and the waiting callers are told.
async fn settle_round(js: &jetstream::Context, subject: &str, enabled: bool, round: Vec<Queued>) {
    let mut ops = Vec::new();
    let mut last: Vec<Box<BatchAck>> = Vec::new();
    let mut waiting = Vec::new();
    for queued in round {
        match queued {
            Queued::Batch { ops: more, ack } => {
                ops.extend(more);
                let Some(ack) = ack else { continue };
                // The last batch of each consumer: it acks the others.
                match last
                    .iter_mut()
                    .find(|l| Arc::ptr_eq(&l.acked_through, &ack.acked_through))
                {
                    Some(l) if l.seq < ack.seq => *l = ack,
                    Some(_) => {}
                    None => last.push(ack),
                }
            }
            Queued::Store { ops: more, stored } => {
                ops.extend(more);
                waiting.push(stored);
            }
        }
    }
    let stored = if enabled && !ops.is_empty() {
        store_ops(js, subject, &ops).await
    } else {
        Ok(())
    };
    for batch in last {
        match batch.message.ack().await {
            Ok(()) => {
                batch.acked_through.fetch_max(batch.seq, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(error = %e, "acking a batch failed; it will be redelivered")
            }
        }
    }
    for w in waiting {
        let _ = w.send(stored.clone());
    }
}

/// Stores `ops` on the feed, in order, in messages of at most
/// [`MAX_FEED_MESSAGE`] bytes. The text of a message that expires
/// (retention, disappearing messages) is kept no longer than the message
/// lives: its put goes in a message of its own time to live (`Nats-TTL`;
/// consecutive changes with the same one go together, so the order
/// holds), and one whose time is past is not stored at all.
async fn store_ops(
    js: &jetstream::Context,
    subject: &str,
    ops: &[IndexOp],
) -> Result<(), BackboneError> {
    let now = switchboard_protocol::Timestamp::now();
    let mut bodies: Vec<(Option<String>, String)> = Vec::new();
    for op in ops {
        let ttl = match op {
            IndexOp::Put {
                expires_at: Some(at),
                ..
            } => match ttl_until(*at, now) {
                Some(ttl) => Some(ttl),
                None => continue,
            },
            _ => None,
        };
        let line = match serde_json::to_string(op) {
            Ok(line) => line,
            Err(e) => {
                tracing::warn!(error = %e, "an index change does not encode");
                continue;
            }
        };
        let fits = bodies
            .last()
            .is_some_and(|(same, body)| *same == ttl && body.len() + line.len() < MAX_FEED_MESSAGE);
        if !fits {
            bodies.push((ttl, String::new()));
        }
        if let Some((_, body)) = bodies.last_mut() {
            let _ = writeln!(body, "{line}");
        }
    }
    for (ttl, body) in bodies {
        let mut headers = HeaderMap::new();
        if let Some(ttl) = ttl {
            headers.insert(HEADER_TTL, ttl.as_str());
        }
        // One at a time: the feed's order is the index's.
        let stored = publish_stored(
            js,
            subject.to_owned(),
            headers,
            body.into(),
            "index changes",
        )
        .await;
        if let Err(e) = stored {
            crate::metrics::index_ops_lost(ops.len());
            tracing::warn!(error = %e, ops = ops.len(), "index changes were not stored; the index gets them at its next rebuild");
            return Err(e);
        }
    }
    Ok(())
}
