//! Sends a writer refused, remembered for the ingest streams' dedupe
//! window (`sb_refused`).
//!
//! A client that resends a `send_message` with the same `client_msg_id`
//! (it lost the answer, say) is answered by the gateway: JetStream drops
//! the resend as a duplicate, so the writer never sees it. If the original
//! was stored, the store has it; if it was refused, this bucket does. With
//! neither, the original is still on its way and its writer answers.

use std::sync::Arc;

use async_nats::jetstream::{self, kv};
use serde::{Deserialize, Serialize};
use switchboard_protocol::{ClientMsgId, ConversationId, ErrorCode, TenantId, UserId};

use crate::BackboneError;
use crate::answers::Found;
use crate::definitions::REFUSED_BUCKET;
use crate::kv_key::part;

/// Why a send was refused, as its sender was told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

/// One send, as the dedupe window knows it.
pub struct SendKey<'a> {
    pub tenant: &'a TenantId,
    pub conversation: &'a ConversationId,
    pub sender: &'a UserId,
    pub client_msg_id: &'a ClientMsgId,
}

impl SendKey<'_> {
    fn key(&self) -> String {
        format!(
            "{}.{}.{}.{}",
            part(self.tenant.as_str()),
            part(self.conversation.as_str()),
            part(self.sender.as_str()),
            part(self.client_msg_id.as_str())
        )
    }
}

/// Cheap to clone: every connection's answering holds one, and a
/// `kv::Store` carries its stream's whole description (about 1.5 KiB
/// inline, more on the heap), so the handle is shared.
#[derive(Clone)]
pub struct Refusals {
    kv: Arc<kv::Store>,
}

impl Refusals {
    pub async fn open(js: &jetstream::Context) -> Result<Self, BackboneError> {
        let kv = js
            .get_key_value(REFUSED_BUCKET)
            .await
            .map_err(|e| BackboneError::nats(format!("bucket {REFUSED_BUCKET}"), e))?;
        Ok(Self { kv: Arc::new(kv) })
    }

    pub async fn record(&self, send: &SendKey<'_>, refusal: &Refusal) -> Result<(), BackboneError> {
        let body = serde_json::to_vec(refusal).map_err(BackboneError::encoding)?;
        self.kv
            .put(send.key(), body.into())
            .await
            .map_err(|e| BackboneError::nats("recording a refusal", e))?;
        Ok(())
    }

    /// What a waiting send's answer learns here: how its writer refused
    /// it (within the dedupe window), or nothing.
    pub async fn found(&self, send: &SendKey<'_>) -> Result<Found, BackboneError> {
        Ok(match self.find(send).await? {
            Some(refusal) => Found::Refused {
                code: refusal.code,
                message: refusal.message,
            },
            None => Found::Nothing,
        })
    }

    pub async fn find(&self, send: &SendKey<'_>) -> Result<Option<Refusal>, BackboneError> {
        let entry = self
            .kv
            .get(send.key())
            .await
            .map_err(|e| BackboneError::nats("reading a refusal", e))?;
        match entry {
            Some(body) => serde_json::from_slice(&body)
                .map(Some)
                .map_err(BackboneError::encoding),
            None => Ok(None),
        }
    }
}
