//! Scheduled messages (v1.2): a send with `send_at` is kept until then,
//! listed by `GET /v1/scheduled` and cancelled by `DELETE
//! /v1/scheduled/{scheduled_id}`.

use serde::{Deserialize, Serialize};

use crate::{ClientMsgId, Content, ConversationId, MessageId, Timestamp, UserId};

/// The furthest ahead a message may be scheduled.
pub const MAX_AHEAD_MS: i64 = 30 * 24 * 3600 * 1000;
/// The most messages one user may have waiting.
pub const MAX_PENDING_PER_USER: usize = 100;

/// Why `send_at` cannot stand, if it cannot: it must be after `now` and
/// at most [`MAX_AHEAD_MS`] after it.
pub fn send_at_refusal(send_at: Timestamp, now: Timestamp) -> Option<String> {
    let ahead = send_at.unix_ms() - now.unix_ms();
    if ahead <= 0 {
        return Some(format!("send_at {send_at} is not in the future"));
    }
    if ahead > MAX_AHEAD_MS {
        return Some(format!(
            "send_at {send_at} is more than 30 days ahead; schedule it later"
        ));
    }
    None
}

/// A message waiting for its time, as its sender sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScheduledMessage {
    pub scheduled_id: String,
    pub conversation_id: ConversationId,
    pub client_msg_id: ClientMsgId,
    pub content: Content,
    pub send_at: Timestamp,
    /// When it was scheduled.
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<MessageId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<MessageId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<UserId>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mention_all: bool,
    /// The message's `custom` fields (v1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `GET /v1/scheduled`: the caller's waiting messages, soonest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScheduledList {
    pub scheduled: Vec<ScheduledMessage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_at_is_in_the_future_and_at_most_thirty_days_ahead() {
        let now = Timestamp::from_unix_ms(1_000_000_000_000);
        let at = |ms: i64| Timestamp::from_unix_ms(1_000_000_000_000 + ms);
        assert!(send_at_refusal(at(0), now).is_some());
        assert!(send_at_refusal(at(-5), now).is_some());
        assert!(send_at_refusal(at(1), now).is_none());
        assert!(send_at_refusal(at(MAX_AHEAD_MS), now).is_none());
        assert!(send_at_refusal(at(MAX_AHEAD_MS + 1), now).is_some());
    }
}
