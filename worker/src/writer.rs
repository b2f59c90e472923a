//! One partition's writer task: consume the partition's commands in
//! stream order, sequence them, commit them in one store commit, publish
//! the outcomes, and only then ack them on JetStream.
//!
//! Order of effects per batch, and why:
//! 1. commit to the store (durable): the point after which a send is acked;
//! 2. publish `ack`s, fan-out and replies (core NATS, at most once; a lost
//!    event is recovered by the client's retry or `pull_backlog`);
//! 3. ack every command of the batch on JetStream (work-queue streams take
//!    explicit acks only), which removes them from the stream: a crash
//!    before this redelivers the batch, which the idempotency keys turn
//!    into repeats of the same answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream;
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::stream::ConsumerErrorKind;
use bytes::Bytes;
use futures::StreamExt;
use switchboard_backbone::cause;
use switchboard_backbone::definitions::{
    ingest_stream_name, writer_consumer, writer_consumer_name,
};
use switchboard_backbone::envelope::{
    Command, CommandReply, HEADER_COMMANDS, HEADER_REPLY, Rejection, ack_event, command_lines,
    frame_event, is_acked, listen_event, message_event, rejection_event,
};
use switchboard_backbone::push_jobs::{MessageJob, message_subject};
use switchboard_backbone::records::refusals::{Refusal, SendKey};
use switchboard_backbone::subject::{conversation_events, ingest};
use switchboard_backbone::trace;
use switchboard_protocol::frames::request_type;
use switchboard_protocol::{
    Content, ConversationId, ErrorCode, Message, ServerFrame, TenantId, UserId,
};
use switchboard_store::StoreError;
use tokio::sync::watch;
use tracing::Instrument;

use crate::policy::Policies;
use crate::sequencer::{Incoming, Outcome, Route, SequenceError, Sequencer};
use crate::{Ctx, WorkerError, archive};

/// How often an idle writer consumer proves it is alive; two missed
/// restart the writer.
const CONSUMER_HEARTBEAT: Duration = Duration::from_secs(1);

/// How often a writer checks that its consumer is led by the node that
/// leads its stream.
const PLACEMENT_EVERY: Duration = Duration::from_secs(5);

/// A writer younger than this does not start over to move its consumer,
/// so a placement that keeps failing costs one restart per this long at
/// most.
const PLACEMENT_GRACE: Duration = Duration::from_secs(10);

