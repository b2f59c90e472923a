//! The socket's sending half: puts a connection's queued frames on the
//! wire.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::SinkExt;
use futures::stream::SplitSink;

use crate::outbox::{Outbound, OutboxReader, close_code};

/// Puts queued frames on the socket, flushing once per batch. A write
/// that cannot finish within `stall` means the client does not read: its
/// queue is dropped and the connection closed (1013, if the close frame
/// can still be written).
pub(super) async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    rx: OutboxReader,
    stall: Duration,
) {
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
