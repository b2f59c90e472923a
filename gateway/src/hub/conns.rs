//! The hub's reach into this gateway's connections: how one connection is
//! addressed, and how an event's frame is queued on each of them.

use std::sync::{Arc, Mutex};

use axum::extract::ws::Utf8Bytes;
use switchboard_nats::trace;
use switchboard_protocol::DeviceId;

use crate::blocks::BlockSet;
use crate::outbox::{Outbound, Outbox};

/// How the hub reaches one connection.
#[derive(Clone)]
pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) device: DeviceId,
    pub(super) tx: Outbox,
    /// Writers' answers to this device's sends handed to it.
    pub(super) answering: Arc<crate::answering::Answering>,
    /// Whom the user blocks, shared by the user's connections here.
    pub(super) blocks: Arc<BlockSet>,
}

pub(super) type Conns = Arc<Mutex<Vec<Conn>>>;

/// Queues a frame for a connection. A client that reads too slowly
/// overflows its queue and is closed by it (`outbox`); it reconnects and
/// replays what it missed with `pull_backlog`.
pub(super) fn deliver(conn: &Conn, out: Outbound) {
    let _ = conn.tx.try_send(out);
}

/// Hands a `message` event to connections: every one but the sending
/// device of the sending user, which gets the message's `ack` instead
/// (`Event::Ack`).
/// A user who blocks its sender gets it flagged (`blocks.rs`), built
/// once per event.
pub(super) fn deliver_message(
    targets: &[(bool, Conn)],
    frame: bytes::Bytes,
    origin_user: &str,
    origin_device: &str,
) {
    let mut flagged: Option<Option<Utf8Bytes>> = None;
    let Ok(text) = Utf8Bytes::try_from(frame.clone()) else {
        tracing::warn!("dropping a message event that is not UTF-8");
        return;
    };
    for (from_this_user, conn) in targets {
        // The same device id under another user is another device.
        if *from_this_user && conn.device.as_str() == origin_device {
            continue;
        }
        let out = if !origin_user.is_empty() && conn.blocks.contains(origin_user) {
            let flagged = flagged.get_or_insert_with(|| {
                conn.blocks
                    .flagged(&frame)
                    .and_then(|f| Utf8Bytes::try_from(f).ok())
            });
            flagged.clone().unwrap_or_else(|| text.clone())
        } else {
            text.clone()
        };
        deliver(conn, Outbound::Frame(out));
    }
}

/// A `message_updated` whose sender the user blocks goes out flagged.
pub(super) fn deliver_frame<'a>(targets: impl Iterator<Item = &'a Conn>, frame: bytes::Bytes) {
    let Ok(text) = Utf8Bytes::try_from(frame.clone()) else {
        return;
    };
    for conn in targets {
        let out = conn
            .blocks
            .flagged(&frame)
            .and_then(|f| Utf8Bytes::try_from(f).ok())
            .unwrap_or_else(|| text.clone());
        deliver(conn, Outbound::Frame(out));
    }
}

/// The span of a traced event at a gateway that delivers it: a child of
/// the writer's span, so one message is one trace from the sender's
/// gateway to every recipient's (and back to the sender, as its `ack`).
pub(super) fn deliver_span(traceparent: Option<&str>, users: usize) -> tracing::Span {
    let Some(traceparent) = traceparent.filter(|_| trace::enabled()) else {
        return tracing::Span::none();
    };
    let span = tracing::info_span!(
        target: trace::TARGET,
        parent: None,
        "deliver",
        otel.kind = "consumer",
        users,
    );
    trace::follow(&span, traceparent);
    span
}
