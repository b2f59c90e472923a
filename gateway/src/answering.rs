//! A connection's sends and their answers as the connection, the hub and
//! the store see them: the [`Sends`] state machine behind a lock, and the
//! IO that carries out what it says (writing answers to the connection's
//! outbox, looking sends up in the store). Every event of a send reaches
//! the state machine through here, from whichever task it happens in.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use switchboard_nats::records::refusals::{Refusals, SendKey};
use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, SendAck, ServerFrame, TenantId, UserId,
};
use switchboard_store::{SentKey, Store};
use tokio::sync::watch;
use tracing::Instrument;

use crate::outbox::{Outbound, Outbox};
use switchboard_nats::answers::{Action, Found, PubAck, Refusal, SendLimits, Sends, Ticket};

/// How long after a NATS reconnect the sends still unanswered are looked
/// up in the store: the answers published after the reconnect come first.
const AFTER_RECONNECT: Duration = Duration::from_millis(250);

/// Where a connection's sends are looked up: the store, and the refusals
/// its writers remembered (`sb_refused`).
#[derive(Clone)]
pub(crate) struct Lookups {
    pub store: Arc<dyn Store>,
    pub refusals: Refusals,
}

pub(crate) struct Answering {
    sends: Mutex<Sends>,
    tx: Outbox,
    lookups: Lookups,
    tenant: TenantId,
    sender: UserId,
    /// Whether every send is settled, for a draining connection.
    settled: watch::Sender<bool>,
}

impl Answering {
    pub(crate) fn new(
        limits: SendLimits,
        tx: Outbox,
        lookups: Lookups,
        tenant: TenantId,
        sender: UserId,
    ) -> Arc<Self> {
        Arc::new(Self {
            sends: Mutex::new(Sends::new(limits)),
            tx,
            lookups,
            tenant,
            sender,
            settled: watch::Sender::new(true),
        })
    }

    /// Runs one event on the state machine and carries out its actions.
    fn on<R>(self: &Arc<Self>, event: impl FnOnce(&mut Sends) -> (R, Vec<Action>)) -> R {
        let (result, actions, settled) = {
            let mut sends = self.sends.lock().unwrap_or_else(PoisonError::into_inner);
            let (result, actions) = event(&mut sends);
            (result, actions, sends.is_settled())
        };
        self.settled
            .send_if_modified(|s| std::mem::replace(s, settled) != settled);
        for action in actions {
            match action {
                Action::Write(frame) => {
                    let _ = self.tx.try_send(Outbound::frame(&frame));
                }
                Action::LookUp(sends) => {
                    let me = self.clone();
                    tokio::spawn(me.look_up(sends).in_current_span());
                }
                Action::Answered(latency) => crate::metrics::acked(Some(latency)),
            }
        }
        result
    }

    pub(crate) fn accept(
        self: &Arc<Self>,
        id: &ClientMsgId,
        conversation: &ConversationId,
        bytes: usize,
    ) -> Result<Ticket, Refusal> {
        let epoch = switchboard_nats::connection_epoch();
        self.on(|s| {
            (
                s.accept(id, conversation, bytes, epoch, Instant::now()),
                Vec::new(),
            )
        })
    }

    pub(crate) fn pub_acked(self: &Arc<Self>, id: &ClientMsgId, ticket: Ticket, ack: PubAck) {
        self.on(|s| ((), s.pub_acked(id, ticket, ack)));
    }

    pub(crate) fn publish_failed(self: &Arc<Self>, id: &ClientMsgId, ticket: Ticket, why: &str) {
        self.on(|s| ((), s.publish_failed(id, ticket, why, Instant::now())));
    }

    /// The writer's answer to a send of this connection's device, the
    /// `ack` or `error` frame as it came: written, then the send settled
    /// (so a drain that waits for it closes after it).
    pub(crate) fn writer_answered(self: &Arc<Self>, id: &ClientMsgId, frame: Outbound) {
        let shown = self.on(|s| (s.stored_content(id), Vec::new()));
        let frame = match shown {
            Some(content) => with_content(frame, content),
            None => frame,
        };
        let _ = self.tx.try_send(frame);
        self.on(|s| ((), s.answered(id, Instant::now())));
    }

    /// The send was stored as `content`, not as sent: its `ack` carries
    /// it.
    pub(crate) fn show_stored(self: &Arc<Self>, id: &ClientMsgId, content: &Content) {
        self.on(|s| {
            s.show_stored(id, content.clone());
            ((), Vec::new())
        });
    }

    /// NATS reconnected (to connection epoch `epoch`): a moment later,
    /// once the answers published since have come, the sends made before
    /// are looked up in the store.
    pub(crate) fn reconnected(self: &Arc<Self>, epoch: u64) {
        let me = self.clone();
        tokio::spawn(
            async move {
                tokio::time::sleep(AFTER_RECONNECT).await;
                me.on(|s| ((), s.reconnected(epoch)));
            }
            .in_current_span(),
        );
    }

    pub(crate) fn tick(self: &Arc<Self>) {
        self.on(|s| ((), s.tick(Instant::now())));
    }

    /// When [`Answering::tick`] has something to do next, if ever.
    pub(crate) fn next_tick(&self) -> Option<Instant> {
        self.sends
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_tick()
    }

    /// Takes no send any more, and resolves once every send is settled.
    pub(crate) async fn drain(self: &Arc<Self>) {
        self.on(|s| {
            s.drain();
            ((), Vec::new())
        });
        let mut settled = self.settled.subscribe();
        let _ = settled.wait_for(|s| *s).await;
    }

    /// Looks `sends` up: stored (the `ack`), refused (the refusal), or
    /// neither (its writer will answer).
    async fn look_up(self: Arc<Self>, sends: Vec<(ConversationId, ClientMsgId)>) {
        let keys: Vec<SentKey> = sends
            .iter()
            .map(|(conversation, id)| SentKey {
                tenant: self.tenant.clone(),
                conversation_id: conversation.clone(),
                sender: self.sender.clone(),
                client_msg_id: id.clone(),
            })
            .collect();
        let found = match self.lookups.store.find_sent(keys).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, sends = sends.len(), "sends not looked up in the store; looked up again when overdue");
                self.on(|s| {
                    let now = Instant::now();
                    sends.iter().for_each(|(_, id)| s.lookup_failed(id, now));
                    ((), Vec::new())
                });
                return;
            }
        };
        for ((conversation, id), message) in sends.iter().zip(found) {
            let found = match message {
                Some(m) => Found::Stored(Box::new(m)),
                None => self.refusal(conversation, id).await,
            };
            self.on(|s| ((), s.found(id, found, Instant::now())));
        }
    }

    /// How the writer refused a send, if it did within the dedupe window.
    async fn refusal(&self, conversation: &ConversationId, id: &ClientMsgId) -> Found {
        let send = SendKey {
            tenant: &self.tenant,
            conversation,
            sender: &self.sender,
            client_msg_id: id,
        };
        self.lookups
            .refusals
            .found(&send)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "reading sb_refused failed");
                Found::Nothing
            })
    }
}

/// The writer's `ack` (built without content: the writer does not know
/// what was sent) with the stored content added.
fn with_content(frame: Outbound, content: Content) -> Outbound {
    let Outbound::Frame(text) = &frame else {
        return frame;
    };
    match serde_json::from_str::<ServerFrame>(text.as_str()) {
        Ok(ack @ ServerFrame::Ack(SendAck { .. })) => Outbound::frame(&ack.showing_stored(content)),
        _ => frame,
    }
}
