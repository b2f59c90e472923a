//! One WebSocket connection: the data plane of PROTOCOL.md.
//!
//! A reader loop parses frames and acts on them; a writer task owns the
//! socket's sending half and drains a bounded queue that the hub, the
//! reader and background tasks feed. Nothing a client sends can end the
//! connection except closing it or outgrowing the hard frame limit: every
//! bad frame gets an `error` frame and the loop goes on.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures::stream::SplitSink;
use futures::{SinkExt, StreamExt};
use switchboard_backbone::envelope::{Command, SendCommand, UpdateCommand};
use switchboard_backbone::trace;
use switchboard_protocol::{
    ClientFrame, ClientMsgId, Content, ConversationId, ErrorCode, MessageId, ServerFrame, TenantId,
    Timestamp,
};
use switchboard_store::{InboxCursor, SentKey};
use tokio::sync::Semaphore;
use tracing::Instrument;

use crate::Gateway;
use crate::auth::{AuthError, Identity};
use crate::error::{ApiError, store_error_code};
use crate::hub::{Outbound, Registration, close_code};
use crate::ingest::{NotStored, Stored};
use crate::outbox::{Outbox, OutboxReader, outbox};
use crate::quota::{self, Admission, TokenBucket};
use crate::receipts::{self, PendingMarks};
use crate::typing;

/// How long after a NATS reconnect the sends still unanswered are looked
/// up in the store: the answers published after the reconnect come first.
const ANSWERS_SETTLE: Duration = Duration::from_millis(250);

struct Connection {
    gw: Arc<Gateway>,
    id: Identity,
    /// The token the session lives on (the latest `refresh`): checked
    /// again whenever the tenant's keys change.
    token: String,
    /// When the session ends unless refreshed: the token's `exp` plus
    /// the grace.
    session_ends: tokio::time::Instant,
    /// This connection's place in the tenant's connection quotas.
    _admission: Admission,
    tx: Outbox,
    sends: TokenBucket,
    typing: TokenBucket,
    /// `ack_delivered` and `ack_read` frames.
    acks: TokenBucket,
    inflight: Arc<Semaphore>,
    /// Marks sent since the last receipt window closed.
    marks: PendingMarks,
    /// Held while a `pull_backlog` runs: one at a time per connection.
    backlog: Arc<Semaphore>,
    /// Sends JetStream stored whose writer's answer is still to come, and
    /// the answers the hub handed over: equal when nothing is pending.
    stored: Arc<AtomicU64>,
    answered: Arc<crate::answers::Answers>,
}

fn frame(f: &ServerFrame) -> Outbound {
    Outbound::Frame(Utf8Bytes::from(f.to_json()))
}

pub(crate) fn error_frame(
    code: ErrorCode,
    message: impl Into<String>,
    request_type: &str,
    client_msg_id: Option<&str>,
    conversation_id: Option<&str>,
) -> Outbound {
    frame(&ServerFrame::Error {
        code,
        message: message.into(),
        request_type: Some(request_type.to_owned()),
        client_msg_id: client_msg_id.map(str::to_owned),
        conversation_id: conversation_id.map(str::to_owned),
    })
}

/// A connection's place on this gateway, taken before the WebSocket
/// upgrade is answered: once a client sees its socket open, every message
/// stored from then on reaches it live. Leaves the hub when dropped.
pub(crate) struct Session {
    gw: Arc<Gateway>,
    /// Taken by `serve`; still here when dropped only if the upgrade never
    /// happened.
    parts: Option<SessionParts>,
}

struct SessionParts {
    registration: Registration,
    tx: Outbox,
    rx: OutboxReader,
    answered: Arc<crate::answers::Answers>,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(SessionParts { registration, .. }) = self.parts.take() {
            let gw = self.gw.clone();
            tokio::spawn(async move { gw.hub.leave(registration).await });
        }
    }
}

