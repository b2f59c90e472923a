//! Safety (v1.2): blocks between users, bans and slow mode in a
//! conversation, and the conversation settings that affect every member
//! (`PATCH /v1/conversations/{id}`). Shapes and their bounds only; who
//! may do what is the writer's to decide.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::channels::{ChannelSettings, Posting, Visibility, topic_refusal};
use crate::ids::UserId;
use crate::timestamp::Timestamp;

/// The longest slow mode: six hours between one member's messages.
pub const MAX_SLOW_MODE_SECS: u32 = 6 * 3600;
/// The longest retention a conversation may set: a hundred years.
pub const MAX_RETENTION_DAYS: u32 = 36_500;
/// The longest a disappearing message may live: a year.
pub const MAX_DISAPPEARING_SECS: u32 = 365 * 86_400;
/// The shortest: a disappearing message lives at least this long.
pub const MIN_DISAPPEARING_SECS: u32 = 5;

/// The settings of a conversation that affect every member (v1.2), as
/// the conversation object carries them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ConversationPolicy {
    /// A plain member may send once per this many seconds; 0: off.
    #[serde(default)]
    pub slow_mode_secs: u32,
    /// Messages older than this many days are erased; null: kept (or the
    /// tenant's default applies).
    #[serde(default)]
    pub retention_days: Option<u32>,
    /// Each message is erased this many seconds after it was sent; null:
    /// off.
    #[serde(default)]
    pub disappearing_secs: Option<u32>,
    /// Frozen (v1.3): no post, reaction, edit or member change but by
    /// owners and admins.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub frozen: bool,
}

impl ConversationPolicy {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// How long a message lives here, if not for ever: the shorter of the
    /// retention and the disappearing time.
    pub fn lifetime_ms(&self) -> Option<i64> {
        let retention = self.retention_days.map(|d| i64::from(d) * 86_400_000);
        let disappearing = self.disappearing_secs.map(|s| i64::from(s) * 1000);
        match (retention, disappearing) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The policy as it applies in a tenant whose default retention is
    /// `tenant_days`: the conversation's own `retention_days` if it has
    /// one, else the tenant's.
    pub fn with_tenant_retention(self, tenant_days: Option<u32>) -> Self {
        Self {
            retention_days: self.retention_days.or(tenant_days),
            ..self
        }
    }

    /// The policy with `patch` applied: an absent field stays as it is.
    pub fn patched(mut self, patch: &ConversationPatch) -> Self {
        if let Some(secs) = patch.slow_mode_secs {
            self.slow_mode_secs = secs;
        }
        if let Some(days) = patch.retention_days {
            self.retention_days = days;
        }
        if let Some(secs) = patch.disappearing_secs {
            self.disappearing_secs = secs;
        }
        if let Some(frozen) = patch.frozen {
            self.frozen = frozen;
        }
        self
    }
}

/// Body of `PATCH /v1/conversations/{id}` (v1.2): each field present
/// changes, each absent stays; `null` turns retention or disappearing
/// messages off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(extend("minProperties" = 1)))]
#[serde(deny_unknown_fields)]
pub struct ConversationPatch {
    /// 0 to 21600; 0 turns slow mode off (not null: absent leaves it).
    #[serde(
        default,
        deserialize_with = "not_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "u32", range(max = 21600)))]
    pub slow_mode_secs: Option<u32>,
    /// 1 to 36500, or null.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<u32>", range(min = 1, max = 36500))
    )]
    pub retention_days: Option<Option<u32>>,
    /// 5 to 31536000, or null.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<u32>", range(min = 5, max = 31536000))
    )]
    pub disappearing_secs: Option<Option<u32>>,
    /// The conversation's own fields to set (v1.3): each key given is set,
    /// a key given as `null` is removed, the others stay; at most 4096
    /// bytes of JSON as a whole after the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<Map<String, Value>>,
    /// `"private"` or `"public"` (v1.3; groups and channels).
    #[serde(
        default,
        deserialize_with = "not_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Visibility"))]
    pub visibility: Option<Visibility>,
    /// `"everyone"` or `"admins"` (v1.3; groups and channels).
    #[serde(
        default,
        deserialize_with = "not_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Posting"))]
    pub posting: Option<Posting>,
    /// At most 250 characters, or null for none (v1.3).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<String>", length(max = 250))
    )]
    pub topic: Option<Option<String>>,
    /// Whether users who join from now on read the history from before
    /// their join (v1.3).
    #[serde(
        default,
        deserialize_with = "not_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "bool"))]
    pub history_visible_to_new_members: Option<bool>,
    /// `true` freezes the conversation, `false` thaws it (v1.3; groups
    /// and channels).
    #[serde(
        default,
        deserialize_with = "not_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "bool"))]
    pub frozen: Option<bool>,
}

/// A field that, when present, is a value (`null` is refused).
fn not_null<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A field that is present, `null` or not: `Some(None)` for `null`, where
/// an absent field stays `None` (serde's `default`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