/// Runs until `stop` turns true, the lease stops being valid, or the
/// consumer fails (the owner then restarts the task).
pub(crate) async fn run_partition(
    ctx: Arc<Ctx>,
    partition: u16,
    valid_until: watch::Receiver<Instant>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), WorkerError> {
    let stream_name = ingest_stream_name(partition);
    let mut stream = ctx
        .js
        .get_stream(&stream_name)
        .await
        .map_err(|e| WorkerError::nats(format!("get stream {stream_name}"), e))?;
    // A fresh consumer for every new owner: it starts at the first
    // unacked command, in stream order. Reusing the old one would deliver
    // new commands before the old owner's unacked ones came back after
    // `ack_wait`, and break each sender's order.
    //
    // Fresh for certain: if the old one could not be deleted (the request
    // timed out in a leader election), a plain create would hand it back
    // with its delivered-but-unacked commands, which come back only after
    // `ack_wait`, behind newer ones. So a delete that did not happen, or a
    // create that finds a consumer, fails the start and it is tried again.
    let name = writer_consumer_name(partition);
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
    let consumer: PullConsumer = stream
        .create_consumer_strict(writer_consumer(partition)?)
        .await
        .map_err(|e| WorkerError::nats(format!("create consumer {name}"), e))?;
    let mut consumer = consumer;
    co_locate(&ctx, &stream, &mut consumer, partition).await;
    let messages = consumer
        .stream()
        .max_messages_per_batch(ctx.config.max_batch)
        // Idle heartbeats every second: silence means the consumer lost
        // its leader with a NATS node (see below).
        .heartbeat(CONSUMER_HEARTBEAT)
        .expires(Duration::from_secs(30))
        .messages()
        .await
        .map_err(|e| WorkerError::nats(format!("consume {name}"), e))?;
    let mut chunks = messages.ready_chunks(ctx.config.max_batch);
    let mut sequencer = Sequencer::new(
        ctx.config.cache_limit,
        Policies {
            edit: ctx.config.edit_policy,
            fanout: ctx.config.fanout,
            consent: ctx.config.consent,
            plugins: ctx.plugins.clone(),
            tenants: ctx.tenants.clone(),
        },
    );
    tracing::info!(partition, "writer started");
    // A delivery lost in flight (a broken connection, a consumer leader
    // gone) still counts as handed out: it would come back only after
    // `ack_wait`, behind newer commands. Deliveries carry consecutive
    // consumer sequences, so a gap shows the loss, and the writer starts
    // over with a fresh consumer before it commits anything past the gap.
    // After a reconnect with nothing arriving, the consumer is asked what
    // it handed out, so that a loss with nothing behind it is not left to
    // `ack_wait` either. Only then a fresh consumer: it needs the
    // JetStream meta leader, which may have died with the same node.
    let mut epoch = switchboard_backbone::connection_epoch();
    let mut reconnect_check = tokio::time::interval(Duration::from_millis(250));
    // The consumer sequence of the last command received.
    let mut received: u64 = 0;
    // Since when a reconnect waits to be shown harmless.
    let mut unverified: Option<Instant> = None;
    // The balancer (`balance.rs`) moves stream leaders but not consumers:
    // a consumer left on another node doubles the partition's exposure to
    // one node's loss, and after a rolling restart the consumers pile up
    // on the nodes that stayed up, so losing one stalls every partition.
    // A writer whose consumer is led apart from its stream starts over
    // between batches (nothing is in flight then), and the new consumer is
    // placed with the stream (`co_locate`).
    let started = Instant::now();
    let mut placement_check = tokio::time::interval_at(
        tokio::time::Instant::now() + PLACEMENT_EVERY,
        PLACEMENT_EVERY,
    );
    placement_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let chunk = tokio::select! {
            _ = stop.changed() => break,
            chunk = chunks.next() => chunk,
            _ = placement_check.tick(), if started.elapsed() >= PLACEMENT_GRACE => {
                if let Some((stream_leader, consumer_leader)) =
                    led_apart(&mut stream, &mut consumer).await
                {
                    return Err(WorkerError::StartOver(format!(
                        "consumer {name} is led by {consumer_leader}, its stream by \
                         {stream_leader}; starting over to place it with the stream"
                    )));
                }
                continue;
            }
            _ = reconnect_check.tick() => {
                let now = switchboard_backbone::connection_epoch();
                if now != epoch {
                    epoch = now;
                    unverified.get_or_insert_with(Instant::now);
                }
                if unverified.is_some_and(|since| since.elapsed() >= Duration::from_secs(1)) {
                    let info = tokio::time::timeout(Duration::from_secs(2), consumer.info()).await;
                    match info {
                        Ok(Ok(info)) if info.delivered.consumer_sequence > received => {
                            return Err(WorkerError::StartOver(format!(
                                "reconnected to NATS with deliveries of {name} lost; starting over"
                            )));
                        }
                        Ok(Ok(_)) => unverified = None,
                        // No answer (a leader election): keep going. The
                        // gap check below still stops anything newer from
                        // passing a lost delivery.
                        _ => unverified = Some(Instant::now()),
                    }
                }
                continue;
            }
        };
        let Some(chunk) = chunk else {
            return Err(WorkerError::StartOver(format!("consumer {name} ended")));
        };
        let mut batch = Vec::with_capacity(chunk.len());
        for item in chunk {
            match item {
                Ok(m) => {
                    if let Ok(info) = m.info() {
                        let seq = info.consumer_sequence;
                        if seq > received + 1 {
                            return Err(WorkerError::StartOver(format!(
                                "consumer {name} skipped deliveries {}..{seq}; starting over",
                                received + 1
                            )));
                        }
                        received = received.max(seq);
                        unverified = None;
                    }
                    batch.push(m);
                }
                Err(e) => {
                    use jetstream::consumer::pull::MessagesErrorKind as K;
                    match e.kind() {
                        // A pull request that could not be sent (a
                        // reconnect): the stream sends it again.
                        K::Pull => {
                            tracing::warn!(partition, error = %e, "writer consumer hiccup");
                        }
                        // Silence for two heartbeats: the consumer's leader
                        // changed (its NATS node died, or it was moved), and
                        // the pull request it held is gone with it; the
                        // client does not send another by itself. A new pull
                        // on the same consumer could get commands before
                        // older ones the old leader had handed out (they
                        // come back only after `ack_wait`), so the writer
                        // restarts instead and makes a fresh consumer, which
                        // starts at the first unacked command.
                        _ => return Err(WorkerError::nats(format!("consumer {name}"), e)),
                    }
                }
            }
        }
        // Archive requests run after the batch's commands, never between
        // a command's read and its commit.
        let (requests, batch): (Vec<_>, Vec<_>) = batch.into_iter().partition(archive::is_request);
        if !batch.is_empty() {
            let span = tracing::info_span!("batch", partition, size = batch.len());
            process_batch(&ctx, &mut sequencer, partition, &batch, &valid_until)
                .instrument(span)
                .await?;
        }
        if !requests.is_empty() {
            if !lease_valid(&valid_until) {
                return Err(WorkerError::LeaseLost);
            }
            archive::serve_requests(&ctx, &requests, || lease_valid(&valid_until)).await;
        }
        if *stop.borrow() {
            break;
        }
    }
    tracing::info!(partition, "writer stopped");
    Ok(())
}

