//! Step 1, consume: the partition's consumer, made fresh at every start
//! and placed with its stream's leader, handing out batches of commands
//! in stream order. What it sees goes through the delivery checks
//! (`checks.rs`), which tell when to start over.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use async_nats::jetstream::consumer::pull::MessagesError;
use async_nats::jetstream::consumer::{DeliverPolicy, PullConsumer};
use async_nats::jetstream::stream::{ClusterInfo, ConsumerErrorKind, Stream as JsStream};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use switchboard_nats::definitions::{
    ingest_stream_name, writer_acked_floor, writer_consumer, writer_consumer_name,
};
use switchboard_nats::envelope::{Command, HEADER_COMMANDS, HEADER_REPLY, command_lines};
use switchboard_nats::trace;
use tokio::sync::watch;

use super::checks::{DeliveryChecks, Event, Group, Verdict, move_to};
use crate::ctx::Ctx;
use crate::duties::archive;
use crate::error::WorkerError;
use crate::fence::Fence;
use crate::sequencer::Incoming;
use crate::writer::index_feed::BatchAck;

/// How often an idle writer consumer proves it is alive; two missed
/// restart the writer.
const CONSUMER_HEARTBEAT: Duration = Duration::from_secs(1);

/// How often the delivery checks are given the time.
const TICK: Duration = Duration::from_millis(250);

/// How long a question to the cluster may wait for its answer.
const ASK: Duration = Duration::from_secs(2);

/// How often a writer purges what it acked from its stream at most.
const PURGE_EVERY: Duration = Duration::from_secs(1);

/// What a writer acked and purged, by stream sequence.
#[derive(Default)]
struct Acked {
    /// Every message up to this one is acked (by the feed task).
    through: Arc<AtomicU64>,
    /// Every message before this one is purged.
    purged_below: Arc<AtomicU64>,
    purged_at: Option<Instant>,
}

/// A batch taken from the consumer.
pub(super) struct Batch {
    pub partition: u16,
    /// The messages of commands, acked once every command is applied.
    pub messages: Vec<jetstream::Message>,
    /// Their commands, in stream order, and where each came from.
    pub commands: Vec<Incoming>,
    pub origins: Vec<Origin>,
    /// Whether any was delivered before: its keys are looked up.
    pub redelivered: bool,
    /// Archive requests, served after the commands, never between a
    /// command's read and its commit.
    pub archive_requests: Vec<jetstream::Message>,
    /// The batch's last message in stream order and its sequence: acking
    /// it acks the whole batch (the consumer acks all).
    last: Option<(u64, jetstream::Message)>,
}

/// Where a command of a batch came from: what setting it aside needs.
pub(super) enum Origin {
    /// A message of its own: its index in the batch's messages.
    Alone(usize),
    /// A line of a message of several.
    Line(Bytes),
}

type Chunks = Pin<Box<dyn Stream<Item = Vec<Result<jetstream::Message, MessagesError>>> + Send>>;

pub(super) struct Consumer {
    partition: u16,
    name: String,
    stream: JsStream,
    consumer: PullConsumer,
    /// The stream's last sequence when this consumer was made.
    held_through: u64,
    acked: Acked,
    chunks: Chunks,
    checks: DeliveryChecks,
    tick: tokio::time::Interval,
    fence: Fence,
}

