//! One WebSocket connection: the data plane of docs/protocol.md.
//!
//! A reader loop parses frames and acts on them; a writer task owns the
//! socket's sending half and drains a bounded queue that the hub, the
//! reader and background tasks feed. Nothing a client sends can end the
//! connection except closing it or outgrowing the hard frame limit: every
//! bad frame gets an `error` frame and the loop goes on.

mod backlog;
mod messages;
mod session;
mod socket;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use futures::FutureExt;
use futures::StreamExt;
use futures::stream::SplitStream;
use switchboard_nats::trace;
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::{
    ClientFrame, Content, ConversationId, ErrorCode, ServerFrame, TenantId, Timestamp,
};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

pub(crate) use self::session::{Session, prepare};
use self::session::{SessionParts, session_end};
use crate::Gateway;
use crate::answering::Answering;
use crate::auth::{AuthError, Identity, KeyChange};
use crate::error::ApiError;
use crate::hub::Registration;
use crate::outbox::{Outbound, Outbox, close_code};
use crate::quota::Admission;
use crate::rates::ConnectionRates;
use crate::receipts::{self, PendingMarks};
use crate::scheduling::ToSchedule;
use crate::typing;

struct Connection {
    gw: Arc<Gateway>,
    id: Identity,
    /// The token the session lives on (the latest `refresh`): checked
    /// again whenever the tenant's keys change.
    token: String,
    /// When the session ends unless refreshed: the token's `exp` plus
    /// the grace.
    session_ends: Instant,
    /// This connection's place in the tenant's connection quotas.
    _admission: Admission,
    tx: Outbox,
    /// The rates of this connection's frames (`rates.rs`).
    rates: ConnectionRates,
    /// The sends waiting for their answer, and how they get it.
    answering: Arc<Answering>,
    /// Marks sent since the last receipt window closed.
    marks: PendingMarks,
    /// Held while a `pull_backlog` runs: one at a time per connection.
    backlog: Arc<Semaphore>,
}

/// Serves an upgraded connection until it closes. Not an `async fn`: an
/// async function keeps its arguments in its future for as long as it
/// runs, and every idle connection would carry them beside what they
/// became (`Live`), about 0.6 KiB. The set-up runs at once; the future
/// holds only the loop.
pub(crate) fn run(
    id: Identity,
    token: String,
    socket: WebSocket,
    session: Session,
    admission: Admission,
) -> impl Future<Output = ()> + Send + 'static {
    let span = tracing::info_span!(
        "conn",
        tenant = %id.tenant,
        user = %id.user,
        device = %id.device,
        bot = id.bot
    );
    let serving = span
        .in_scope(|| Live::open(id, token, socket, session, admission))
        .map(Live::serve);
    futures::future::OptionFuture::from(serving)
        .map(drop)
        .instrument(span)
}

/// The span of a message this gateway takes from a client, the root of
/// the message's trace (`switchboard_nats::trace`); none unless
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

/// What a connection's loop owns once it is upgraded.
struct Live {
    conn: Connection,
    stream: SplitStream<WebSocket>,
    /// The task putting queued frames on the socket.
    writer: JoinHandle<()>,
    registration: Registration,
    draining: watch::Receiver<bool>,
    key_changes: watch::Receiver<KeyChange>,
    seen_change: u64,
    reconnects: watch::Receiver<u64>,
    pong_timeout: Duration,
    ping_interval: Duration,
    _open: crate::metrics::OpenConnection,
}

