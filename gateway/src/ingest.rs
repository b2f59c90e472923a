//! Sends on their way to their partition's writer, several to one NATS
//! message when they queue up.
//!
//! Every JetStream message costs the same work whatever it carries: the
//! stream stores it, answers the pub-ack, hands it to the writer, takes
//! the writer's ack and removes it. So each partition has a queue of
//! sends and one task that publishes what waits in it:
//! - one send alone goes as before: on its conversation's subject, with
//!   its `Nats-Msg-Id`, so JetStream drops a retry inside the dedupe
//!   window;
//! - two or more go as one message of several commands (header
//!   `Sb-Commands`, on `sb.in.<partition>.batch`; at most
//!   `ingest_batch_max_sends` of them and `ingest_batch_max_bytes`),
//!   which the writer acks once; a retry inside it is recognised by its
//!   idempotency key in the store, and answered with the original.
//!
//! One publish per partition waits for its pub-ack at a time, and sends
//! queue behind it: a send that finds the partition idle goes at once,
//! and under load the messages grow instead of multiplying. With
//! `ingest_batch_max_sends = 1` batching is off: every send goes alone,
//! and publishes do not wait for each other's pub-acks (as before
//! batching). The queue is
//! not bounded by itself: each connection has at most
//! `max_inflight_sends` sends waiting for the backbone, so it holds at
//! most that many per connection.
//!
//! Order: a connection queues its sends in the order it reads them, each
//! partition's queue is published in order, and a message is published
//! only after the one before it was stored. A send that fails is answered
//! with an error, and the client sends it again, as before.
//!
//! Reconnects: when the connection to NATS breaks (its node died), the
//! pub-ack of a message in flight is lost with it. The message is
//! published again on the new connection at once rather than after the
//! JetStream timeout, so a partition's queue stalls only as long as the
//! reconnect (`publish_until_answered`).

use std::time::Instant;

use async_nats::HeaderMap;
use async_nats::jetstream;
use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use bytes::Bytes;
use switchboard_nats::commands::addressed_to;
use switchboard_nats::envelope::{Command, HEADER_COMMANDS, encode_commands};
use switchboard_nats::subject::ingest_batch;
use switchboard_nats::trace;
use switchboard_nats::{BackboneError, Cause, cause, connection_epoch, reconnected_since};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

/// How much one ingest message carries at most (`[gateway]`
/// `ingest_batch_max_sends` and `ingest_batch_max_bytes` in
/// `GatewayConfig`).
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    /// Sends; 1 sends each alone.
    pub sends: usize,
    /// Bytes of commands, newlines included; a send larger than this
    /// goes alone.
    pub bytes: usize,
}

/// What JetStream did with a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    /// Stored: its writer answers it.
    New,
    /// A retry JetStream dropped inside its dedupe window.
    Duplicate,
}

/// Why a send was not stored; the client sends it again.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum NotStored {
    #[error("backbone: {0}")]
    Publish(#[source] Cause),
    #[error("backbone did not store the message: {0}")]
    Unacked(#[source] Cause),
    #[error("the connection to NATS broke before the backbone answered")]
    Reconnected,
    #[error("the gateway is shutting down")]
    Closed,
}

/// How often a batch is published when NATS reconnects before its pub-ack
/// arrives, before its senders are told to retry.
const PUBLISH_ATTEMPTS: u32 = 3;

/// How long a copy waits for its original to be stored, and how often,
/// before its senders are told to retry (2 s in all).
const IN_PROCESS_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);
const IN_PROCESS_RETRIES: u32 = 40;

/// The backbone's answer a queued send waits for: its pub-ack (stored in
/// the ingest stream, not yet by a writer), or why it was not stored.
pub(crate) type PubAckWait = oneshot::Receiver<Result<Stored, NotStored>>;

struct Pending {
    command: Command,
    /// `command`, encoded.
    payload: Bytes,
    /// The trace context of its `send` span, when traced.
    traceparent: Option<String>,
    done: oneshot::Sender<Result<Stored, NotStored>>,
}

/// The gateway's send queues, one per partition.
pub struct Ingest {
    queues: Vec<mpsc::UnboundedSender<Pending>>,
}

impl Ingest {
    /// Starts one publishing task per partition; they end when this is
    /// dropped.
    pub fn start(js: &jetstream::Context, partitions: u16, limits: BatchLimits) -> Self {
        let queues = (0..partitions.max(1))
            .map(|partition| {
                let (tx, rx) = mpsc::unbounded_channel();
                let span = tracing::debug_span!("ingest", partition);
                tokio::spawn(publish_queued(js.clone(), partition, limits, rx).instrument(span));
                tx
            })
            .collect();
        Self { queues }
    }