/// Why a connection could not be prepared: its text is what the client is
/// told, unchanged from the underlying error's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrepareError {
    #[error(transparent)]
    Store(#[from] switchboard_store::StoreError),
    #[error(transparent)]
    Join(#[from] crate::hub::JoinError),
}

/// Registers the device (so every message it might miss from here on gets
/// an inbox entry for it) and joins the hub, which has every router of
/// events route the user here (`hub::Hub::join`).
pub(crate) async fn prepare(gw: &Arc<Gateway>, id: &Identity) -> Result<Session, PrepareError> {
    gw.store
        .register_device(&id.tenant, &id.user, &id.device)
        .await?;
    let (tx, rx) = outbox(gw.config.limits.outbound_queue_bytes);
    let answered = Arc::new(crate::answers::Answers::default());
    let registration = gw
        .hub
        .join(
            &id.tenant,
            &id.user,
            &id.device,
            tx.clone(),
            answered.clone(),
        )
        .await?;
    Ok(Session {
        gw: gw.clone(),
        parts: Some(SessionParts {
            registration,
            tx,
            rx,
            answered,
        }),
    })
}

pub(crate) async fn run(
    id: Identity,
    token: String,
    socket: WebSocket,
    session: Session,
    admission: Admission,
) {
    let span = tracing::info_span!(
        "conn",
        tenant = %id.tenant,
        user = %id.user,
        device = %id.device
    );
    serve(id, token, socket, session, admission)
        .instrument(span)
        .await;
}

/// The span of a message this gateway takes from a client, the root of
/// the message's trace (`switchboard_backbone::trace`); none unless
/// tracing is on. It lasts until the backbone has stored the message.
/// Not a child of the connection's span: one message is one trace, and
/// a connection's span lasts as long as the connection.
fn receive_span(
    request: &'static str,
    tenant: &TenantId,
    conversation: &ConversationId,
) -> tracing::Span {
    if !trace::enabled() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        target: trace::TARGET,
        parent: None,
        "receive",
        otel.name = request,
        otel.kind = "producer",
        tenant = %tenant,
        conversation = %conversation,
    )
}

/// When a session on a token expiring at `exp` (Unix seconds) ends.
fn session_end(exp: u64, grace: Duration) -> tokio::time::Instant {
    let now_ms = Timestamp::now().unix_ms();
    let end_ms = i64::try_from(exp)
        .unwrap_or(i64::MAX)
        .saturating_mul(1000)
        .saturating_add(i64::try_from(grace.as_millis()).unwrap_or(i64::MAX));
    // At most a year out: `Instant` arithmetic must not overflow on an
    // absurd `exp`.
    let left_ms = end_ms.saturating_sub(now_ms).clamp(0, 365 * 86_400_000);
    tokio::time::Instant::now() + Duration::from_millis(left_ms as u64)
}

