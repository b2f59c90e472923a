//! Conversations that fan out on read: their events arrive once on
//! `sb.conv.<tenant>.<conversation>`, and go to the connections of the
//! members connected here. Frames that supersede each other (a message's
//! reaction counts) are coalesced over a short window.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use switchboard_nats::envelope::{Event, HEADER_SUPERSEDES, decode_event};
use switchboard_nats::trace;
use switchboard_protocol::UserId;

use super::conns::{Conn, Conns, deliver_frame, deliver_message, deliver_span};

/// The local members of a conversation that fans out on read.
pub(super) type Listeners = Arc<Mutex<HashMap<UserId, Conns>>>;

/// The connections here of a conversation's local members, with whose
/// each is; `None` once the listener set is poisoned (the task ends).
fn local_targets(listeners: &Listeners) -> Option<Vec<(UserId, Conn)>> {
    let l = listeners.lock().ok()?;
    Some(
        l.iter()
            .flat_map(|(user, conns)| {
                let conns = conns.lock().map(|c| c.clone()).unwrap_or_default();
                conns.into_iter().map(move |c| (user.clone(), c))
            })
            .collect(),
    )
}

/// Frames of a conversation's subject that a later one with the same key
/// supersedes ([`HEADER_SUPERSEDES`]: a message's reaction counts), held
/// for the coalescing window: when it ends, the latest frame of each key
/// goes out, in the order the keys first came. A burst of reactions in a
/// large channel so costs each member one event per message per window,
/// not one per reaction.
#[derive(Default)]
struct Held {
    frames: Vec<(String, bytes::Bytes)>,
    until: Option<tokio::time::Instant>,
}

impl Held {
    fn hold(&mut self, key: &str, frame: bytes::Bytes, window: std::time::Duration) {
        match self.frames.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = frame,
            None => self.frames.push((key.to_owned(), frame)),
        }
        self.until
            .get_or_insert_with(|| tokio::time::Instant::now() + window);
    }

    /// Waits for the window to end; never, while nothing is held.
    async fn due(&self) {
        match self.until {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    fn take(&mut self) -> Vec<(String, bytes::Bytes)> {
        self.until = None;
        std::mem::take(&mut self.frames)
    }
}

/// Messages of a conversation that fans out on read, for its local
/// members; superseding frames coalesced over `window` (zero: none).
pub(super) async fn dispatch_conversation(
    mut subscriber: async_nats::Subscriber,
    listeners: Listeners,
    window: std::time::Duration,
) {
    let mut held = Held::default();
    loop {
        let msg = tokio::select! {
            msg = subscriber.next() => match msg {
                Some(msg) => msg,
                None => return,
            },
            () = held.due() => {
                let Some(targets) = local_targets(&listeners) else {
                    return;
                };
                for (_, frame) in held.take() {
                    deliver_frame(targets.iter().map(|(_, c)| c), frame);
                }
                continue;
            }
        };
        let Ok(event) = decode_event(&msg) else {
            continue;
        };
        let header = |name: &str| {
            msg.headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.as_str())
        };
        if let (Event::Frame(frame), Some(key)) = (&event, header(HEADER_SUPERSEDES))
            && !window.is_zero()
        {
            held.hold(key, frame.clone(), window);
            continue;
        }
        let Some(targets) = local_targets(&listeners) else {
            return;
        };
        let span = deliver_span(header(trace::HEADER_TRACEPARENT), targets.len());
        let _traced = span.enter();
        match event {
            Event::Message {
                frame,
                origin_user,
                origin_device,
            } => {
                let targets: Vec<(bool, Conn)> = targets
                    .into_iter()
                    .map(|(user, c)| (user.as_str() == origin_user, c))
                    .collect();
                deliver_message(&targets, frame, &origin_user, &origin_device);
            }
            Event::Frame(frame) => deliver_frame(targets.iter().map(|(_, c)| c), frame),
            Event::Listen { .. }
            | Event::Rejected(_)
            | Event::Ack { .. }
            | Event::Blocks { .. }
            | Event::EndSessions(_) => {}
        }
    }
}
