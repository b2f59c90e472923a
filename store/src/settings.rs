//! A conversation's settings as each store keeps them: one JSON document
//! in one row per conversation.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_protocol::channels::ChannelSettings;
use switchboard_protocol::moderation::Mute;
use switchboard_protocol::safety::ConversationPolicy;

/// The policy (v1.2, as its own fields, so rows written before v1.3 read
/// the same), the conversation's `custom` fields and its channel
/// settings (v1.3, also as their own fields).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationSettings {
    #[serde(flatten)]
    pub policy: ConversationPolicy,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub custom: Map<String, Value>,
    #[serde(flatten)]
    pub channel: ChannelSettings,
    /// The members muted here (v1.3), ended mutes included until lifted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mutes: Vec<Mute>,
}

impl ConversationSettings {
    /// Whether there is nothing to keep (the row goes).
    pub fn is_default(&self) -> bool {
        self.policy.is_default()
            && self.custom.is_empty()
            && self.channel.is_default()
            && self.mutes.is_empty()
    }

    /// Whether the conversation is in its tenant's directory.
    pub fn listed(&self) -> bool {
        self.channel.visibility == switchboard_protocol::channels::Visibility::Public
    }
}

/// A public channel's row in its tenant's directory (v1.3): what `q`
/// looks at, kept beside the settings by the same commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub topic: Option<String>,
}

impl Listing {
    /// Whether `words` (lower case) is in its title or topic, ignoring case.
    pub fn matches(&self, words: &str) -> bool {
        [&self.title, &self.topic]
            .into_iter()
            .flatten()
            .any(|s| s.to_lowercase().contains(words))
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
            channel: serde_json::from_str(r#"{"visibility":"public","topic":"t"}"#).unwrap(),
            ..read.clone()
        })
        .unwrap();
        let policy: ConversationPolicy = serde_json::from_str(&new).unwrap();
        assert_eq!(policy, read.policy);
    }
}