impl Consumer {
    /// A fresh consumer for every new owner: it starts at the first
    /// unacked command, in stream order. Reusing the old one would deliver
    /// new commands before the old owner's unacked ones came back after
    /// `ack_wait`, and break each sender's order.
    ///
    /// Fresh for certain: if the old one could not be deleted (the request
    /// timed out in a leader election), a plain create would hand it back
    /// with its delivered-but-unacked commands, which come back only after
    /// `ack_wait`, behind newer ones. So a delete that did not happen, or a
    /// create that finds a consumer, fails the start and it is tried again.
    pub(super) async fn start(
        ctx: &Ctx,
        partition: u16,
        fence: Fence,
    ) -> Result<Self, WorkerError> {
        let stream_name = ingest_stream_name(partition);
        let mut stream = ctx
            .js
            .get_stream(&stream_name)
            .await
            .map_err(|e| WorkerError::nats(format!("get stream {stream_name}"), e))?;
        let name = writer_consumer_name(partition);
        // Where the previous owner's consumer had acked to: everything up
        // to it is stored, and the new consumer starts after it. Without
        // one (the first start, or a NATS server that restarted and lost
        // the consumer's state) it starts at the stream's first message.
        let acked_floor = writer_acked_floor(&stream, partition)
            .await
            .map_err(|e| WorkerError::nats(format!("read the old consumer {name}"), e))?;
        // The consumer's name is every owner's: one whose lease lapsed
        // must not delete its successor's.
        fence.check()?;
        match stream.delete_consumer(&name).await {
            Ok(_) => {}
            Err(e)
                if matches!(e.kind(), ConsumerErrorKind::JetStream(ref j)
                    if j.error_code() == jetstream::ErrorCode::CONSUMER_NOT_FOUND) => {}
            Err(e) => {
                return Err(WorkerError::nats(
                    format!("delete the old consumer {name}"),
                    e,
                ));
            }
        }
        // What the stream held once the old consumer was gone: a previous
        // owner may have stored any of it without acking it, so its
        // idempotency keys are looked up (`Batch::redelivered`).
        let held_through = stream
            .info()
            .await
            .map_err(|e| WorkerError::nats(format!("stream {stream_name}"), e))?
            .state
            .last_sequence;
        fence.check()?;
        let mut config = writer_consumer(partition)?;
        if let Some(floor) = acked_floor {
            config.deliver_policy = DeliverPolicy::ByStartSequence {
                start_sequence: floor + 1,
            };
        }
        let mut consumer: PullConsumer = stream
            .create_consumer_strict(config)
            .await
            .map_err(|e| WorkerError::nats(format!("create consumer {name}"), e))?;
        co_locate(ctx, &stream, &mut consumer, partition).await;
        let messages = consumer
            .stream()
            .max_messages_per_batch(ctx.config.max_batch)
            // Idle heartbeats every second: silence means the consumer
            // lost its leader with a NATS node (`checks.rs`).
            .heartbeat(CONSUMER_HEARTBEAT)
            .expires(Duration::from_secs(30))
            .messages()
            .await
            .map_err(|e| WorkerError::nats(format!("consume {name}"), e))?;
        let chunks = fenced(messages, fence.clone()).ready_chunks(ctx.config.max_batch);
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Ok(Self {
            partition,
            name,
            stream,
            consumer,
            held_through,
            // What the old consumer acked is handled: purged at the first
            // tick, whether or not anything new comes.
            acked: Acked {
                through: Arc::new(AtomicU64::new(acked_floor.unwrap_or(0))),
                ..Acked::default()
            },
            chunks: Box::pin(chunks),
            checks: DeliveryChecks::new(Instant::now(), switchboard_nats::connection_epoch()),
            tick,
            fence,
        })
    }