/// The nodes leading the stream and the consumer when they differ and the
/// consumer can be placed with the stream (every replica of the stream is
/// current); `None` when they agree or the cluster cannot tell now.
async fn led_apart(
    stream: &mut jetstream::stream::Stream,
    consumer: &mut PullConsumer,
) -> Option<(String, String)> {
    let ask = Duration::from_secs(2);
    let stream_cluster = tokio::time::timeout(ask, stream.info())
        .await
        .ok()?
        .ok()?
        .cluster
        .clone()?;
    let consumer_cluster = tokio::time::timeout(ask, consumer.info())
        .await
        .ok()?
        .ok()?
        .cluster
        .clone()?;
    apart(&stream_cluster, &consumer_cluster)
}

/// See [`led_apart`].
fn apart(
    stream: &jetstream::stream::ClusterInfo,
    consumer: &jetstream::stream::ClusterInfo,
) -> Option<(String, String)> {
    let (s, c) = (stream.leader.as_ref()?, consumer.leader.as_ref()?);
    if s == c || stream.replicas.iter().any(|r| !r.current || r.offline) {
        return None;
    }
    Some((s.clone(), c.clone()))
}

/// Moves a new consumer's leadership to the node that leads its stream,
/// before anything is pulled from it (a move later would leave the pull
/// behind and restart the writer). Together with the leader worker
/// spreading the streams' leaders (`balance.rs`), this spreads the
/// consumers too, and a node's loss touches only the partitions whose
/// stream it led. Best effort, and bounded: the writer starts anyway.
async fn co_locate(
    ctx: &Ctx,
    stream: &jetstream::stream::Stream,
    consumer: &mut PullConsumer,
    partition: u16,
) {
    let leader_of = |cluster: &Option<jetstream::stream::ClusterInfo>| {
        cluster.as_ref().and_then(|c| c.leader.clone())
    };
    let Some(target) = leader_of(&stream.cached_info().cluster) else {
        return; // one server: nothing to place
    };
    if leader_of(&consumer.cached_info().cluster).as_ref() == Some(&target) {
        return;
    }
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
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if let Ok(info) = consumer.info().await
            && leader_of(&info.cluster).as_ref() == Some(&target)
        {
            tracing::debug!(partition, leader = %target, "writer consumer placed with its stream");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn lease_valid(valid_until: &watch::Receiver<Instant>) -> bool {
    Instant::now() < *valid_until.borrow()
}

/// Attempts of a batch that fails the same way, with an error retrying
/// cannot fix, before its commands are applied one at a time; a command
/// that still fails alone is parked.
const POISON_ATTEMPTS: u32 = 3;

/// How long a transient failure (the store or the id source unavailable)
/// may go on before each retry is logged as an error (an alert): the
/// partition is stalled, by design, until the store is back.
const STALL_ALERT_AFTER: Duration = Duration::from_secs(30);

/// How a batch ended.
enum Applied {
    Done,
    /// It failed `POISON_ATTEMPTS` times with a non-transient error.
    Poisoned(SequenceError),
}

/// Failures that go away by themselves: waiting is right, and order is
/// kept by waiting. Anything else (corrupt data, an answer the store
/// cannot give) fails the same way every time.
fn transient(e: &SequenceError) -> bool {
    matches!(
        e,
        SequenceError::Store(StoreError::Unavailable(_)) | SequenceError::Ids(_)
    )
}

/// Where a command of a batch came from: what setting it aside needs.
enum Origin {
    /// A message of its own: its index in the batch.
    Alone(usize),
    /// A line of a message of several.
    Line(Bytes),
}

/// The commands of a batch's messages, in stream order, and where each
/// came from: a message of several sends (`Sb-Commands`) gives each of
/// its lines. A command that does not decode is not from a Switchboard
/// gateway and nothing can be done with it: it is acked with its message
/// and only logged.
fn receive(batch: &[jetstream::Message], partition: u16) -> (Vec<Incoming>, Vec<Origin>) {
    let mut incoming = Vec::with_capacity(batch.len());
    let mut origins = Vec::with_capacity(batch.len());
    for (i, m) in batch.iter().enumerate() {
        let header = |name: &str| {
            m.headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.as_str())
        };
        let several = header(HEADER_COMMANDS).is_some();
        let commands: Vec<(Bytes, Origin)> = if several {
            command_lines(&m.payload)
                .map(|line| (line.clone(), Origin::Line(line)))
                .collect()
        } else {
            vec![(m.payload.clone(), Origin::Alone(i))]
        };
        for (line, (encoded, origin)) in commands.into_iter().enumerate() {
            match Command::decode(&encoded) {
                Ok(command) => {
                    let traceparent = if several {
                        header(trace::HEADER_TRACEPARENTS).and_then(|all| trace::nth(all, line))
                    } else {
                        header(trace::HEADER_TRACEPARENT)
                    };
                    incoming.push(Incoming {
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
    (incoming, origins)
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

/// Applies a batch, then acks its messages. The commands are applied in
/// parts of at most `max_batch` (a message of several sends can make a
/// batch of many more commands than messages); the messages are acked
/// once every part is stored, so a crash in between redelivers them all,
/// and the idempotency keys make the stored parts repeats.
///
/// A part that keeps failing with an error retrying cannot fix is
/// applied again one command at a time, in order: the commands that
/// succeed are stored, and each one that fails alone is parked (`park`),
/// so one bad command costs its sender an error instead of stalling the
/// partition for everyone.
async fn process_batch(
    ctx: &Ctx,
    sequencer: &mut Sequencer,
    partition: u16,
    batch: &[jetstream::Message],
    valid_until: &watch::Receiver<Instant>,
) -> Result<(), WorkerError> {
    let (incoming, origins) = receive(batch, partition);
    crate::metrics::batch_taken(incoming.len());
    if let Some(pending) = batch.last().and_then(|m| m.info().ok()).map(|i| i.pending) {
        crate::metrics::consumer_lag(partition, pending);
    }
    // Redelivered commands may be applied already: look their keys up.
    let redelivered = batch
        .iter()
        .any(|m| m.info().map_or(true, |i| i.delivered > 1));
    let per_part = ctx.config.max_batch.max(1);
    for (part, origins) in incoming.chunks(per_part).zip(origins.chunks(per_part)) {
        let Applied::Poisoned(error) =
            apply_batch(ctx, sequencer, part, redelivered, valid_until).await?
        else {
            continue;
        };
        let parked = Parked { partition, batch };
        if let ([only], [origin]) = (part, origins) {
            parked.park(ctx, only, origin, &error).await?;
            continue;
        }
        tracing::warn!(%error, commands = part.len(), "a batch keeps failing; applying its commands one at a time");
        for (one, origin) in part.chunks(1).zip(origins) {
            if let Applied::Poisoned(error) =
                apply_batch(ctx, sequencer, one, redelivered, valid_until).await?
                && let [command] = one
            {
                parked.park(ctx, command, origin, &error).await?;
            }
        }
    }
    for m in batch {
        if let Err(e) = m.ack().await {
            tracing::warn!(error = %e, "acking a command failed; it will be redelivered");
        }
    }
    Ok(())
}

/// Plans and commits `incoming`, then publishes its outcomes.
async fn apply_batch(
    ctx: &Ctx,
    sequencer: &mut Sequencer,
    incoming: &[Incoming],
    redelivered: bool,
    valid_until: &watch::Receiver<Instant>,
) -> Result<Applied, WorkerError> {
    let mut check_sent = redelivered;
    let mut backoff = Duration::from_millis(20);
    let mut poisoned = 0;
    let failing_since = Instant::now();
    loop {
        if !lease_valid(valid_until) {
            return Err(WorkerError::LeaseLost);
        }
        let failure = match sequencer
            .plan(
                ctx.store.as_ref(),
                ctx.ids.as_ref(),
                incoming,
                check_sent,
                switchboard_protocol::Timestamp::now(),
            )
            .await
        {
            Ok(mut plan) => {
                // Self-fencing: never write after the lease may have expired.
                if !lease_valid(valid_until) {
                    return Err(WorkerError::LeaseLost);
                }
                let mutations = std::mem::take(&mut plan.mutations);
                let committed = if mutations.is_empty() {
                    Ok(())
                } else {
                    ctx.store.commit(mutations).await
                };
                match committed {
                    Ok(()) => {
                        sequencer.committed(&mut plan);
                        let traced = plan
                            .outcomes
                            .into_iter()
                            .zip(plan.caused_by)
                            .map(|(outcome, i)| {
                                let traceparent =
                                    incoming.get(i).and_then(|c| trace::traceparent(&c.span));
                                (outcome, traceparent)
                            })
                            .collect();
                        publish(ctx, traced).await;
                        return Ok(Applied::Done);
                    }
                    Err(e) => SequenceError::Store(e),
                }
            }
            Err(e) => e,
        };
        // The cache may disagree with the store (a refused append) or be
        // half-updated: start again from the store's state, and look the
        // batch's idempotency keys up this time.
        sequencer.forget();
        check_sent = true;
        match &failure {
            SequenceError::Store(StoreError::Conflict(why)) => {
                tracing::warn!(%why, "store refused the batch; reloading state");
                continue;
            }
            e if transient(e) => {
                if failing_since.elapsed() >= STALL_ALERT_AFTER {
                    tracing::error!(error = %e, stalled_for = ?failing_since.elapsed(), "the partition is stalled: the store or the id source is unavailable");
                } else {
                    tracing::warn!(error = %e, ?backoff, "batch failed; retrying");
                }
            }
            e => {
                poisoned += 1;
                if poisoned >= POISON_ATTEMPTS {
                    return Ok(Applied::Poisoned(failure));
                }
                tracing::warn!(error = %e, attempt = poisoned, "batch failed; retrying");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

fn reply_to(m: &jetstream::Message) -> Option<String> {
    m.headers
        .as_ref()
        .and_then(|h| h.get(HEADER_REPLY))
        .map(|v| v.as_str().to_owned())
}

/// What setting a command of a batch aside needs besides the command.
struct Parked<'a> {
    partition: u16,
    batch: &'a [jetstream::Message],
}

impl Parked<'_> {
    /// Sets a command that cannot be applied aside in `SB_PARKED`
    /// (durably, before its message is acked), under its own ingest
    /// subject, as a message of its own; tells its sender and raises an
    /// alert. The partition goes on with the next command. If it cannot
    /// be set aside, the writer starts over and tries again.
    async fn park(
        &self,
        ctx: &Ctx,
        command: &Incoming,
        origin: &Origin,
        error: &SequenceError,
    ) -> Result<(), WorkerError> {
        let (ingest_subject, payload) = match origin {
            Origin::Alone(i) => match self.batch.get(*i) {
                Some(m) => (m.subject.to_string(), m.payload.clone()),
                None => {
                    return Err(WorkerError::StartOver(
                        "a parked command's message is gone".into(),
                    ));
                }
            },
            Origin::Line(line) => (
                ingest(
                    self.partition,
                    command.command.tenant(),
                    command.command.conversation_id(),
                ),
                line.clone(),
            ),
        };
        let subject = switchboard_backbone::subject::parked(&ingest_subject);
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_PARKED_ERROR, error.to_string().as_str());
        if let Some(reply) = &command.reply_to {
            headers.insert(HEADER_REPLY, reply.as_str());
        }
        let stored = ctx
            .js
            .publish_with_headers(subject.clone(), headers, payload)
            .await
            .map_err(|e| WorkerError::nats("parking a command", e))?
            .await
            .map_err(|e| WorkerError::nats("parking a command", e))?;
        tracing::error!(
            %error,
            parked = %subject,
            stream_seq = stored.sequence,
            "a command could not be applied and was parked in SB_PARKED; its partition goes on"
        );
        let message = format!(
            "the server could not apply this request ({error}); it was set aside for the operator, do not resend it"
        );
        if let Some(answer) =
            parked_answer(command.command.clone(), command.reply_to.clone(), message)
        {
            publish(ctx, vec![(answer, trace::traceparent(&command.span))]).await;
        }
        Ok(())
    }
}

/// Keeps a refused send's answer for resends of it (`sb_refused`). Best
/// effort: without it, a resend waits for an answer that does not come,
/// as before, and the client's own timeout applies.
async fn remember_refusal(ctx: &Ctx, tenant: &TenantId, sender: &UserId, rejection: &Rejection) {
    let Some(client_msg_id) = &rejection.client_msg_id else {
        return;
    };
    let send = SendKey {
        tenant,
        conversation: &rejection.conversation_id,
        sender,
        client_msg_id,
    };
    let refusal = Refusal {
        code: rejection.code,
        message: rejection.message.clone(),
    };
    if let Err(e) = ctx.refusals.record(&send, &refusal).await {
        tracing::warn!(error = %e, "a refused send was not remembered; a resend of it gets no answer");
    }
}

/// Header of a parked command: why it could not be applied.
const HEADER_PARKED_ERROR: &str = "Sb-Parked-Error";

/// The error a parked command's sender gets: an `error` frame for a
/// WebSocket request, a refusal for a REST one.
fn parked_answer(command: Command, reply_to: Option<String>, message: String) -> Option<Outcome> {
    let code = ErrorCode::Internal;
    let rejection = |tenant, sender, device, request_type: &str, client_msg_id, conversation_id| {
        Outcome::Reject {
            tenant,
            sender,
            rejection: Rejection {
                device,
                request_type: request_type.to_owned(),
                client_msg_id,
                conversation_id,
                code,
                message: message.clone(),
            },
        }
    };
    let answer = match command {
        Command::Send(c) => rejection(
            c.tenant,
            c.sender,
            c.device,
            request_type::SEND_MESSAGE,
            Some(c.client_msg_id),
            c.conversation_id,
        ),
        Command::Edit(c) => rejection(
            c.tenant,
            c.actor,
            c.device,
            request_type::EDIT_MESSAGE,
            None,
            c.conversation_id,
        ),
        Command::Delete(c) => rejection(
            c.tenant,
            c.actor,
            c.device,
            request_type::DELETE_MESSAGE,
            None,
            c.conversation_id,
        ),
        Command::CreateConversation(_) | Command::AddMembers(_) | Command::RemoveMembers(_) => {
            Outcome::Reply {
                subject: reply_to?,
                reply: CommandReply::Refused {
                    code,
                    message: message.clone(),
                },
            }
        }
    };
    Some(answer)
}

/// Events of a batch on their way out, in the order they were made:
/// those for users gather per gateway (`Sessions::deliveries`); an event
/// on a conversation's subject, or a reply, first sends what has gathered.
struct Outbox<'a> {
    ctx: &'a Ctx,
    deliveries: switchboard_backbone::sessions::Deliveries<'a>,
}

impl<'a> Outbox<'a> {
    fn new(ctx: &'a Ctx) -> Self {
        Self {
            ctx,
            deliveries: ctx.sessions.deliveries(),
        }
    }

    async fn flush(&mut self) -> Result<(), async_nats::PublishError> {
        if self.deliveries.is_empty() {
            return Ok(());
        }
        std::mem::replace(&mut self.deliveries, self.ctx.sessions.deliveries())
            .publish()
            .await
    }

    /// A stored message or update for every recipient, or once on the
    /// conversation's subject (fan-out on read), counted.
    async fn fan_out(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        recipients: &[UserId],
        route: Route,
        event: (HeaderMap, Bytes),
    ) -> Result<(), async_nats::PublishError> {
        match route {
            Route::Users => crate::metrics::delivered("users", recipients.len()),
            Route::Conversation => crate::metrics::delivered("conversation", 1),
        }
        match route {
            Route::Users => {
                self.deliveries.add(tenant, recipients, &event);
                Ok(())
            }
            Route::Conversation => {
                self.flush().await?;
                let (headers, payload) = event;
                self.ctx
                    .client
                    .publish_with_headers(
                        conversation_events(tenant, conversation),
                        headers,
                        payload,
                    )
                    .await
            }
        }
    }
}

/// Hands a stored message to the push pipeline, for a tenant with pushes
/// (F15). Conversations that fan out on read push nothing: their members
/// have no inbox entries to tell what reached them. At most once: the
/// publish is not awaited for JetStream's ack, and a push is a courtesy,
/// never the message itself.
async fn push_job(ctx: &Ctx, tenant: &TenantId, message: &Message, recipients: &[UserId]) {
    if matches!(message.content, Some(Content::System(_)) | None)
        || ctx.tenants.get(tenant).is_none_or(|t| t.push.is_none())
    {
        return;
    }
    let job = MessageJob {
        tenant: tenant.clone(),
        conversation_id: message.conversation_id.clone(),
        message_id: message.message_id,
        seq: message.seq,
        sender: message.sender_id.clone(),
        recipients: recipients.to_vec(),
        stored_at: message.created_at,
    };
    let Ok(body) = serde_json::to_vec(&job) else {
        return;
    };
    if let Err(e) = ctx.js.publish(message_subject(tenant), body.into()).await {
        tracing::warn!(error = %e, "a push job was not published");
    }
}

/// Publishes a batch's outcomes, each event with the trace context of
/// the command it comes from, if traced.
async fn publish(ctx: &Ctx, outcomes: Vec<(Outcome, Option<String>)>) {
    let mut out = Outbox::new(ctx);
    for (outcome, traceparent) in outcomes {
        let traced = |mut event: (HeaderMap, Bytes)| {
            if let Some(t) = &traceparent {
                event.0.insert(trace::HEADER_TRACEPARENT, t.as_str());
            }
            event
        };
        let result = match outcome {
            Outcome::Deliver {
                tenant,
                message,
                recipients,
                route,
            } => {
                tracing::debug!(
                    %tenant,
                    conversation = %message.conversation_id,
                    seq = message.seq,
                    message_id = %message.message_id,
                    recipients = recipients.len(),
                    ?route,
                    "message stored; fanning out"
                );
                if route == Route::Users {
                    push_job(ctx, &tenant, &message, &recipients).await;
                }
                match message_event(&message).map(traced) {
                    Ok(event) => {
                        let fanned = out
                            .fan_out(&tenant, &message.conversation_id, &recipients, route, event)
                            .await
                            .map_err(cause);
                        // The sending device's `ack`, through the session
                        // registry whatever the conversation's route.
                        if is_acked(&message) {
                            let ack = traced(ack_event(&message));
                            out.deliveries.add(&tenant, [&message.sender_id], &ack);
                        }
                        fanned
                    }
                    Err(e) => Err(cause(e)),
                }
            }
            Outcome::Answer { tenant, message } => {
                let ack = traced(ack_event(&message));
                out.deliveries.add(&tenant, [&message.sender_id], &ack);
                Ok(())
            }
            Outcome::Update {
                tenant,
                message,
                recipients,
                route,
            } => {
                tracing::debug!(
                    %tenant,
                    conversation = %message.conversation_id,
                    seq = message.seq,
                    deleted = message.deleted_at.is_some(),
                    "message updated"
                );
                let conversation = message.conversation_id.clone();
                let event = traced(frame_event(&ServerFrame::MessageUpdated { message }));
                out.fan_out(&tenant, &conversation, &recipients, route, event)
                    .await
                    .map_err(cause)
            }
            Outcome::Listen {
                tenant,
                conversation_id,
                users,
                listen,
            } => match listen_event(&conversation_id, listen).map(traced) {
                Ok(event) => {
                    out.deliveries.add(&tenant, &users, &event);
                    Ok(())
                }
                Err(e) => Err(cause(e)),
            },
            Outcome::Reject {
                tenant,
                sender,
                rejection,
            } => {
                remember_refusal(ctx, &tenant, &sender, &rejection).await;
                match rejection_event(&rejection).map(traced) {
                    Ok(event) => {
                        out.deliveries.add(&tenant, [&sender], &event);
                        Ok(())
                    }
                    Err(e) => Err(cause(e)),
                }
            }
            Outcome::Reply { subject, reply } => match serde_json::to_vec(&reply) {
                Ok(body) => match out.flush().await {
                    Ok(()) => ctx
                        .client
                        .publish(subject, body.into())
                        .await
                        .map_err(cause),
                    Err(e) => Err(cause(e)),
                },
                Err(e) => Err(cause(e)),
            },
        };
        if let Err(e) = result {
            // Events are at most once; clients recover by retry and backlog.
            tracing::warn!(error = %e, "publishing an event failed");
        }
    }
    if let Err(e) = out.flush().await {
        tracing::warn!(error = %e, "publishing events failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_backbone::envelope::{MembersCommand, SendCommand};
    use switchboard_protocol::{ClientMsgId, DeviceId};

    fn send() -> Command {
        Command::Send(SendCommand {
            tenant: TenantId::new("acme").unwrap(),
            conversation_id: ConversationId::new("c:1").unwrap(),
            sender: UserId::new("alice").unwrap(),
            device: DeviceId::new("phone").unwrap(),
            client_msg_id: ClientMsgId::new("m1").unwrap(),
            content: Content::Text { text: "hi".into() },
            received_at: switchboard_protocol::Timestamp::from_unix_ms(1),
        })
    }

    #[test]
    fn a_consumer_led_apart_from_its_stream_is_moved_only_onto_a_current_group() {
        use jetstream::stream::{ClusterInfo, PeerInfo};
        let group = |leader: &str, current: bool| ClusterInfo {
            leader: Some(leader.into()),
            replicas: vec![PeerInfo {
                name: "n9".into(),
                current,
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            apart(&group("n1", true), &group("n3", true)),
            Some(("n1".into(), "n3".into()))
        );
        assert_eq!(apart(&group("n1", true), &group("n1", true)), None);
        // A stream replica catching up: the move could not land; wait.
        assert_eq!(apart(&group("n1", false), &group("n3", true)), None);
        // No leader known (an election): nothing to compare.
        assert_eq!(apart(&ClusterInfo::default(), &group("n3", true)), None);
    }

    #[test]
    fn only_an_unavailable_store_or_id_source_is_waited_out() {
        let unavailable = SequenceError::Store(StoreError::Unavailable("down".into()));
        assert!(transient(&unavailable));
        let corrupt = SequenceError::Store(StoreError::Corrupt("bad row".into()));
        assert!(!transient(&corrupt));
        let too_large = SequenceError::Store(StoreError::AnswerTooLarge { bytes: 2, max: 1 });
        assert!(!transient(&too_large));
    }

    #[test]
    fn a_parked_send_answers_its_device_and_a_parked_rest_command_its_caller() {
        match parked_answer(send(), None, "set aside".into()) {
            Some(Outcome::Reject {
                sender, rejection, ..
            }) => {
                assert_eq!(sender.as_str(), "alice");
                assert_eq!(rejection.device.as_str(), "phone");
                assert_eq!(rejection.request_type, "send_message");
                assert_eq!(
                    rejection.client_msg_id.as_ref().map(|c| c.as_str()),
                    Some("m1")
                );
                assert_eq!(rejection.code, ErrorCode::Internal);
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        let add = Command::AddMembers(MembersCommand {
            command_id: switchboard_protocol::MessageId::from_u64(7),
            tenant: TenantId::new("acme").unwrap(),
            conversation_id: ConversationId::new("c:1").unwrap(),
            users: vec![UserId::new("bob").unwrap()],
            actor: UserId::new("alice").unwrap(),
            device: DeviceId::new("phone").unwrap(),
            actor_is_admin: false,
            at: switchboard_protocol::Timestamp::from_unix_ms(1),
        });
        match parked_answer(add.clone(), Some("_INBOX.x".into()), "set aside".into()) {
            Some(Outcome::Reply { subject, reply }) => {
                assert_eq!(subject, "_INBOX.x");
                assert!(matches!(
                    reply,
                    CommandReply::Refused {
                        code: ErrorCode::Internal,
                        ..
                    }
                ));
            }
            other => panic!("expected a reply, got {other:?}"),
        }
        assert!(parked_answer(add, None, "set aside".into()).is_none());
    }
}
