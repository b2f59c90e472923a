//! Scheduled sends (v1.2): a `send_message` (or REST send) with `send_at`
//! is checked for what can be checked now and kept on `SB_SCHEDULED`
//! (`switchboard_nats::scheduled`); a worker sends it at its time, when
//! moderation, membership and its `seq` are decided
//! (`worker/src/duties/scheduler.rs`).

use switchboard_nats::scheduled::{ScheduledSend, scheduled_id};
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::scheduled::{MAX_PENDING_PER_USER, send_at_refusal};
use switchboard_protocol::{ClientMsgId, Content, ConversationId, ErrorCode, Timestamp};

use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;

/// A send to keep until `send_at`.
pub(crate) struct ToSchedule {
    pub conversation: ConversationId,
    pub client_msg_id: ClientMsgId,
    pub content: Content,
    pub options: SendOptions,
    pub send_at: Timestamp,
}

impl Gateway {
    /// Keeps a send until its `send_at`, after what can be checked now:
    /// the time (ahead, at most 30 days), the content's limits, the
    /// mentions' count, the caller's membership, the media, and at most
    /// 100 waiting per user. Scheduling the same `client_msg_id` again is
    /// the same schedule. Returns its id.
    pub(crate) async fn schedule_send(
        &self,
        id: &Identity,
        send: ToSchedule,
    ) -> Result<String, ApiError> {
        if let Some(why) = send_at_refusal(send.send_at, Timestamp::now()) {
            return Err(ApiError::invalid(why));
        }
        self.check_shape(id, &send.content, &send.options)?;
        // A poll scheduled must still take votes when it goes (v1.3).
        if let Content::Poll(poll) = &send.content
            && let Err(e) = poll.check_closes_at(send.send_at)
        {
            return Err(ApiError::invalid(format!("{e} (after send_at)")));
        }
        self.store
            .members(&id.tenant, &send.conversation, &id.user)
            .await?;
        if let Some(media) = send.content.media() {
            self.check_media(id, media).await?;
        }
        let scheduled_id = scheduled_id(
            &id.tenant,
            &send.conversation,
            &id.user,
            &send.client_msg_id,
        );
        let _counting = self.scheduling.of(id).lock().await;
        let pending = self.schedules.pending_ids(&id.tenant, &id.user).await?;
        if pending.len() >= MAX_PENDING_PER_USER && !pending.contains(&scheduled_id) {
            return Err(ApiError::new(
                ErrorCode::QuotaExceeded,
                format!(
                    "at most {MAX_PENDING_PER_USER} scheduled messages wait per user; cancel one or wait for one to go"
                ),
            ));
        }
        let record = ScheduledSend {
            scheduled_id: scheduled_id.clone(),
            tenant: id.tenant.clone(),
            sender: id.user.clone(),
            device: id.device.clone(),
            conversation_id: send.conversation,
            client_msg_id: send.client_msg_id,
            content: send.content,
            options: send.options,
            send_at: send.send_at,
            created_at: Timestamp::now(),
        };
        self.schedules.put(&record).await?;
        crate::metrics::scheduled();
        Ok(scheduled_id)
    }
}
