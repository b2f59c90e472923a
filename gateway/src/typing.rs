//! Typing indicators (F8): ephemeral, relayed over core NATS to the other
//! members' event subjects, never stored. Only gateways where a member is
//! connected subscribe, so only connected members hear it; the others never
//! will. The server keeps no state: a `start` carries `expires_in_ms`, and a
//! client that keeps typing sends `start` again before it runs out.
//! Conversations that fan out on read get no typing indicators, nor does
//! anyone from a shadow-banned user.

use std::sync::Arc;

use switchboard_nats::envelope::frame_event;
use switchboard_plugin_host::fanout::FanOut;
use switchboard_protocol::{ConversationId, ServerFrame, TypingState};

use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::outbox::{Outbound, Outbox};

/// Checks membership (every time: a removed member must stop hearing at
/// once) and relays the indicator to the other members. `request` is the
/// type of the frame that asked, for an `error` answering it.
pub(crate) async fn relay(
    gw: Arc<Gateway>,
    id: Identity,
    request: &'static str,
    conversation: ConversationId,
    state: TypingState,
    tx: Outbox,
) {
    let (kind, members) = match gw.store.members(&id.tenant, &conversation, &id.user).await {
        Ok(found) => found,
        Err(e) => {
            let refusal = ApiError::from(e).answering(request, None, Some(conversation.as_str()));
            let _ = tx.send(Outbound::frame(&refusal)).await;
            return;
        }
    };
    if gw.fan_out(&id.tenant, kind, members.len()) == FanOut::Read {
        return;
    }
    // A shadow-banned user's typing (v1.3) would tell the others of
    // messages they never get.
    if gw
        .tenants
        .bans()
        .shadowed(&id.tenant, &id.user, switchboard_protocol::Timestamp::now())
    {
        return;
    }
    let event = frame_event(&ServerFrame::Typing {
        conversation_id: conversation,
        user_id: id.user.clone(),
        state,
        expires_in_ms: gw.config.typing_expiry.as_millis() as u64,
    });
    let others = members.iter().filter(|m| **m != id.user);
    if let Err(e) = gw.publish_to_users(&id.tenant, others, &event).await {
        tracing::debug!(error = %e, "relaying typing failed");
    }
}