impl ConversationPatch {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Why the patch is out of bounds, if it is.
    pub fn check(&self) -> Result<(), String> {
        if let Some(secs) = self.slow_mode_secs
            && secs > MAX_SLOW_MODE_SECS
        {
            return Err(format!(
                "slow_mode_secs is at most {MAX_SLOW_MODE_SECS} (0 turns it off)"
            ));
        }
        if let Some(Some(days)) = self.retention_days
            && !(1..=MAX_RETENTION_DAYS).contains(&days)
        {
            return Err(format!(
                "retention_days is 1 to {MAX_RETENTION_DAYS}, or null for none"
            ));
        }
        if let Some(Some(secs)) = self.disappearing_secs
            && !(MIN_DISAPPEARING_SECS..=MAX_DISAPPEARING_SECS).contains(&secs)
        {
            return Err(format!(
                "disappearing_secs is {MIN_DISAPPEARING_SECS} to {MAX_DISAPPEARING_SECS}, or null for off"
            ));
        }
        if let Some(Some(topic)) = &self.topic
            && let Some(why) = topic_refusal(topic)
        {
            return Err(why);
        }
        if self.is_empty() {
            return Err(
                "name at least one of slow_mode_secs, retention_days, disappearing_secs, \
                 custom, visibility, posting, topic, history_visible_to_new_members"
                    .into(),
            );
        }
        Ok(())
    }

    /// Whether it changes a channel setting (v1.3), which only groups and
    /// channels have.
    pub fn names_channel_settings(&self) -> bool {
        self.visibility.is_some()
            || self.posting.is_some()
            || self.topic.is_some()
            || self.history_visible_to_new_members.is_some()
    }
}

impl ChannelSettings {
    /// The settings with `patch` applied: an absent field stays as it is;
    /// an empty topic is none.
    pub fn patched(mut self, patch: &ConversationPatch) -> Self {
        if let Some(v) = patch.visibility {
            self.visibility = v;
        }
        if let Some(p) = patch.posting {
            self.posting = p;
        }
        if let Some(topic) = &patch.topic {
            self.topic = topic.clone().filter(|t| !t.trim().is_empty());
        }
        if let Some(h) = patch.history_visible_to_new_members {
            self.history_visible_to_new_members = h;
        }
        self
    }
}

/// Body of `POST /v1/conversations/{id}/bans` (v1.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BanRequest {
    pub user_id: UserId,
    /// When the ban ends by itself; absent or null: until it is lifted.
    #[serde(default)]
    pub until: Option<Timestamp>,
}

/// A user kept out of a conversation (v1.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Ban {
    pub user_id: UserId,
    /// Who banned them.
    pub by: UserId,
    pub banned_at: Timestamp,
    /// When it ends by itself; null: until lifted.
    pub until: Option<Timestamp>,
}

impl Ban {
    /// Whether the ban keeps its user out at `now`.
    pub fn holds_at(&self, now: Timestamp) -> bool {
        self.until.is_none_or(|until| until > now)
    }
}

/// `GET /v1/conversations/{id}/bans`: the bans in force, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BanList {
    pub bans: Vec<Ban>,
}

/// A user the caller blocked (v1.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Block {
    pub user_id: UserId,
    pub blocked_at: Timestamp,
}

/// `GET /v1/blocks`: the caller's blocks, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BlockList {
    pub blocks: Vec<Block>,
}

/// What a `blocks_changed` event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BlockAction {
    Block,
    Unblock,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_tells_null_from_absent() {
        let p: ConversationPatch = serde_json::from_str(r#"{"retention_days": null}"#).unwrap();
        assert_eq!(p.retention_days, Some(None));
        assert_eq!(p.disappearing_secs, None);
        let before = ConversationPolicy {
            slow_mode_secs: 10,
            retention_days: Some(30),
            disappearing_secs: Some(60),
            frozen: false,
        };
        let after = before.patched(&p);
        assert_eq!(after.retention_days, None);
        assert_eq!(after.disappearing_secs, Some(60));
        assert_eq!(after.slow_mode_secs, 10);
    }

    #[test]
    fn bounds_hold_at_and_just_past_each_limit() {
        let slow = |s| ConversationPatch {
            slow_mode_secs: Some(s),
            ..Default::default()
        };
        assert!(slow(MAX_SLOW_MODE_SECS).check().is_ok());
        assert!(slow(MAX_SLOW_MODE_SECS + 1).check().is_err());
        assert!(slow(0).check().is_ok());
        let days = |d| ConversationPatch {
            retention_days: Some(d),
            ..Default::default()
        };
        assert!(days(Some(1)).check().is_ok());
        assert!(days(Some(0)).check().is_err());
        assert!(days(Some(MAX_RETENTION_DAYS)).check().is_ok());
        assert!(days(Some(MAX_RETENTION_DAYS + 1)).check().is_err());
        assert!(days(None).check().is_ok());
        let gone = |s| ConversationPatch {
            disappearing_secs: Some(s),
            ..Default::default()
        };
        assert!(gone(Some(MIN_DISAPPEARING_SECS)).check().is_ok());
        assert!(gone(Some(MIN_DISAPPEARING_SECS - 1)).check().is_err());
        assert!(gone(Some(MAX_DISAPPEARING_SECS)).check().is_ok());
        assert!(gone(Some(MAX_DISAPPEARING_SECS + 1)).check().is_err());
        assert!(ConversationPatch::default().check().is_err());
        assert!(serde_json::from_str::<ConversationPatch>(r#"{"title":"x"}"#).is_err());
        assert!(serde_json::from_str::<ConversationPatch>(r#"{"slow_mode_secs":null}"#).is_err());
    }

    #[test]
    fn a_ban_ends_at_its_until() {
        let ban = Ban {
            user_id: UserId::new("u").unwrap(),
            by: UserId::new("o").unwrap(),
            banned_at: Timestamp::from_unix_ms(0),
            until: Some(Timestamp::from_unix_ms(1000)),
        };
        assert!(ban.holds_at(Timestamp::from_unix_ms(999)));
        assert!(!ban.holds_at(Timestamp::from_unix_ms(1000)));
    }
}
