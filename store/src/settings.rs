//! A conversation's settings as each store keeps them: one JSON document
//! in one row per conversation.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_protocol::safety::ConversationPolicy;

/// The policy (v1.2, as its own fields, so rows written before v1.3 read
/// the same) and the conversation's `custom` fields (v1.3).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationSettings {
    #[serde(flatten)]
    pub policy: ConversationPolicy,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub custom: Map<String, Value>,
}

impl ConversationSettings {
    /// Whether there is nothing to keep (the row goes).
    pub fn is_default(&self) -> bool {
        self.policy.is_default() && self.custom.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row written before v1.3 (the policy alone) reads as settings
    /// without custom fields, and one with custom fields reads as the
    /// policy alone where only the policy is wanted (the expiry scans).
    #[test]
    fn rows_of_either_release_read_both_ways() {
        let old = r#"{"slow_mode_secs":5,"retention_days":7,"disappearing_secs":null}"#;
        let read: ConversationSettings = serde_json::from_str(old).unwrap();
        assert_eq!(read.policy.retention_days, Some(7));
        assert!(read.custom.is_empty());
        let new = serde_json::to_string(&ConversationSettings {
            custom: serde_json::from_str(r#"{"topic":"x"}"#).unwrap(),
            ..read.clone()
        })
        .unwrap();
        let policy: ConversationPolicy = serde_json::from_str(&new).unwrap();
        assert_eq!(policy, read.policy);
    }
}