    /// The next batch, in stream order; `None` once `stop` turns true.
    /// Fails when the writer must start over (`checks.rs`), or its lease
    /// is no longer valid.
    pub(super) async fn next_batch(
        &mut self,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<Option<Batch>, WorkerError> {
        loop {
            let chunk = tokio::select! {
                _ = stop.changed() => return Ok(None),
                chunk = self.chunks.next() => chunk,
                _ = self.tick.tick() => {
                    self.fence.check()?;
                    self.purge_if_due();
                    let tick = Event::Tick {
                        now: Instant::now(),
                        epoch: switchboard_nats::connection_epoch(),
                    };
                    let answer = match self.checks.on(tick) {
                        Verdict::Count => Event::Counted {
                            delivered: self.delivered().await,
                            now: Instant::now(),
                        },
                        Verdict::Locate => {
                            let (stream, consumer) = self.leaders().await;
                            Event::Located { stream, consumer }
                        }
                        verdict => {
                            self.act(verdict)?;
                            continue;
                        }
                    };
                    let verdict = self.checks.on(answer);
                    self.act(verdict)?;
                    continue;
                }
            };
            let Some(chunk) = chunk else {
                // The fenced stream ends when the lease lapses.
                self.fence.check()?;
                return Err(WorkerError::StartOver(format!(
                    "consumer {} ended",
                    self.name
                )));
            };
            let mut messages = Vec::with_capacity(chunk.len());
            for item in chunk {
                match item {
                    Ok(m) => {
                        if let Ok(info) = m.info() {
                            let seq = info.consumer_sequence;
                            let verdict = self.checks.on(Event::Delivered { consumer_seq: seq });
                            self.act(verdict)?;
                        }
                        messages.push(m);
                    }
                    Err(e) => match self.checks.on(Event::Failed(e.kind())) {
                        Verdict::StartOver(_) => {
                            return Err(WorkerError::nats(format!("consumer {}", self.name), e));
                        }
                        _ => {
                            tracing::warn!(partition = self.partition, error = %e, "writer consumer hiccup");
                        }
                    },
                }
            }
            return Ok(Some(take(messages, self.partition, self.held_through)));
        }
    }

    /// The ack of all of `batch`, for the feed task to send once its
    /// index changes are stored.
    pub(super) fn batch_ack(&self, batch: &Batch) -> Option<BatchAck> {
        let (seq, message) = batch.last.clone()?;
        Some(BatchAck {
            message,
            seq,
            acked_through: self.acked.through.clone(),
        })
    }

    /// Removes the acked commands from the stream, now and then: one
    /// purge below the ack floor costs the stream far less than removing
    /// each command as it is acked (the work queue this stream was),
    /// which emptied and recreated its message block at every ack. The
    /// purge runs beside the writer, which does not wait for it.
    fn purge_if_due(&mut self) {
        let now = Instant::now();
        let through = self.acked.through.load(Ordering::Relaxed);
        let purged_below = self.acked.purged_below.load(Ordering::Relaxed);
        if through == 0
            || through < purged_below
            || self
                .acked
                .purged_at
                .is_some_and(|at| now < at + PURGE_EVERY)
            || !self.fence.holds()
        {
            return;
        }
        self.acked.purged_at = Some(now);
        let below = through + 1;
        let (stream, partition) = (self.stream.clone(), self.partition);
        let purged = self.acked.purged_below.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(ASK, stream.purge().sequence(below)).await {
                Ok(Ok(_)) => {
                    purged.fetch_max(below, Ordering::Relaxed);
                }
                Ok(Err(e)) => {
                    tracing::warn!(partition, error = %e, "purging acked commands failed; tried again later")
                }
                Err(_) => {
                    tracing::warn!(
                        partition,
                        "purging acked commands timed out; tried again later"
                    )
                }
            }
        });
    }

    fn act(&self, verdict: Verdict) -> Result<(), WorkerError> {
        match verdict {
            Verdict::StartOver(reason) => Err(WorkerError::StartOver(format!(
                "consumer {} {reason}; starting over",
                self.name
            ))),
            Verdict::Hiccup => {
                tracing::warn!(partition = self.partition, "writer consumer hiccup");
                Ok(())
            }
            Verdict::GoOn | Verdict::Count | Verdict::Locate => Ok(()),
        }
    }

    /// How many the consumer says it handed out; `None` without an answer.
    async fn delivered(&mut self) -> Option<u64> {
        let info = tokio::time::timeout(ASK, self.consumer.info()).await;
        Some(info.ok()?.ok()?.delivered.consumer_sequence)
    }

    /// Who leads the stream and the consumer, as far as they answer.
    async fn leaders(&mut self) -> (Option<Group>, Option<Group>) {
        let stream = match tokio::time::timeout(ASK, self.stream.info()).await {
            Ok(Ok(info)) => info.cluster.as_ref().map(Group::from),
            _ => None,
        };
        let consumer = match tokio::time::timeout(ASK, self.consumer.info()).await {
            Ok(Ok(info)) => info.cluster.as_ref().map(Group::from),
            _ => None,
        };
        (stream, consumer)
    }
}

/// The consumer's messages, polled only while the lease is valid: a
/// writer stopped past its lease (SIGSTOP) ends at its first poll after,
/// before the message stream would pull again, on a consumer name that
/// its successor's consumer now has.
fn fenced(
    mut messages: jetstream::consumer::pull::Stream,
    fence: Fence,
) -> impl Stream<Item = Result<jetstream::Message, MessagesError>> + Send {
    futures::stream::poll_fn(move |cx| {
        if !fence.holds() {
            return Poll::Ready(None);
        }
        messages.poll_next_unpin(cx)
    })
}