async fn serve(
    id: Identity,
    token: String,
    socket: WebSocket,
    mut session: Session,
    admission: Admission,
) {
    let gw = session.gw.clone();
    let _open = crate::metrics::OpenConnection::new(&id.tenant);
    let (sink, mut stream) = socket.split();
    let limits = gw.config.limits.clone();
    let Some(SessionParts {
        registration,
        tx,
        rx,
        answered,
    }) = session.parts.take()
    else {
        return;
    };
    let mut draining = gw.draining();
    let mut writer = tokio::spawn(write_loop(
        sink,
        rx,
        Duration::from_millis(limits.slow_client_timeout_ms),
    ));
    tracing::debug!("connected");

    let grace = Duration::from_millis(limits.token_expiry_grace_ms);
    let mut key_changes = gw.tenants.subscribe();
    let mut seen_change = key_changes.borrow_and_update().count;
    let mut reconnects = switchboard_backbone::connection_epochs();
    let mut conn = Connection {
        gw: gw.clone(),
        session_ends: session_end(id.expires_at, grace),
        id,
        token,
        _admission: admission,
        tx,
        sends: TokenBucket::new(limits.sends_per_second, limits.send_burst),
        typing: TokenBucket::new(limits.typing_per_second, limits.typing_burst),
        acks: TokenBucket::new(limits.acks_per_second, limits.ack_burst),
        inflight: Arc::new(Semaphore::new(limits.max_inflight_sends)),
        marks: PendingMarks::default(),
        backlog: Arc::new(Semaphore::new(1)),
        stored: Arc::new(AtomicU64::new(0)),
        answered,
    };
    let mut ack_flush = tokio::time::interval(gw.config.receipt_interval);
    let ping_interval = Duration::from_millis(limits.ping_interval_ms.max(1));
    let mut keepalive =
        tokio::time::interval_at(tokio::time::Instant::now() + ping_interval, ping_interval);
    // Set when a ping goes out and nothing has been heard since: a peer
    // that stays silent past it is gone (or not reading), and is let go.
    let mut pong_due: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            incoming = stream.next() => {
                pong_due = None;
                match incoming {
                    // Boxed: a future holds room for its largest state, and
                    // handling a frame (publishing, reading the store) is far
                    // larger than waiting. Unboxed, every idle connection
                    // would carry that room.
                    Some(Ok(Message::Text(text))) => Box::pin(conn.on_text(&text)).await,
                    Some(Ok(Message::Binary(_))) => conn.reply(error_frame(
                        ErrorCode::InvalidFrame,
                        "binary frames are not part of the protocol; send JSON text frames",
                        "binary",
                        None,
                        None,
                    )),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                    Some(Ok(Message::Close(_))) | None => break,
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "websocket read failed");
                        break;
                    }
                }
            }
            _ = ack_flush.tick() => conn.flush_marks(),
            _ = keepalive.tick() => {
                if conn.tx.try_send(Outbound::Ping).is_ok() && pong_due.is_none() {
                    pong_due = Some(
                        tokio::time::Instant::now() + Duration::from_millis(limits.pong_timeout_ms),
                    );
                }
            }
            () = until(pong_due) => {
                tracing::info!("no pong within the deadline; closing the connection");
                conn.tx.close_now(close_code::GOING_AWAY, "no pong within the deadline");
                let _ = tokio::time::timeout(Duration::from_secs(1), &mut writer).await;
                break;
            }
            () = tokio::time::sleep_until(conn.session_ends) => {
                tracing::info!("the session's token expired; closing the connection");
                conn.tx.close_now(close_code::TOKEN_EXPIRED, "token expired; reconnect with a fresh token");
                let _ = tokio::time::timeout(Duration::from_secs(1), &mut writer).await;
                break;
            }
            Ok(()) = key_changes.changed() => {
                let change = key_changes.borrow_and_update().clone();
                let concerned = change.concerns(&conn.id.tenant, seen_change);
                seen_change = change.count;
                if concerned
                    && let Err(e) = gw.tenants.verify(&conn.token)
                    && e != AuthError::Expired
                {
                    tracing::info!(error = %e, "the session's token no longer verifies; closing the connection");
                    conn.tx.close_now(close_code::TOKEN_REVOKED, "token revoked; reconnect with a valid token");
                    let _ = tokio::time::timeout(Duration::from_secs(1), &mut writer).await;
                    break;
                }
            }
            Ok(()) = reconnects.changed() => {
                let epoch = *reconnects.borrow_and_update();
                conn.answer_from_the_store(epoch);
            }
            _ = &mut writer => break,
            () = until_draining(&mut draining) => {
                Box::pin(conn.drain(&mut writer)).await;
                break;
            }
        }
    }
    conn.flush_marks();
    Box::pin(gw.hub.leave(registration)).await;
    writer.abort();
    tracing::debug!("disconnected");
}