impl Live {
    /// Splits the socket, starts its writer and takes the session's
    /// parts; `None` if they were taken already.
    fn open(
        id: Identity,
        token: String,
        socket: WebSocket,
        mut session: Session,
        admission: Admission,
    ) -> Option<Self> {
        let gw = session.gw.clone();
        let _open = crate::metrics::OpenConnection::new(&id.tenant);
        let SessionParts {
            registration,
            tx,
            rx,
            answering,
        } = session.parts.take()?;
        let (sink, stream) = socket.split();
        let limits = &gw.config.limits;
        let writer = tokio::spawn(socket::write_loop(
            sink,
            rx,
            Duration::from_millis(limits.slow_client_timeout_ms),
        ));
        tracing::debug!("connected");
        let grace = Duration::from_millis(limits.token_expiry_grace_ms);
        let mut key_changes = gw.tenants.subscribe();
        let seen_change = key_changes.borrow_and_update().count;
        let conn = Connection {
            session_ends: session_end(id.expires_at, grace),
            id,
            token,
            _admission: admission,
            tx,
            rates: ConnectionRates::new(limits),
            answering,
            marks: PendingMarks::default(),
            backlog: Arc::new(Semaphore::new(1)),
            gw: gw.clone(),
        };
        Some(Self {
            conn,
            stream,
            writer,
            registration,
            draining: gw.draining(),
            key_changes,
            seen_change,
            reconnects: switchboard_nats::connection_epochs(),
            pong_timeout: Duration::from_millis(limits.pong_timeout_ms),
            ping_interval: Duration::from_millis(limits.ping_interval_ms.max(1)),
            _open,
        })
    }