    /// Queues a send for `partition`. Sends queued in order are stored in
    /// order; the wait resolves once JetStream has stored it, or could
    /// not. `traceparent` goes with it (`switchboard_nats::trace`).
    pub(crate) fn send(
        &self,
        partition: u16,
        command: Command,
        traceparent: Option<String>,
    ) -> Result<PubAckWait, BackboneError> {
        let payload = command.encode()?;
        let (done, pub_ack) = oneshot::channel();
        let pending = Pending {
            command,
            payload,
            traceparent,
            done,
        };
        crate::metrics::pending_acks(1.0);
        // A partition past the count, or a task gone, can only be a bug
        // or a shutdown: the wait then says `Closed`.
        let refused = match self.queues.get(usize::from(partition)) {
            Some(queue) => queue.send(pending).err().map(|e| e.0),
            None => Some(pending),
        };
        if let Some(pending) = refused {
            answer(vec![pending], &Err(NotStored::Closed));
        }
        Ok(pub_ack)
    }
}

/// Publishes a partition's queued sends until the queue closes.
async fn publish_queued(
    js: jetstream::Context,
    partition: u16,
    limits: BatchLimits,
    mut queue: mpsc::UnboundedReceiver<Pending>,
) {
    let mut carried: Option<Pending> = None;
    loop {
        let first = match carried.take() {
            Some(pending) => pending,
            None => match queue.recv().await {
                Some(pending) => pending,
                None => return,
            },
        };
        let batch = take_batch(first, &mut queue, &mut carried, limits);
        let started = Instant::now();
        if limits.sends == 1 {
            // Batching off: every send alone, and none waits for the
            // pub-ack of the one before it (it was issued first on the
            // same connection, so it is stored first). A reconnect answers
            // at once, and the client's retry keeps its order.
            let epoch = connection_epoch();
            match publish(&js, partition, &batch).await {
                Ok(stored) => {
                    tokio::spawn(async move {
                        let result = tokio::select! {
                            ack = stored => stored_as(ack),
                            () = reconnected_since(epoch) => Err(NotStored::Reconnected),
                        };
                        crate::metrics::published(started.elapsed());
                        answer(batch, &result);
                    });
                }
                Err(e) => answer(batch, &Err(e)),
            }
            continue;
        }
        let result = publish_until_answered(&js, partition, &batch).await;
        crate::metrics::published(started.elapsed());
        tracing::trace!(sends = batch.len(), elapsed = ?started.elapsed(), ok = result.is_ok(), "published");
        answer(batch, &result);
    }
}

/// Publishes `batch` and waits for its pub-ack.
///
/// A pub-ack due on a connection that broke never arrives, and the
/// partition's queue would wait out the JetStream timeout behind it: the
/// batch is published again on the new connection instead, still ahead of
/// everything queued behind it. JetStream drops a lone send's copy by its
/// `Nats-Msg-Id`; the writer answers a batch's copy from its idempotency
/// keys. A copy that finds its original still being stored is published
/// again a moment later, until JetStream says which it was.
async fn publish_until_answered(
    js: &jetstream::Context,
    partition: u16,
    batch: &[Pending],
) -> Result<Stored, NotStored> {
    let (mut reconnects, mut in_process) = (0, 0);
    loop {
        let epoch = connection_epoch();
        let stored = publish(js, partition, batch).await?;
        let ack = tokio::select! {
            ack = stored => ack,
            () = reconnected_since(epoch) => {
                reconnects += 1;
                tracing::debug!(sends = batch.len(), reconnects, "NATS reconnected before the pub-ack");
                if reconnects == PUBLISH_ATTEMPTS {
                    return Err(NotStored::Reconnected);
                }
                continue;
            }
        };
        match ack {
            Err(e) if original_in_process(&e) && in_process < IN_PROCESS_RETRIES => {
                in_process += 1;
                tokio::time::sleep(IN_PROCESS_PAUSE).await;
            }
            ack => return stored_as(ack),
        }
    }
}

/// Whether JetStream refused a copy because it is still storing the
/// original with the same `Nats-Msg-Id` (10158): the original's fate is
/// not known yet.
fn original_in_process(e: &jetstream::context::PublishError) -> bool {
    std::error::Error::source(e)
        .and_then(|source| source.downcast_ref::<jetstream::Error>())
        .is_some_and(|e| e.error_code() == jetstream::ErrorCode::STREAM_DUPLICATE_MESSAGE_CONFLICT)
}

fn answer(batch: Vec<Pending>, result: &Result<Stored, NotStored>) {
    crate::metrics::pending_acks(-(batch.len() as f64));
    for pending in batch {
        let _ = pending.done.send(result.clone());
    }
}

fn stored_as(
    ack: Result<jetstream::publish::PublishAck, jetstream::context::PublishError>,
) -> Result<Stored, NotStored> {
    match ack {
        Ok(ack) if ack.duplicate => Ok(Stored::Duplicate),
        Ok(_) => Ok(Stored::New),
        Err(e) => Err(NotStored::Unacked(cause(e))),
    }
}

/// `first` and what waits behind it, within `limits`; a send that would
/// pass the byte limit is left in `carried`, to start the next message.
fn take_batch(
    first: Pending,
    queue: &mut mpsc::UnboundedReceiver<Pending>,
    carried: &mut Option<Pending>,
    limits: BatchLimits,
) -> Vec<Pending> {
    let mut bytes = first.payload.len();
    let mut batch = vec![first];
    while batch.len() < limits.sends {
        let Ok(pending) = queue.try_recv() else { break };
        // +1: the newline between two commands.
        if bytes + 1 + pending.payload.len() > limits.bytes {
            *carried = Some(pending);
            break;
        }
        bytes += 1 + pending.payload.len();
        batch.push(pending);
    }
    batch
}