/// A batch of messages as commands, in stream order, and where each came
/// from: a message of several sends (`Sb-Commands`) gives each of its
/// lines. A command that does not decode is not from a Switchboard
/// gateway and nothing can be done with it: it is acked with its message
/// and only logged.
fn take(messages: Vec<jetstream::Message>, partition: u16, held_through: u64) -> Batch {
    let (archive_requests, messages): (Vec<_>, Vec<_>) =
        messages.into_iter().partition(archive::is_request);
    let mut commands = Vec::with_capacity(messages.len());
    let mut origins = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let header = |name: &str| {
            m.headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.as_str())
        };
        let several = header(HEADER_COMMANDS).is_some();
        let lines: Vec<(Bytes, Origin)> = if several {
            command_lines(&m.payload)
                .map(|line| (line.clone(), Origin::Line(line)))
                .collect()
        } else {
            vec![(m.payload.clone(), Origin::Alone(i))]
        };
        for (line, (encoded, origin)) in lines.into_iter().enumerate() {
            match Command::decode(&encoded) {
                Ok(command) => {
                    let traceparent = if several {
                        header(trace::HEADER_TRACEPARENTS).and_then(|all| trace::nth(all, line))
                    } else {
                        header(trace::HEADER_TRACEPARENT)
                    };
                    commands.push(Incoming {
                        span: write_span(&command, partition, traceparent),
                        command,
                        // Only a command alone can be a REST command.
                        reply_to: if several { None } else { reply_to(m) },
                    });
                    origins.push(origin);
                }
                Err(e) => {
                    tracing::error!(subject = %m.subject, error = %e, "dropping an undecodable command");
                }
            }
        }
    }
    if !messages.is_empty() {
        crate::metrics::batch_taken(commands.len());
    }
    if let Some(pending) = messages
        .last()
        .and_then(|m| m.info().ok())
        .map(|i| i.pending)
    {
        crate::metrics::consumer_lag(partition, pending);
    }
    let redelivered = messages.iter().any(|m| {
        m.info().map_or(true, |i| {
            i.delivered > 1 || i.stream_sequence <= held_through
        })
    });
    let last = messages
        .iter()
        .chain(&archive_requests)
        .filter_map(|m| Some((m.info().ok()?.stream_sequence, m)))
        .max_by_key(|(seq, _)| *seq)
        .map(|(seq, m)| (seq, m.clone()));
    Batch {
        partition,
        last,
        messages,
        commands,
        origins,
        redelivered,
        archive_requests,
    }
}

fn reply_to(m: &jetstream::Message) -> Option<String> {
    m.headers
        .as_ref()
        .and_then(|h| h.get(HEADER_REPLY))
        .map(|v| v.as_str().to_owned())
}

/// The span of a traced command at its writer: a child of the span that
/// published it, from its taking to its outcomes published and acked.
fn write_span(command: &Command, partition: u16, traceparent: Option<&str>) -> tracing::Span {
    let Some(traceparent) = traceparent.filter(|_| trace::enabled()) else {
        return tracing::Span::none();
    };
    let span = tracing::info_span!(
        target: trace::TARGET,
        parent: None,
        "write",
        otel.kind = "consumer",
        partition,
        tenant = %command.tenant(),
        conversation = %command.conversation_id(),
    );
    trace::follow(&span, traceparent);
    span
}

/// Moves a new consumer's leadership to the node that leads its stream,
/// before anything is pulled from it (a move later would leave the pull
/// behind and restart the writer). Together with the leader worker
/// spreading the streams' leaders (`balance.rs`), this spreads the
/// consumers too, and a node's loss touches only the partitions whose
/// stream it led. Best effort, and bounded: the writer starts anyway.
async fn co_locate(ctx: &Ctx, stream: &JsStream, consumer: &mut PullConsumer, partition: u16) {
    let group = |c: &Option<ClusterInfo>| c.as_ref().map(Group::from);
    let Some(target) = move_to(
        group(&stream.cached_info().cluster).as_ref(),
        group(&consumer.cached_info().cluster).as_ref(),
    ) else {
        return;
    };
    let subject = format!(
        "CONSUMER.LEADER.STEPDOWN.{}.{}",
        stream.cached_info().config.name,
        consumer.cached_info().name
    );
    let body = serde_json::json!({ "placement": { "preferred": target } });
    if let Err(e) = ctx
        .js
        .request::<_, _, serde_json::Value>(subject, &body)
        .await
    {
        tracing::debug!(partition, error = %e, "could not place the writer consumer");
        return;
    }
    let deadline = Instant::now() + ASK;
    while Instant::now() < deadline {
        if let Ok(info) = consumer.info().await
            && info.cluster.as_ref().and_then(|c| c.leader.as_ref()) == Some(&target)
        {
            tracing::debug!(partition, leader = %target, "writer consumer placed with its stream");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