    async fn serve(mut self) {
        let conn = &mut self.conn;
        let writer = &mut self.writer;
        // Receipts wait at most one window before they are written; they
        // have a deadline only while some wait, so an idle connection
        // wakes for none.
        let receipt_window = conn.gw.config.receipt_interval;
        let mut marks_due: Option<Instant> = None;
        let mut keepalive =
            tokio::time::interval_at(Instant::now() + self.ping_interval, self.ping_interval);
        // Set when a ping goes out and nothing has been heard since: a peer
        // that stays silent past it is gone (or not reading), and is let go.
        let mut pong_due: Option<Instant> = None;
        loop {
            if marks_due.is_none() && !conn.marks.is_empty() {
                marks_due = Some(Instant::now() + receipt_window);
            }
            // Only while sends wait: an idle connection has no such deadline.
            let sends_due = conn.answering.next_tick().map(Instant::from_std);
            // One timer for every deadline, the earliest: each timer in the
            // `select!` is room in every connection's future, and is set
            // again at every frame.
            let next_deadline = [marks_due, sends_due, pong_due, Some(conn.session_ends)]
                .into_iter()
                .flatten()
                .min();
            tokio::select! {
                incoming = self.stream.next() => {
                    pong_due = None;
                    match incoming {
                        // Boxed: a future holds room for its largest state, and
                        // handling a frame (publishing, reading the store) is far
                        // larger than waiting. Unboxed, every idle connection
                        // would carry that room.
                        Some(Ok(Message::Text(text))) => Box::pin(conn.on_text(&text)).await,
                        Some(Ok(Message::Binary(_))) => conn.reply(refusal(
                            ApiError::new(
                                ErrorCode::InvalidFrame,
                                "binary frames are not part of the protocol; send JSON text frames",
                            ),
                            "binary",
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
                () = until(next_deadline) => {
                    let now = Instant::now();
                    let passed = |deadline: Option<Instant>| deadline.is_some_and(|at| at <= now);
                    if passed(pong_due) {
                        tracing::info!("no pong within the deadline; closing the connection");
                        conn.tx.close_now(close_code::GOING_AWAY, "no pong within the deadline");
                        let _ = tokio::time::timeout(Duration::from_secs(1), &mut *writer).await;
                        break;
                    }
                    if conn.session_ends <= now {
                        tracing::info!("the session's token expired; closing the connection");
                        conn.tx.close_now(close_code::TOKEN_EXPIRED, "token expired; reconnect with a fresh token");
                        let _ = tokio::time::timeout(Duration::from_secs(1), &mut *writer).await;
                        break;
                    }
                    if passed(marks_due) {
                        marks_due = None;
                        conn.flush_marks();
                    }
                    if passed(sends_due) {
                        conn.answering.tick();
                    }
                }
                _ = keepalive.tick() => {
                    if conn.tx.try_send(Outbound::Ping).is_ok() && pong_due.is_none() {
                        pong_due = Some(Instant::now() + self.pong_timeout);
                    }
                }
                Ok(()) = self.key_changes.changed() => {
                    let change = self.key_changes.borrow_and_update().clone();
                    let concerned = change.concerns(&conn.id.tenant, &conn.id.user, self.seen_change);
                    self.seen_change = change.count;
                    if concerned
                        && let Err(e) = conn.gw.tenants.verify(&conn.token)
                        && e != AuthError::Expired
                    {
                        tracing::info!(error = %e, "the session's token no longer verifies; closing the connection");
                        let (code, reason) = match e {
                            AuthError::Banned { .. } => (close_code::BANNED, "banned from this tenant"),
                            _ => (close_code::TOKEN_REVOKED, "token revoked; reconnect with a valid token"),
                        };
                        conn.tx.close_now(code, reason);
                        let _ = tokio::time::timeout(Duration::from_secs(1), &mut *writer).await;
                        break;
                    }
                }
                Ok(()) = self.reconnects.changed() => {
                    let epoch = *self.reconnects.borrow_and_update();
                    conn.answering.reconnected(epoch);
                }
                _ = &mut *writer => break,
                () = until_draining(&mut self.draining) => {
                    Box::pin(conn.drain(&mut *writer)).await;
                    break;
                }
            }
        }
        conn.flush_marks();
        Box::pin(conn.gw.hub.leave(self.registration)).await;
        self.writer.abort();
        tracing::debug!("disconnected");
    }
}

/// Resolves at `deadline`; never, without one.
async fn until(deadline: Option<Instant>) {
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

/// The `error` frame that answers a request of type `request_type` about
/// `conversation`, for a refusal.
fn refusal(e: ApiError, request_type: &str, conversation: Option<&str>) -> Outbound {
    Outbound::frame(&e.answering(request_type, None, conversation))
}

impl Connection {
    /// The gateway is shutting down: no frame is read any more, no send is
    /// taken; those already taken are seen settled (answered, or given up
    /// on), bounded by `drain_timeout`, the receipt marks written, and the
    /// client told to reconnect (1012). Anything unanswered by then is
    /// stored or not stored; the client resends it with the same
    /// `client_msg_id`.
    async fn drain(&mut self, writer: &mut tokio::task::JoinHandle<()>) {
        let deadline = Instant::now() + self.gw.config.drain_timeout;
        let _ = tokio::time::timeout_at(deadline, self.answering.drain()).await;
        self.flush_marks();
        let close = self
            .tx
            .send_close(close_code::SERVICE_RESTART, "gateway restarting; reconnect");
        let _ = tokio::time::timeout_at(deadline, close).await;
        let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
        tracing::debug!("drained");
    }

    /// Admits one message (a send, edit or delete) of `content`: checks it
    /// against the tenant's content limits, then takes it from the rates
    /// (`rates.rs`). The tenant's quotas are read once.
    fn admit_message(&mut self, content: Option<&Content>) -> Result<(), ApiError> {
        let q = self.gw.quotas.of(&self.id.tenant);
        if let Some(c) = content {
            let content_limits = q.content_limits(&self.gw.config.limits.content);
            c.validate_from_client(&content_limits)?;
        }
        self.gw.rates.message(&mut self.rates, &self.id, &q)
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
            let too_large = ApiError::new(
                ErrorCode::TooLarge,
                format!(
                    "frame is {} bytes; the limit is {}",
                    text.len(),
                    limits.max_frame_bytes
                ),
            );
            self.reply(Outbound::frame(&too_large.answering(
                hints.kind.as_deref().unwrap_or("unknown"),
                hints.client_msg_id.as_deref(),
                hints.conversation_id.as_deref(),
            )));
            return;
        }
        let parsed = match ClientFrame::parse(text) {
            Ok(f) => f,
            Err(e) => {
                crate::metrics::frame_in("invalid");
                self.reply(Outbound::frame(&ServerFrame::error_answering(
                    ErrorCode::InvalidFrame,
                    e.message,
                    e.request_type.as_deref(),
                    e.client_msg_id.as_deref(),
                    e.conversation_id.as_deref(),
                )));
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
                reply_to,
                thread_id,
                mentions,
                mention_all,
                send_at,
                custom,
                previews,
            } => {
                let span = receive_span(request, &self.id.tenant, &conversation_id);
                let options = SendOptions {
                    reply_to,
                    thread_id,
                    mentions,
                    mention_all,
                    custom,
                    previews,
                };
                if let Some(send_at) = send_at {
                    let send = ToSchedule {
                        conversation: conversation_id,
                        client_msg_id,
                        content,
                        options,
                        send_at,
                    };
                    return self.schedule(request, send).instrument(span).await;
                }
                self.send_message(
                    request,
                    client_msg_id,
                    conversation_id,
                    content,
                    options,
                    text.len(),
                )
                .instrument(span)
                .await
            }
            ClientFrame::React {
                conversation_id,
                message_id,
                emoji,
                action,
            } => {
                let span = receive_span(request, &self.id.tenant, &conversation_id);
                self.react(request, conversation_id, message_id, emoji, action)
                    .instrument(span)
                    .await
            }
            ClientFrame::Vote {
                conversation_id,
                message_id,
                option_ids,
            } => {
                let span = receive_span(request, &self.id.tenant, &conversation_id);
                self.vote(request, conversation_id, message_id, option_ids)
                    .instrument(span)
                    .await
            }
            ClientFrame::EditMessage {
                conversation_id,
                message_id,
                content,
                custom,
            } => {
                let span = receive_span(request, &self.id.tenant, &conversation_id);
                self.update(
                    request,
                    conversation_id,
                    message_id,
                    Some((content, custom)),
                )
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
                thread_id,
            } => {
                if self.admit_ack(request, &conversation_id) {
                    match thread_id {
                        None => self.marks.read(conversation_id, seq),
                        Some(root) => self.thread_read(request, conversation_id, root, seq),
                    }
                }
            }
            ClientFrame::Typing {
                conversation_id,
                state,
            } => match self.rates.typing() {
                Ok(()) => {
                    let (gw, id, tx) = (self.gw.clone(), self.id.clone(), self.tx.clone());
                    tokio::spawn(typing::relay(gw, id, request, conversation_id, state, tx));
                }
                Err(e) => self.reply(refusal(e, request, Some(conversation_id.as_str()))),
            },
            ClientFrame::PullBacklog {
                conversation_id,
                since_seq,
                limit,
            } => self.pull_backlog(request, conversation_id, since_seq, limit),
            ClientFrame::Ping {} => self.reply(Outbound::frame(&ServerFrame::Pong {})),
            ClientFrame::Refresh { token } => self.refresh(request, token).await,
        }
    }

    /// Takes an ack from this connection's rate, or answers that it is
    /// spent (the ack is dropped).
    fn admit_ack(&mut self, request: &str, conversation: &ConversationId) -> bool {
        match self.rates.ack(&self.gw.config.limits) {
            Ok(()) => true,
            Err(e) => {
                self.reply(refusal(e, request, Some(conversation.as_str())));
                false
            }
        }
    }

    /// Moves the session onto a fresh token of the same tenant, user and
    /// device.
    async fn refresh(&mut self, request: &str, token: String) {
        let fresh = match self.gw.tenants.verify_fresh(&token).await {
            Ok(fresh) => fresh,
            Err(e) => {
                self.reply(refusal(e.into(), request, None));
                return;
            }
        };
        if (&fresh.tenant, &fresh.user, &fresh.device)
            != (&self.id.tenant, &self.id.user, &self.id.device)
        {
            self.reply(refusal(
                ApiError::new(
                    ErrorCode::Forbidden,
                    "the fresh token names another tenant, user or device; open a new connection for it",
                ),
                request,
                None,
            ));
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
        self.reply(Outbound::frame(&ServerFrame::Refreshed { expires_at }));
    }

    /// Closes the receipt window: writes the coalesced marks and
    /// broadcasts those that moved.
    fn flush_marks(&mut self) {
        if self.marks.is_empty() {
            self.marks.clear();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of what `f` returns, without calling it.
    fn output_size<A, B, C, D, E, F>(_: impl Fn(A, B, C, D, E) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// Every idle connection holds its loop's future (its task): what
    /// grows it grows every connection's memory. It was 3,760 bytes before
    /// issue 31 took the set-up out of it and gave its deadlines one timer
    /// (BENCHMARKS.md, issue 31, "Idle memory").
    #[test]
    fn a_connection_future_stays_small() {
        let size = output_size(run);
        assert!(
            size <= 2304,
            "a connection's future is {size} bytes: box what only a rare state needs"
        );
    }
}