/// Publishes `batch` as one message; the future resolves once JetStream
/// has stored it.
async fn publish(
    js: &jetstream::Context,
    partition: u16,
    batch: &[Pending],
) -> Result<PublishAckFuture, NotStored> {
    let (subject, headers, payload) = match batch {
        [one] => {
            let (subject, headers) =
                addressed_to(partition, &one.command, one.traceparent.as_deref());
            (subject, headers, one.payload.clone())
        }
        several => {
            let mut headers = HeaderMap::new();
            headers.insert(HEADER_COMMANDS, several.len().to_string().as_str());
            if let Some(joined) = trace::join(several.iter().map(|p| p.traceparent.as_deref())) {
                headers.insert(trace::HEADER_TRACEPARENTS, joined.as_str());
            }
            let payload = encode_commands(several.iter().map(|p| &p.payload));
            (ingest_batch(partition), headers, payload)
        }
    };
    let message = PublishMessage::build().payload(payload).headers(headers);
    js.send_publish(subject, message)
        .await
        .map_err(|e| NotStored::Publish(cause(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_nats::envelope::SendCommand;
    use switchboard_protocol::{
        ClientMsgId, Content, ConversationId, DeviceId, TenantId, Timestamp, UserId,
    };

    /// A queued send whose encoding takes `bytes` (the limits count the
    /// payload, not the command it came from).
    fn pending(bytes: usize) -> Pending {
        let command = Command::Send(SendCommand {
            tenant: TenantId::new("t").unwrap(),
            conversation_id: ConversationId::new("c").unwrap(),
            sender: UserId::new("u").unwrap(),
            device: DeviceId::new("d").unwrap(),
            client_msg_id: ClientMsgId::new("m").unwrap(),
            content: Content::Text { text: "x".into() },
            received_at: Timestamp::from_unix_ms(1),
            options: Default::default(),
        });
        let (done, _) = oneshot::channel();
        Pending {
            command,
            payload: Bytes::from(vec![b'x'; bytes]),
            traceparent: None,
            done,
        }
    }

    const LIMITS: BatchLimits = BatchLimits {
        sends: 64,
        bytes: 256 * 1024,
    };

    fn queue_of(
        sizes: impl IntoIterator<Item = usize>,
    ) -> (Pending, mpsc::UnboundedReceiver<Pending>) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        for bytes in sizes {
            tx.send(pending(bytes)).unwrap();
        }
        let first = rx.try_recv().unwrap();
        (first, rx)
    }

    #[test]
    fn a_message_carries_at_most_the_sends_limit() {
        let (first, mut rx) = queue_of(std::iter::repeat_n(10, LIMITS.sends + 1));
        let mut carried = None;
        let batch = take_batch(first, &mut rx, &mut carried, LIMITS);
        assert_eq!(batch.len(), LIMITS.sends);
        assert!(carried.is_none());
        // The one past the limit waits for the next message.
        assert_eq!(rx.try_recv().map(|p| p.payload.len()).ok(), Some(10));
    }

    #[test]
    fn a_message_carries_at_most_the_bytes_limit_newlines_included() {
        // Two sends that fill the limit exactly with the newline between.
        let half = (LIMITS.bytes - 1) / 2;
        let rest = LIMITS.bytes - 1 - half;
        let (first, mut rx) = queue_of([half, rest, 1]);
        let mut carried = None;
        let batch = take_batch(first, &mut rx, &mut carried, LIMITS);
        assert_eq!(batch.len(), 2, "at the limit");
        // One byte more would pass it: carried to the next message.
        assert_eq!(carried.map(|p| p.payload.len()), Some(1));

        let (first, mut rx) = queue_of([half, rest + 1]);
        let mut carried = None;
        let batch = take_batch(first, &mut rx, &mut carried, LIMITS);
        assert_eq!(batch.len(), 1, "one byte past the limit");
        assert_eq!(carried.map(|p| p.payload.len()), Some(rest + 1));
    }

    #[test]
    fn one_send_per_message_when_the_sends_limit_is_one() {
        let (first, mut rx) = queue_of([10, 10]);
        let mut carried = None;
        let one = BatchLimits { sends: 1, ..LIMITS };
        assert_eq!(take_batch(first, &mut rx, &mut carried, one).len(), 1);
        assert!(carried.is_none());
    }

    #[test]
    fn a_send_larger_than_the_bytes_limit_goes_alone() {
        let (first, mut rx) = queue_of([LIMITS.bytes + 1, 10]);
        let mut carried = None;
        let batch = take_batch(first, &mut rx, &mut carried, LIMITS);
        assert_eq!(batch.len(), 1);
        assert_eq!(carried.map(|p| p.payload.len()), Some(10));
    }
}
