//! Scheduled sends (v1.2) on the stream `SB_SCHEDULED`, with JetStream's
//! own message scheduling (nats-server 2.12 and later), so a waiting
//! message is as durable as any command and no process keeps a timer.
//!
//! | subject | carries |
//! |---|---|
//! | `sb.sched.def.<tenant>.<user>.<scheduled_id>` | the schedule: header `Nats-Schedule: @at <send_at>`, body a [`ScheduledSend`] |
//! | `sb.sched.due.<tenant>.<user>.<scheduled_id>` | what the server publishes at `send_at` (and deletes the schedule): the same body, for the workers' `scheduler` consumer |
//!
//! A schedule is its subject: publishing it again replaces it, purging
//! the subject cancels it. Its id is a digest of the send's idempotency
//! key, so scheduling again with the same `client_msg_id` is the same
//! schedule.

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::scheduled::ScheduledMessage;
use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, DeviceId, TenantId, Timestamp, UserId,
};

use crate::BackboneError;
use crate::definitions::SCHEDULED_STREAM;
use crate::envelope::send_dedupe_id;
use crate::subject::token;

pub const DEFINITIONS_PREFIX: &str = "sb.sched.def";
pub const DUE_PREFIX: &str = "sb.sched.due";
/// The workers' consumer of due sends.
pub const DUE_FILTER: &str = "sb.sched.due.>";

/// A send waiting for its time: what a `send_message` with `send_at`
/// said, and who said it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledSend {
    pub scheduled_id: String,
    pub tenant: TenantId,
    pub sender: UserId,
    pub device: DeviceId,
    pub conversation_id: ConversationId,
    pub client_msg_id: ClientMsgId,
    pub content: Content,
    #[serde(default, skip_serializing_if = "SendOptions::is_empty")]
    pub options: SendOptions,
    pub send_at: Timestamp,
    pub created_at: Timestamp,
}

impl ScheduledSend {
    /// As its sender lists it.
    pub fn view(&self) -> ScheduledMessage {
        ScheduledMessage {
            scheduled_id: self.scheduled_id.clone(),
            conversation_id: self.conversation_id.clone(),
            client_msg_id: self.client_msg_id.clone(),
            content: self.content.clone(),
            send_at: self.send_at,
            created_at: self.created_at,
            reply_to: self.options.reply_to,
            thread_id: self.options.thread_id,
            mentions: self.options.mentions.clone(),
            mention_all: self.options.mention_all,
            custom: self.options.custom.clone(),
        }
    }
}

/// The id of the schedule of a send: the first 24 hex digits of the
/// digest its dedupe id is ([`send_dedupe_id`]), so it is the send's
/// idempotency key's.
pub fn scheduled_id(
    tenant: &TenantId,
    conversation: &ConversationId,
    sender: &UserId,
    client_msg_id: &ClientMsgId,
) -> String {
    let dedupe = send_dedupe_id(tenant, conversation, sender, client_msg_id);
    dedupe.trim_start_matches("s-").chars().take(24).collect()
}

