//! A connection's place on this gateway, taken before the WebSocket
//! upgrade is answered: the device registered, the user routed here by
//! every router of events, the outbound queue and the sends' answering in
//! place. Once a client sees its socket open, every message stored from
//! then on reaches it live.

use std::sync::Arc;
use std::time::Duration;

use switchboard_protocol::Timestamp;

use crate::Gateway;
use crate::answering::{Answering, Lookups};
use crate::auth::Identity;
use crate::hub::Registration;
use crate::outbox::{Outbox, OutboxReader, outbox};
use switchboard_nats::answers::SendLimits;

/// A send unanswered this long is looked up in the store, and again as
/// often: its writer's answer was lost without a reconnect to tell (a
/// delivery dropped on the way).
const OVERDUE: Duration = Duration::from_secs(5);

/// A send unanswered this long is given up on: the client resends it
/// with the same `client_msg_id` (the SDK does after 10 s), and that is
/// answered.
const GIVE_UP: Duration = Duration::from_secs(30);

/// Leaves the hub when dropped, unless `serve` took its parts.
pub(crate) struct Session {
    pub(super) gw: Arc<Gateway>,
    /// Taken by `serve`; still here when dropped only if the upgrade never
    /// happened.
    pub(super) parts: Option<SessionParts>,
}

pub(super) struct SessionParts {
    pub(super) registration: Registration,
    pub(super) tx: Outbox,
    pub(super) rx: OutboxReader,
    pub(super) answering: Arc<Answering>,
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
    let limits = &gw.config.limits;
    let (tx, rx) = outbox(limits.outbound_queue_bytes);
    let answering = Answering::new(
        SendLimits {
            max_waiting: limits.max_inflight_sends,
            max_unstored_bytes: limits.max_inflight_send_bytes,
            overdue: OVERDUE,
            give_up: GIVE_UP,
        },
        tx.clone(),
        Lookups {
            store: gw.store.clone(),
            refusals: gw.refusals.clone(),
        },
        id.tenant.clone(),
        id.user.clone(),
    );
    let registration = gw
        .hub
        .join(
            &id.tenant,
            &id.user,
            &id.device,
            tx.clone(),
            answering.clone(),
        )
        .await?;
    Ok(Session {
        gw: gw.clone(),
        parts: Some(SessionParts {
            registration,
            tx,
            rx,
            answering,
        }),
    })
}

/// When a session on a token expiring at `exp` (Unix seconds) ends.
pub(super) fn session_end(exp: u64, grace: Duration) -> tokio::time::Instant {
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
