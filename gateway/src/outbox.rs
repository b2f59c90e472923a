//! A connection's outbound queue, bounded in bytes.
//!
//! Everything a connection is sent (live events from the hub, answers,
//! backlog pages) waits here until the connection's writer puts it on the
//! socket. A count of frames does not bound memory when a frame can be
//! 64 KiB, so the queue counts bytes: past its budget the client is not
//! reading, and the connection is closed with 1013. The client reconnects
//! and pulls what it missed; nothing is lost, because everything in the
//! queue is in the store already.
//!
//! Three ways in, by how urgent the frame is:
//! - [`Outbox::try_send`]: live events and direct answers; a full queue
//!   closes the connection.
//! - [`Outbox::send`]: answers from background tasks; waits for room.
//! - [`Outbox::send_paced`]: bulk replays (`pull_backlog`); waits until
//!   the queue is under half its budget, so live events always find room
//!   beside a replay.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::ws::Utf8Bytes;
use switchboard_protocol::ServerFrame;
use tokio::sync::Notify;

/// What a connection's writer receives.
#[derive(Debug)]
pub enum Outbound {
    Frame(Utf8Bytes),
    /// A WebSocket ping, to notice dead peers.
    Ping,
    /// Close the connection with this code and reason.
    Close(u16, &'static str),
}

/// WebSocket close codes the gateway sends (docs/protocol.md and docs/limits.md's
/// protocol details).
pub mod close_code {
    /// The client did not read its frames: reconnect and pull the backlog.
    pub const TRY_AGAIN_LATER: u16 = 1013;
    /// The gateway is restarting (drain): reconnect, to any gateway, and
    /// resend unacked sends with the same `client_msg_id`.
    pub const SERVICE_RESTART: u16 = 1012;
    /// Nothing was heard from the client within the pong deadline.
    pub const GOING_AWAY: u16 = 1001;
    /// The session's token expired (past its grace) and no `refresh`
    /// came: reconnect with a fresh token.
    pub const TOKEN_EXPIRED: u16 = 4001;
    /// The tenant's key that signed the token was removed, or the tenant
    /// deleted: the token no longer verifies.
    pub const TOKEN_REVOKED: u16 = 4003;
    /// The user was erased (v1.2): their data is gone; the client signs
    /// out rather than reconnects.
    pub const ERASED: u16 = 4004;
    /// The user was banned from the tenant (v1.3): a new connection is
    /// refused (`banned`) until the ban ends or is lifted.
    pub const BANNED: u16 = 4005;
}

impl Outbound {
    /// A server frame, encoded once.
    pub(crate) fn frame(frame: &ServerFrame) -> Self {
        Outbound::Frame(Utf8Bytes::from(frame.to_json()))
    }
}

/// What each queued frame costs besides its text: its slot in the queue
/// and the shared buffer's header. Counting it bounds the number of
/// frames as well as their bytes (at most budget / 64 frames).
const FRAME_OVERHEAD: usize = 64;

/// The sending side; clones share one queue.
#[derive(Clone)]
pub(crate) struct Outbox {
    shared: Arc<Shared>,
}

/// The receiving side, owned by the connection's writer. Dropping it
/// closes the queue: every waiting sender gets `Closed`.
pub(crate) struct OutboxReader {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Woken when a frame is queued or the queue closes.
    queued: Notify,
    /// Woken when the writer takes a frame (room was made) or the queue
    /// closes.
    taken: Notify,
    budget_bytes: usize,
}

#[derive(Default)]
struct State {
    frames: VecDeque<Outbound>,
    bytes: usize,
    /// No frame is taken any more: the connection is going away.
    closed: bool,
}

/// Why a frame was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The queue was over its budget: the connection is now closing.
    Full,
    /// The connection is closing or closed.
    Closed,
}

fn cost(out: &Outbound) -> usize {
    match out {
        Outbound::Frame(text) => text.len() + FRAME_OVERHEAD,
        Outbound::Ping | Outbound::Close(..) => FRAME_OVERHEAD,
    }
}