/// Resolves at `deadline`; never, without one.
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Resolves once the gateway starts draining; never, if it cannot.
async fn until_draining(draining: &mut tokio::sync::watch::Receiver<bool>) {
    if draining.wait_for(|d| *d).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Puts queued frames on the socket, flushing once per batch. A write
/// that cannot finish within `stall` means the client does not read: its
/// queue is dropped and the connection closed (1013, if the close frame
/// can still be written).
async fn write_loop(mut sink: SplitSink<WebSocket, Message>, rx: OutboxReader, stall: Duration) {
    let timed_out = 'writing: loop {
        let Some(first) = rx.next().await else {
            return;
        };
        let mut next = Some(first);
        while let Some(out) = next.take() {
            let message = match out {
                Outbound::Frame(text) => {
                    crate::metrics::frame_out(&text);
                    Message::Text(text)
                }
                Outbound::Ping => Message::Ping(Default::default()),
                Outbound::Close(code, reason) => {
                    let close = CloseFrame {
                        code,
                        reason: reason.into(),
                    };
                    let _ =
                        tokio::time::timeout(stall, sink.send(Message::Close(Some(close)))).await;
                    return;
                }
            };
            match tokio::time::timeout(stall, sink.feed(message)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_) => break 'writing true,
            }
            next = rx.try_next();
        }
        match tokio::time::timeout(stall, sink.flush()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return,
            Err(_) => break 'writing true,
        }
    };
    if timed_out {
        tracing::warn!(
            stall_ms = stall.as_millis() as u64,
            "client took no frames within the slow-client timeout; closing the connection"
        );
        drop(rx);
        let close = CloseFrame {
            code: close_code::TRY_AGAIN_LATER,
            reason: "client too slow; reconnect and pull the backlog".into(),
        };
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            sink.send(Message::Close(Some(close))),
        )
        .await;
    }
}

impl Connection {
    /// The gateway is shutting down: no frame is read any more; the sends
    /// already taken are seen through to their writer's answer (bounded
    /// by `drain_timeout`), the receipt marks written, and the client told
    /// to reconnect (1012). Anything unanswered by then is stored or not
    /// stored; the client resends it with the same `client_msg_id`.
    async fn drain(&mut self, writer: &mut tokio::task::JoinHandle<()>) {
        let deadline = tokio::time::Instant::now() + self.gw.config.drain_timeout;
        let permits = u32::try_from(self.gw.config.limits.max_inflight_sends).unwrap_or(u32::MAX);
        // Every accepted send has reached JetStream (or failed) once all
        // in-flight permits are back.
        let _ = tokio::time::timeout_at(deadline, self.inflight.acquire_many(permits)).await;
        while self.answered.count.load(Ordering::Relaxed) < self.stored.load(Ordering::Relaxed)
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.flush_marks();
        let close = self
            .tx
            .send_close(close_code::SERVICE_RESTART, "gateway restarting; reconnect");
        let _ = tokio::time::timeout_at(deadline, close).await;
        let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
        tracing::debug!("drained");
    }

    /// Admits one message (a send, edit or delete) of `content`: checks it
    /// against the tenant's content limits, then takes it from this
    /// connection's rate and the tenant's. The tenant's quotas are read
    /// once; a quota replaces the deployment's per-connection rate from the
    /// next message on.
    fn admit_message(&mut self, content: Option<&Content>) -> Result<(), ApiError> {
        let q = self.gw.quotas.of(&self.id.tenant);
        let limits = &self.gw.config.limits;
        if let Some(c) = content {
            let content_limits = quota::content_limits(&q, &limits.content);
            c.validate_from_client(&content_limits)?;
        }
        let (rate, burst) = match q.messages_per_second_per_connection {
            Some(rate) => quota::rate_and_burst(rate),
            None => (limits.sends_per_second, limits.send_burst),
        };
        self.sends.set(rate, burst);
        if !self.sends.take() {
            return Err(ApiError::new(
                ErrorCode::RateLimited,
                format!(
                    "more than {rate} messages per second on this connection; slow down and retry"
                ),
            ));
        }
        if !self.gw.quotas.tenant_message(&self.id.tenant, &q) {
            return Err(ApiError::new(
                ErrorCode::RateLimited,
                "the tenant's messages per second are spent; retry shortly",
            ));
        }
        Ok(())
    }

    /// Queues a frame for this connection. A full queue means the client
    /// does not read what it asks for: the queue closes the connection (it
    /// can reconnect and pull its backlog), rather than buffering without
    /// end.
    fn reply(&mut self, out: Outbound) {
        let _ = self.tx.try_send(out);
    }