/// Whether `id` can be a scheduled id (so it may go into a subject).
pub fn is_scheduled_id(id: &str) -> bool {
    id.len() == 24 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

fn user_subjects(prefix: &str, tenant: &TenantId, user: &UserId) -> String {
    format!(
        "{prefix}.{}.{}",
        token(tenant.as_str()),
        token(user.as_str())
    )
}

fn definition_subject(tenant: &TenantId, user: &UserId, id: &str) -> String {
    format!("{}.{id}", user_subjects(DEFINITIONS_PREFIX, tenant, user))
}

fn due_subject(tenant: &TenantId, user: &UserId, id: &str) -> String {
    format!("{}.{id}", user_subjects(DUE_PREFIX, tenant, user))
}

/// The scheduled sends of every user, on `SB_SCHEDULED`.
#[derive(Clone)]
pub struct Schedules {
    js: jetstream::Context,
}

impl Schedules {
    pub fn new(js: jetstream::Context) -> Self {
        Self { js }
    }

    async fn stream(&self) -> Result<stream::Stream, BackboneError> {
        self.js
            .get_stream(SCHEDULED_STREAM)
            .await
            .map_err(|e| BackboneError::nats(format!("stream {SCHEDULED_STREAM}"), e))
    }

    /// The ids of `user`'s waiting sends.
    pub async fn pending_ids(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> Result<Vec<String>, BackboneError> {
        let stream = self.stream().await?;
        let filter = format!("{}.*", user_subjects(DEFINITIONS_PREFIX, tenant, user));
        let mut subjects = stream
            .info_with_subjects(filter)
            .await
            .map_err(|e| BackboneError::nats(format!("stream {SCHEDULED_STREAM} subjects"), e))?;
        let mut ids = Vec::new();
        while let Some(subject) = subjects.next().await {
            let (subject, _count) = subject.map_err(|e| {
                BackboneError::nats(format!("stream {SCHEDULED_STREAM} subjects"), e)
            })?;
            if let Some(id) = subject.rsplit('.').next() {
                ids.push(id.to_owned());
            }
        }
        Ok(ids)
    }

    /// Keeps `send` until its `send_at`: the server publishes it as due
    /// then. Scheduling the same send again (its id is its idempotency
    /// key's) replaces it.
    pub async fn put(&self, send: &ScheduledSend) -> Result<(), BackboneError> {
        let body = serde_json::to_vec(send).map_err(BackboneError::encoding)?;
        let mut headers = HeaderMap::new();
        headers.insert(
            "Nats-Schedule",
            format!("@at {}", send.send_at.to_rfc3339()).as_str(),
        );
        let due = due_subject(&send.tenant, &send.sender, &send.scheduled_id);
        headers.insert("Nats-Schedule-Target", due.as_str());
        // No dedupe id: scheduling the same send again within the dedupe
        // window must replace it (its subject holds one schedule).
        let subject = definition_subject(&send.tenant, &send.sender, &send.scheduled_id);
        self.js
            .publish_with_headers(subject, headers, body.into())
            .await
            .map_err(|e| BackboneError::nats("scheduling a send", e))?
            .await
            .map_err(|e| BackboneError::nats("scheduling a send", e))?;
        Ok(())
    }

    /// One waiting send of `user`, if it is still waiting.
    pub async fn get(
        &self,
        tenant: &TenantId,
        user: &UserId,
        id: &str,
    ) -> Result<Option<ScheduledSend>, BackboneError> {
        let stream = self.stream().await?;
        match stream
            .direct_get_last_for_subject(definition_subject(tenant, user, id))
            .await
        {
            Ok(message) => serde_json::from_slice(&message.payload)
                .map(Some)
                .map_err(BackboneError::encoding),
            Err(e) if e.kind() == stream::DirectGetErrorKind::NotFound => Ok(None),
            Err(e) => Err(BackboneError::nats("reading a scheduled send", e)),
        }
    }

    /// Every waiting send of `user`, soonest first (then in the order they
    /// were scheduled).
    pub async fn list(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> Result<Vec<ScheduledSend>, BackboneError> {
        let mut sends = Vec::new();
        for id in self.pending_ids(tenant, user).await? {
            if let Some(send) = self.get(tenant, user, &id).await? {
                sends.push(send);
            }
        }
        sends.sort_by(|a, b| {
            (a.send_at, a.created_at, &a.scheduled_id).cmp(&(
                b.send_at,
                b.created_at,
                &b.scheduled_id,
            ))
        });
        Ok(sends)
    }

    /// Cancels a waiting send: false when there was none (sent already,
    /// or never scheduled). A due copy not yet taken by a worker is
    /// purged with it, in case the schedule fired as it was cancelled.
    pub async fn cancel(
        &self,
        tenant: &TenantId,
        user: &UserId,
        id: &str,
    ) -> Result<bool, BackboneError> {
        if self.get(tenant, user, id).await?.is_none() {
            return Ok(false);
        }
        let stream = self.stream().await?;
        for subject in [
            definition_subject(tenant, user, id),
            due_subject(tenant, user, id),
        ] {
            stream
                .purge()
                .filter(subject)
                .await
                .map_err(|e| BackboneError::nats("cancelling a scheduled send", e))?;
        }
        Ok(true)
    }

    /// Forgets every waiting send of `user` (an erasure).
    pub async fn forget(&self, tenant: &TenantId, user: &UserId) -> Result<(), BackboneError> {
        let stream = self.stream().await?;
        for prefix in [DEFINITIONS_PREFIX, DUE_PREFIX] {
            stream
                .purge()
                .filter(format!("{}.*", user_subjects(prefix, tenant, user)))
                .await
                .map_err(|e| BackboneError::nats("forgetting scheduled sends", e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sends_schedule_id_is_its_idempotency_keys() {
        let t = TenantId::new("t").unwrap();
        let c = ConversationId::new("c.1").unwrap();
        let u = UserId::new("u@x").unwrap();
        let m = ClientMsgId::new("m").unwrap();
        let id = scheduled_id(&t, &c, &u, &m);
        assert!(is_scheduled_id(&id));
        assert_eq!(id, scheduled_id(&t, &c, &u, &m));
        assert_ne!(
            id,
            scheduled_id(&t, &c, &u, &ClientMsgId::new("n").unwrap())
        );
        assert!(!is_scheduled_id("../x"));
        assert_eq!(
            definition_subject(&t, &u, &id),
            format!("sb.sched.def.t.u@x.{id}")
        );
    }
}