/// A queue holding at most `budget_bytes` of frames (one frame larger
/// than the budget is let into an empty queue).
pub(crate) fn outbox(budget_bytes: usize) -> (Outbox, OutboxReader) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        queued: Notify::new(),
        taken: Notify::new(),
        budget_bytes,
    });
    (
        Outbox {
            shared: shared.clone(),
        },
        OutboxReader { shared },
    )
}

impl Shared {
    /// The state; a panic while it was held cannot leave it inconsistent
    /// (every change is a single push, pop or clear), so a poisoned lock
    /// is taken as it is.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `out` if `bytes + cost <= limit` (or the queue is empty);
    /// `last` closes the queue behind it.
    fn push_within(
        &self,
        out: Outbound,
        limit: usize,
        last: bool,
    ) -> Result<(), (Refused, Outbound)> {
        let mut state = self.lock();
        if state.closed {
            return Err((Refused::Closed, out));
        }
        let size = cost(&out);
        if !state.frames.is_empty() && state.bytes + size > limit {
            return Err((Refused::Full, out));
        }
        state.bytes += size;
        state.frames.push_back(out);
        state.closed = last;
        drop(state);
        self.queued.notify_one();
        if last {
            self.taken.notify_waiters();
        }
        Ok(())
    }

    /// Drops every queued frame and queues `close` as the last one.
    fn close_with(&self, close: Outbound) {
        let mut state = self.lock();
        if state.closed {
            return;
        }
        state.frames.clear();
        state.bytes = cost(&close);
        state.frames.push_back(close);
        state.closed = true;
        drop(state);
        self.queued.notify_one();
        self.taken.notify_waiters();
    }

    /// Waits until `out` fits under `limit`, then queues it.
    async fn push_waiting(
        &self,
        mut out: Outbound,
        limit: usize,
        last: bool,
    ) -> Result<(), Refused> {
        loop {
            let taken = self.taken.notified();
            tokio::pin!(taken);
            // Registered before looking, so a take in between still wakes us.
            taken.as_mut().enable();
            match self.push_within(out, limit, last) {
                Ok(()) => return Ok(()),
                Err((Refused::Closed, _)) => return Err(Refused::Closed),
                Err((Refused::Full, back)) => out = back,
            }
            taken.await;
        }
    }
}

impl Outbox {
    /// Queues `out` now. A queue over its budget means the client does not
    /// read what it is sent: its frames are dropped, the connection is
    /// closed with 1013, and the client replays its backlog when it
    /// reconnects.
    pub(crate) fn try_send(&self, out: Outbound) -> Result<(), Refused> {
        match self
            .shared
            .push_within(out, self.shared.budget_bytes, false)
        {
            Ok(()) => Ok(()),
            Err((Refused::Closed, _)) => Err(Refused::Closed),
            Err((Refused::Full, _)) => {
                tracing::warn!(
                    budget_bytes = self.shared.budget_bytes,
                    "outbound queue over its budget; closing the connection"
                );
                self.shared.close_with(Outbound::Close(
                    close_code::TRY_AGAIN_LATER,
                    "client too slow; reconnect and pull the backlog",
                ));
                Err(Refused::Full)
            }
        }
    }

    /// Queues `out` once there is room for it.
    pub(crate) async fn send(&self, out: Outbound) -> Result<(), Refused> {
        self.shared
            .push_waiting(out, self.shared.budget_bytes, false)
            .await
    }

    /// Queues `out` once the queue holds less than half its budget: bulk
    /// frames leave the other half to live events.
    pub(crate) async fn send_paced(&self, out: Outbound) -> Result<(), Refused> {
        self.shared
            .push_waiting(out, self.shared.budget_bytes / 2, false)
            .await
    }

    /// Queues `close` after what is queued; nothing is taken after it.
    pub(crate) async fn send_close(&self, code: u16, reason: &'static str) {
        let close = Outbound::Close(code, reason);
        let _ = self
            .shared
            .push_waiting(close, self.shared.budget_bytes, true)
            .await;
    }

    /// Drops what is queued and closes with `code`.
    pub(crate) fn close_now(&self, code: u16, reason: &'static str) {
        self.shared.close_with(Outbound::Close(code, reason));
    }

    #[cfg(test)]
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.lock().closed
    }

    /// Bytes queued now (for tests and logs).
    #[cfg(test)]
    pub(crate) fn queued_bytes(&self) -> usize {
        self.shared.lock().bytes
    }
}