    async fn on_text(&mut self, text: &str) {
        let limits = &self.gw.config.limits;
        if text.len() > limits.max_frame_bytes {
            crate::metrics::frame_in("invalid");
            let hints: FrameHints = serde_json::from_str(text).unwrap_or_default();
            self.reply(error_frame(
                ErrorCode::TooLarge,
                format!(
                    "frame is {} bytes; the limit is {}",
                    text.len(),
                    limits.max_frame_bytes
                ),
                hints.kind.as_deref().unwrap_or("unknown"),
                hints.client_msg_id.as_deref(),
                hints.conversation_id.as_deref(),
            ));
            return;
        }
        let parsed = match ClientFrame::parse(text) {
            Ok(f) => f,
            Err(e) => {
                crate::metrics::frame_in("invalid");
                self.reply(frame(&ServerFrame::Error {
                    code: ErrorCode::InvalidFrame,
                    message: e.message,
                    request_type: e.request_type,
                    client_msg_id: e.client_msg_id,
                    conversation_id: e.conversation_id,
                }));
                return;
            }
        };
        // Every refusal of the frame names it by its type.
        let request = parsed.type_name();
        crate::metrics::frame_in(request);
        match parsed {
            ClientFrame::SendMessage {
                client_msg_id,
                conversation_id,
                content,
            } => {
                let span = receive_span(request, &self.id.tenant, &conversation_id);
                self.send_message(request, client_msg_id, conversation_id, content)
                    .instrument(span)
                    .await
            }
            ClientFrame::EditMessage {
                conversation_id,
                message_id,
                content,
            } => {
                let span = receive_span(request, &self.id.tenant, &conversation_id);
                self.update(request, conversation_id, message_id, Some(content))
                    .instrument(span)
                    .await
            }
            ClientFrame::DeleteMessage {
                conversation_id,
                message_id,
            } => {
                let span = receive_span(request, &self.id.tenant, &conversation_id);
                self.update(request, conversation_id, message_id, None)
                    .instrument(span)
                    .await
            }
            ClientFrame::AckDelivered {
                conversation_id,
                seq,
            } => {
                if self.admit_ack(request, &conversation_id) {
                    self.marks.delivered(conversation_id, seq)
                }
            }
            ClientFrame::AckRead {
                conversation_id,
                seq,
            } => {
                if self.admit_ack(request, &conversation_id) {
                    self.marks.read(conversation_id, seq)
                }
            }
            ClientFrame::Typing {
                conversation_id,
                state,
            } => {
                if self.typing.take() {
                    let (gw, id, tx) = (self.gw.clone(), self.id.clone(), self.tx.clone());
                    tokio::spawn(typing::relay(gw, id, request, conversation_id, state, tx));
                } else {
                    self.reply(error_frame(
                        ErrorCode::RateLimited,
                        "typing indicators too often; one start every few seconds is enough",
                        request,
                        None,
                        Some(conversation_id.as_str()),
                    ));
                }
            }
            ClientFrame::PullBacklog {
                conversation_id,
                since_seq,
                limit,
            } => self.pull_backlog(request, conversation_id, since_seq, limit),
            ClientFrame::Ping {} => self.reply(frame(&ServerFrame::Pong {})),
            ClientFrame::Refresh { token } => self.refresh(request, token),
        }
    }

    /// Takes an ack from this connection's rate, or answers that it is
    /// spent (the ack is dropped; a later one covers it, marks only move
    /// forward).
    fn admit_ack(&mut self, request: &str, conversation: &ConversationId) -> bool {
        if self.acks.take() {
            return true;
        }
        let per_second = self.gw.config.limits.acks_per_second;
        self.reply(error_frame(
            ErrorCode::RateLimited,
            format!("more than {per_second} acks per second on this connection; ack the highest seq only"),
            request,
            None,
            Some(conversation.as_str()),
        ));
        false
    }

    /// Moves the session onto a fresh token of the same tenant, user and
    /// device.
    fn refresh(&mut self, request: &str, token: String) {
        let fail = |e: ApiError| error_frame(e.code, e.message, request, None, None);
        let fresh = match self.gw.tenants.verify(&token) {
            Ok(fresh) => fresh,
            Err(e) => {
                self.reply(fail(e.into()));
                return;
            }
        };
        if (&fresh.tenant, &fresh.user, &fresh.device)
            != (&self.id.tenant, &self.id.user, &self.id.device)
        {
            self.reply(fail(ApiError::new(
                ErrorCode::Forbidden,
                "the fresh token names another tenant, user or device; open a new connection for it",
            )));
            return;
        }
        let grace = Duration::from_millis(self.gw.config.limits.token_expiry_grace_ms);
        self.session_ends = session_end(fresh.expires_at, grace);
        let expires_at = Timestamp::from_unix_ms(
            i64::try_from(fresh.expires_at)
                .unwrap_or(i64::MAX)
                .saturating_mul(1000),
        );
        self.id = fresh;
        self.token = token;
        self.reply(frame(&ServerFrame::Refreshed { expires_at }));
    }

