//! Receipts (F7): a connection's `ack_delivered` and `ack_read` marks are
//! coalesced per conversation for one receipt window, then written; the
//! marks that moved are broadcast as `receipt` frames to the other members
//! (not for conversations that fan out on read, where one mark per member
//! per window would be a storm: there the marks are only stored, and read
//! with `GET /v1/conversations/{id}`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use switchboard_nats::envelope::frame_event;
use switchboard_plugin_host::fanout::FanOut;
use switchboard_protocol::{ClientFrame, ConversationId, ReceiptKind, ServerFrame};
use switchboard_store::{MarkChange, StoreResult};

use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::outbox::{Outbound, Outbox};

/// The highest marks a connection sent since the last flush, and where
/// it sent messages meanwhile.
#[derive(Default)]
pub(crate) struct PendingMarks {
    delivered: HashMap<ConversationId, u64>,
    read: HashMap<ConversationId, u64>,
    /// Conversations this connection sent to in the window: there a
    /// stored send may have moved the user's marks past the ones asked.
    sent: HashSet<ConversationId>,
}

impl PendingMarks {
    pub fn delivered(&mut self, conversation: ConversationId, seq: u64) {
        let mark = self.delivered.entry(conversation).or_insert(0);
        *mark = (*mark).max(seq);
    }

    pub fn read(&mut self, conversation: ConversationId, seq: u64) {
        let mark = self.read.entry(conversation).or_insert(0);
        *mark = (*mark).max(seq);
    }

    /// The connection sent a message to `conversation`.
    pub fn sent_to(&mut self, conversation: &ConversationId) {
        if !self.sent.contains(conversation) {
            self.sent.insert(conversation.clone());
        }
    }

    /// No mark to write (sends alone need none: the window forgets them).
    pub fn is_empty(&self) -> bool {
        self.delivered.is_empty() && self.read.is_empty()
    }

    /// Starts a new window.
    pub fn clear(&mut self) {
        self.sent.clear();
    }
}

/// Writes the marks and broadcasts the ones that moved. Errors (say, an
/// ack for a conversation the user left) go back to the connection.
pub(crate) async fn flush(gw: Arc<Gateway>, id: Identity, marks: PendingMarks, tx: Outbox) {
    let writes = marks
        .delivered
        .into_iter()
        .map(|(c, seq)| (c, seq, ReceiptKind::Delivered))
        .chain(
            marks
                .read
                .into_iter()
                .map(|(c, seq)| (c, seq, ReceiptKind::Read)),
        );
    for (conversation, seq, kind) in writes {
        if seq == 0 {
            continue;
        }
        let result: StoreResult<MarkChange> = match kind {
            ReceiptKind::Delivered => {
                gw.store
                    .ack_delivered(&id.tenant, &id.user, &id.device, &conversation, seq)
                    .await
            }
            ReceiptKind::Read => {
                gw.store
                    .ack_read(&id.tenant, &id.user, &conversation, seq)
                    .await
            }
        };
        match result {
            Ok(change) => {
                // Only where the user sent meanwhile is a mark past the
                // one asked news; elsewhere it is a stale ack.
                let asked = marks.sent.contains(&conversation).then_some((kind, seq));
                broadcast(&gw, &id, &conversation, asked, &change).await
            }
            Err(e) => {
                let request = ack(kind, conversation.clone(), seq);
                let refusal = ApiError::from(e).answering(
                    request.type_name(),
                    None,
                    Some(conversation.as_str()),
                );
                let _ = tx.send(Outbound::frame(&refusal)).await;
            }
        }
    }
}

/// The ack a coalesced mark stands for: an `error` about the mark answers
/// that request.
fn ack(kind: ReceiptKind, conversation_id: ConversationId, seq: u64) -> ClientFrame {
    match kind {
        ReceiptKind::Delivered => ClientFrame::AckDelivered {
            conversation_id,
            seq,
        },
        ReceiptKind::Read => ClientFrame::AckRead {
            conversation_id,
            seq,
            thread_id: None,
        },
    }
}

/// Broadcasts the marks the write moved and, after a send of the user to
/// the conversation in the same window (`after_send`: the mark written
/// and its seq), that mark when it already stood past what was asked: a
/// stored send moves its sender's marks up to itself, so the ack written
/// after it moves nothing ("read, then reply"), yet the other members
/// have had no receipt for it.
async fn broadcast(
    gw: &Gateway,
    id: &Identity,
    conversation: &ConversationId,
    after_send: Option<(ReceiptKind, u64)>,
    change: &MarkChange,
) {
    if gw.fan_out(&id.tenant, change.kind, change.members_total()) == FanOut::Read {
        return;
    }
    let passed = |kind: ReceiptKind, mark: u64| {
        after_send.is_some_and(|(written, asked)| kind == written && mark > asked)
    };
    let moved = [
        (
            change.delivered_moved || passed(ReceiptKind::Delivered, change.delivered_seq),
            ReceiptKind::Delivered,
            change.delivered_seq,
        ),
        (
            change.read_moved || passed(ReceiptKind::Read, change.read_seq),
            ReceiptKind::Read,
            change.read_seq,
        ),
    ];
    if !moved.iter().any(|m| m.0) {
        return;
    }
    // Past `MEMBERS_INLINE` the answer has no members: a raised threshold
    // or the tenant's fan-out plugin keeps this large conversation on
    // write, so ask for them.
    let fetched;
    let members = if change.members.len() < change.members_total() {
        match gw.store.members(&id.tenant, conversation, &id.user).await {
            Ok((_, all)) => {
                fetched = all;
                &fetched
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading members for a receipt failed");
                return;
            }
        }
    } else {
        &change.members
    };
    for (_, kind, seq) in moved.into_iter().filter(|m| m.0) {
        let event = frame_event(&ServerFrame::Receipt {
            conversation_id: conversation.clone(),
            user_id: id.user.clone(),
            kind,
            seq,
        });
        let others = members.iter().filter(|m| **m != id.user);
        if let Err(e) = gw.publish_to_users(&id.tenant, others, &event).await {
            tracing::warn!(error = %e, "publishing a receipt failed");
        }
    }
}