impl OutboxReader {
    /// The next frame, waiting for one; `None` once the queue is closed
    /// and empty.
    pub(crate) async fn next(&self) -> Option<Outbound> {
        loop {
            let queued = self.shared.queued.notified();
            tokio::pin!(queued);
            queued.as_mut().enable();
            if let Some(out) = self.try_next() {
                return Some(out);
            }
            if self.shared.lock().closed {
                return None;
            }
            queued.await;
        }
    }

    /// The next frame if one is queued.
    pub(crate) fn try_next(&self) -> Option<Outbound> {
        let mut state = self.shared.lock();
        let out = state.frames.pop_front()?;
        state.bytes = state.bytes.saturating_sub(cost(&out));
        drop(state);
        self.shared.taken.notify_waiters();
        Some(out)
    }
}

impl Drop for OutboxReader {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.closed = true;
        state.frames.clear();
        state.bytes = 0;
        drop(state);
        self.shared.taken.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::ws::Utf8Bytes;

    /// A frame that costs `n` bytes of the budget.
    fn text(n: usize) -> Outbound {
        Outbound::Frame(Utf8Bytes::from(
            "x".repeat(n.saturating_sub(FRAME_OVERHEAD)),
        ))
    }

    #[tokio::test]
    async fn try_send_fills_to_the_budget_then_closes() {
        let (tx, rx) = outbox(1000);
        for _ in 0..10 {
            tx.try_send(text(100)).expect("within the budget");
        }
        assert_eq!(tx.queued_bytes(), 1000);
        assert_eq!(tx.try_send(text(FRAME_OVERHEAD)), Err(Refused::Full));
        assert!(tx.is_closed());
        // The buffered frames are dropped; only the close is left.
        match rx.next().await {
            Some(Outbound::Close(code, _)) => assert_eq!(code, close_code::TRY_AGAIN_LATER),
            other => panic!("expected the close, got {other:?}"),
        }
        assert!(rx.next().await.is_none());
        assert_eq!(tx.try_send(text(FRAME_OVERHEAD)), Err(Refused::Closed));
    }

    #[tokio::test]
    async fn one_frame_larger_than_the_budget_fits_an_empty_queue() {
        let (tx, rx) = outbox(10);
        tx.try_send(text(50))
            .expect("an empty queue takes any frame");
        assert_eq!(tx.try_send(text(1)), Err(Refused::Full));
        drop(rx);
    }

    #[tokio::test]
    async fn paced_sends_wait_for_half_the_budget() {
        let (tx, rx) = outbox(1000);
        tx.try_send(text(400)).expect("room");
        // 400 + 200 is over half of 1000: the paced send waits.
        let paced = {
            let tx = tx.clone();
            tokio::spawn(async move { tx.send_paced(text(200)).await })
        };
        tokio::task::yield_now().await;
        assert!(!paced.is_finished());
        // A live frame still finds room beside it.
        tx.try_send(text(300))
            .expect("the other half is for live frames");
        assert!(rx.next().await.is_some());
        assert!(rx.next().await.is_some());
        assert_eq!(paced.await.expect("joined"), Ok(()));
        assert_eq!(tx.queued_bytes(), 200);
    }

    #[tokio::test]
    async fn waiting_senders_fail_when_the_reader_goes() {
        let (tx, rx) = outbox(100);
        tx.try_send(text(100)).expect("room");
        let waiting = {
            let tx = tx.clone();
            tokio::spawn(async move { tx.send(text(50)).await })
        };
        tokio::task::yield_now().await;
        drop(rx);
        assert_eq!(waiting.await.expect("joined"), Err(Refused::Closed));
    }

    #[tokio::test]
    async fn a_close_after_queued_frames_comes_last() {
        let (tx, rx) = outbox(1000);
        tx.try_send(text(10)).expect("room");
        tx.send_close(close_code::SERVICE_RESTART, "bye").await;
        assert_eq!(tx.try_send(text(10)), Err(Refused::Closed));
        assert!(matches!(rx.next().await, Some(Outbound::Frame(_))));
        assert!(matches!(rx.next().await, Some(Outbound::Close(1012, _))));
        assert!(rx.next().await.is_none());
    }
}