    async fn send_message(
        &mut self,
        request: &'static str,
        client_msg_id: ClientMsgId,
        conversation_id: ConversationId,
        content: Content,
    ) {
        let fail = |e: ApiError| {
            error_frame(
                e.code,
                e.message,
                request,
                Some(client_msg_id.as_str()),
                Some(conversation_id.as_str()),
            )
        };
        if let Err(e) = self.admit_message(Some(&content)) {
            self.reply(fail(e));
            return;
        }
        let Ok(permit) = self.inflight.clone().try_acquire_owned() else {
            self.reply(fail(ApiError::new(
                ErrorCode::RateLimited,
                "too many sends waiting for the backbone; retry after an ack",
            )));
            return;
        };
        let content = match self.gw.moderate(&self.id, &conversation_id, content).await {
            Ok(content) => content,
            Err(e) => {
                self.reply(fail(e));
                return;
            }
        };
        // After moderation: what is checked is what will be stored.
        if let Some(media) = content.media()
            && let Err(e) = self.gw.check_media(&self.id, media).await
        {
            self.reply(fail(e));
            return;
        }
        let command = Command::Send(SendCommand {
            tenant: self.id.tenant.clone(),
            conversation_id: conversation_id.clone(),
            sender: self.id.user.clone(),
            device: self.id.device.clone(),
            client_msg_id: client_msg_id.clone(),
            content,
            received_at: Timestamp::now(),
        });
        tracing::debug!(%conversation_id, %client_msg_id, "send accepted");
        let receipt = match self.gw.submit_send(command) {
            Ok(receipt) => receipt,
            Err(e) => {
                self.reply(fail(e));
                return;
            }
        };
        crate::metrics::send_accepted();
        self.answered.sent(&conversation_id, &client_msg_id);
        let answered = self.answered.clone();
        let (gw, tx, stored_count) = (self.gw.clone(), self.tx.clone(), self.stored.clone());
        let key = SentKey {
            tenant: self.id.tenant.clone(),
            conversation_id,
            sender: self.id.user.clone(),
            client_msg_id,
        };
        // A task per send, not a future polled by this connection's loop:
        // the connection goes on reading while the send waits for the
        // backbone, up to `max_inflight_sends` of them (the permit). Its
        // trace span, when traced, lasts until then; untraced, the task
        // carries no span, as before traces.
        let traced = if trace::enabled() {
            tracing::Span::current()
        } else {
            tracing::Span::none()
        };
        tokio::spawn(
            async move {
                let _permit = permit;
                let send_error = |message: String| {
                    error_frame(
                        ErrorCode::Unavailable,
                        message,
                        request,
                        Some(key.client_msg_id.as_str()),
                        Some(key.conversation_id.as_str()),
                    )
                };
                match receipt.await.unwrap_or(Err(NotStored::Closed)) {
                    // Stored: the writer answers with `ack` or `error`.
                    Ok(Stored::New) => {
                        stored_count.fetch_add(1, Ordering::Relaxed);
                        answered.stored(key.client_msg_id.as_str());
                    }
                    // A retry inside the dedupe window: JetStream dropped it.
                    // If the original is in the store, answer now; if its
                    // writer refused it, answer with that; if neither, it is
                    // still in the stream and its writer will answer.
                    Ok(Stored::Duplicate) => match gw.store.find_sent(vec![key.clone()]).await {
                        Ok(found) => {
                            if let Some(Some(m)) = found.first() {
                                answered.acked(m.client_msg_id.as_str());
                                let _ = tx.send(frame(&ServerFrame::ack(m))).await;
                            } else if let Some(refusal) = gw.refused(&key).await {
                                answered.refused(key.client_msg_id.as_str());
                                let answer = error_frame(
                                    refusal.code,
                                    refusal.message,
                                    request,
                                    Some(key.client_msg_id.as_str()),
                                    Some(key.conversation_id.as_str()),
                                );
                                let _ = tx.send(answer).await;
                            }
                        }
                        Err(e) => {
                            answered.refused(key.client_msg_id.as_str());
                            let _ = tx.send(send_error(format!("store: {e}; retry"))).await;
                        }
                    },
                    Err(e) => {
                        answered.refused(key.client_msg_id.as_str());
                        let _ = tx.send(send_error(format!("{e}; retry"))).await;
                    }
                }
            }
            .instrument(traced),
        );
    }

    /// NATS reconnected (`epoch`): a writer's answer published while it was
    /// down is lost. A moment later, once the answers published since have
    /// come, the sends made before that are stored and still unanswered are
    /// answered from the store (`answers.rs`); the others are not stored
    /// yet, and their writers' answers will come.
    fn answer_from_the_store(&self, epoch: u64) {
        let (gw, tx, answered) = (self.gw.clone(), self.tx.clone(), self.answered.clone());
        let (tenant, sender) = (self.id.tenant.clone(), self.id.user.clone());
        tokio::spawn(
            async move {
                tokio::time::sleep(ANSWERS_SETTLE).await;
                let keys: Vec<SentKey> = answered
                    .waiting_since_before(epoch)
                    .into_iter()
                    .map(|(conversation_id, client_msg_id)| SentKey {
                        tenant: tenant.clone(),
                        conversation_id,
                        sender: sender.clone(),
                        client_msg_id,
                    })
                    .collect();
                if keys.is_empty() {
                    return;
                }
                match gw.store.find_sent(keys).await {
                    Ok(found) => {
                        let mut acks = 0;
                        for m in found.into_iter().flatten() {
                            let Some(counted) = answered.acked_from_the_store(m.client_msg_id.as_str()) else {
                                continue;
                            };
                            acks += 1;
                            // A draining connection waits for as many
                            // answers as sends were stored new.
                            if counted {
                                answered.count.fetch_add(1, Ordering::Relaxed);
                            }
                            let _ = tx.send(frame(&ServerFrame::ack(&m))).await;
                        }
                        tracing::debug!(acks, "answered from the store after a NATS reconnect");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "sends waiting across a NATS reconnect not looked up; clients resend them");
                    }
                }
            }
            .in_current_span(),
        );
    }

    /// An edit (with content) or a deletion. The writer answers every
    /// member with `message_updated`, or this device with an `error`.
    async fn update(
        &mut self,
        request: &'static str,
        conversation_id: ConversationId,
        message_id: MessageId,
        content: Option<Content>,
    ) {
        let fail = |e: ApiError| {
            error_frame(
                e.code,
                e.message,
                request,
                None,
                Some(conversation_id.as_str()),
            )
        };
        if let Err(e) = self.admit_message(content.as_ref()) {
            self.reply(fail(e));
            return;
        }
        // An edit is new content: it is moderated like a send.
        let content = match content {
            Some(c) => match self.gw.moderate(&self.id, &conversation_id, c).await {
                Ok(c) => Some(c),
                Err(e) => {
                    self.reply(fail(e));
                    return;
                }
            },
            None => None,
        };
        // After moderation: what is checked is what will be stored.
        if let Some(media) = content.as_ref().and_then(Content::media)
            && let Err(e) = self.gw.check_media(&self.id, media).await
        {
            self.reply(fail(e));
            return;
        }
        let command_id = match self.gw.ids.next_id() {
            Ok(id) => id,
            Err(e) => {
                self.reply(fail(e.into()));
                return;
            }
        };
        let update = UpdateCommand {
            command_id,
            tenant: self.id.tenant.clone(),
            conversation_id: conversation_id.clone(),
            message_id,
            actor: self.id.user.clone(),
            device: self.id.device.clone(),
            actor_is_admin: self.id.admin,
            content: content.clone(),
        };
        let command = if content.is_some() {
            Command::Edit(update)
        } else {
            Command::Delete(update)
        };
        match self.gw.publish_command(&command, None).await {
            Ok(stored) => {
                let tx = self.tx.clone();
                let unstored = fail(ApiError::new(
                    ErrorCode::Unavailable,
                    "backbone did not store the change; retry",
                ));
                tokio::spawn(async move {
                    if stored.await.is_err() {
                        let _ = tx.send(unstored).await;
                    }
                });
            }
            Err(e) => self.reply(fail(e)),
        }
    }

    fn pull_backlog(
        &mut self,
        request: &'static str,
        conversation_id: Option<ConversationId>,
        since_seq: Option<u64>,
        limit: Option<u32>,
    ) {
        let Ok(permit) = self.backlog.clone().try_acquire_owned() else {
            self.reply(error_frame(
                ErrorCode::RateLimited,
                "a pull_backlog is already running on this connection; wait for its backlog_done",
                request,
                None,
                conversation_id.as_ref().map(|c| c.as_str()),
            ));
            return;
        };
        let limits = &self.gw.config.limits;
        let limit = limit
            .map(|l| l as usize)
            .unwrap_or(limits.backlog_default_limit)
            .clamp(1, limits.backlog_max_limit);
        // Pages small enough that one page of the largest messages is about
        // half the outbound budget: the replay is read as the client takes
        // it, never held whole.
        let largest = limits
            .content
            .max_ciphertext_bytes
            .max(limits.content.max_text_bytes);
        let page = (limits.outbound_queue_bytes / 2 / largest.max(1)).clamp(1, 100);
        let (gw, tx, id) = (self.gw.clone(), self.tx.clone(), self.id.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let since = since_seq.unwrap_or(0);
            let fail = |e: switchboard_store::StoreError| {
                error_frame(
                    store_error_code(&e),
                    e.to_string(),
                    request,
                    None,
                    conversation_id.as_ref().map(|c| c.as_str()),
                )
            };
            let mut sent = 0usize;
            let mut last_seq = since;
            let mut cursor: Option<InboxCursor> = None;
            let more = loop {
                // The last page asks for one more than it needs: whether the
                // store had it says whether the limit cut the replay short.
                let room = limit - sent;
                let want = if room <= page { room + 1 } else { page };
                let result = match &conversation_id {
                    Some(c) => {
                        gw.store
                            .replay(&id.tenant, c, &id.user, last_seq, want)
                            .await
                    }
                    None => {
                        gw.store
                            .inbox(&id.tenant, &id.user, &id.device, cursor.clone(), want)
                            .await
                    }
                };
                let mut messages = match result {
                    Ok(m) => m,
                    Err(e) => {
                        let _ = tx.send(fail(e)).await;
                        return;
                    }
                };
                let exhausted = messages.len() < want;
                let cut = messages.len() > room;
                messages.truncate(room);
                for m in messages {
                    last_seq = m.seq;
                    cursor = Some(InboxCursor::of(&m));
                    sent += 1;
                    let out = frame(&ServerFrame::Message { message: m });
                    if tx.send_paced(out).await.is_err() {
                        return;
                    }
                }
                if cut {
                    break true;
                }
                if exhausted || sent >= limit {
                    break false;
                }
            };
            let last_seq = match &conversation_id {
                Some(_) => last_seq,
                None => 0,
            };
            let _ = tx
                .send_paced(frame(&ServerFrame::BacklogDone {
                    conversation_id,
                    last_seq,
                    more,
                }))
                .await;
        });
    }

    /// Closes the receipt window: writes the coalesced marks and
    /// broadcasts those that moved.
    fn flush_marks(&mut self) {
        if self.marks.is_empty() {
            return;
        }
        let marks = std::mem::take(&mut self.marks);
        let (gw, tx, id) = (self.gw.clone(), self.tx.clone(), self.id.clone());
        tokio::spawn(receipts::flush(gw, id, marks, tx));
    }
}

/// Request fields of a frame refused before parsing, for its `error`.
#[derive(Default, serde::Deserialize)]
struct FrameHints {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_msg_id: Option<String>,
    conversation_id: Option<String>,
}
