//! Public channels and invites (v1.3): a group's or channel's visibility,
//! who posts in its main timeline, its topic and what a newcomer reads;
//! the tenant's directory of public channels; invite codes. Shapes and
//! their bounds only: who may join or post is the writer's to decide.

use serde::{Deserialize, Serialize};

use crate::ids::{ConversationId, UserId};
use crate::timestamp::Timestamp;

/// The longest `topic`, in characters (Slack's bound).
pub const MAX_TOPIC_CHARS: usize = 250;
/// The most uses one invite may allow.
pub const MAX_INVITE_USES: u32 = 100_000;
/// How far ahead an invite may expire: 365 days.
pub const MAX_INVITE_DAYS: i64 = 365;
/// The most invites one conversation keeps at once (used-up and expired
/// ones count until revoked).
pub const MAX_INVITES: usize = 100;
/// The longest `q` of the directory, in characters.
pub const MAX_DIRECTORY_QUERY_CHARS: usize = 100;
/// A directory page holds 50 channels at most (20 by default).
pub const MAX_DIRECTORY_LIMIT: usize = 50;
pub const DEFAULT_DIRECTORY_LIMIT: usize = 20;
/// The most directory rows one page looks at while filtering by `q`: past
/// them the page ends early with a `next_cursor`.
pub const DIRECTORY_SCAN_ROWS: usize = 2000;
/// The length of an invite code: 12 characters of `A-Z a-z 0-9` (71 bits).
pub const INVITE_CODE_CHARS: usize = 12;

/// Who finds and joins a group or channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    /// Members add members; invites let others in.
    #[default]
    Private,
    /// Listed in the tenant's directory; any user of the tenant joins.
    Public,
}

/// Who posts in the main timeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Posting {
    #[default]
    Everyone,
    /// Owners and admins; plain members react and reply in threads.
    Admins,
}

/// A conversation's channel settings (v1.3), as the conversation object
/// carries them (each field at its default when never set).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ChannelSettings {
    #[serde(default)]
    pub visibility: Visibility,
    #[serde(default)]
    pub posting: Posting,
    /// What the conversation is about, shown in the directory; null: none.
    #[serde(default)]
    pub topic: Option<String>,
    /// Whether a user who joins (`join`, or an invite) reads the history
    /// from before they joined; false: from their join on.
    #[serde(default)]
    pub history_visible_to_new_members: bool,
}

impl ChannelSettings {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Why a topic is out of bounds, if it is.
pub fn topic_refusal(topic: &str) -> Option<String> {
    (topic.chars().count() > MAX_TOPIC_CHARS)
        .then(|| format!("topic is at most {MAX_TOPIC_CHARS} characters"))
}

/// One public channel of `GET /v1/channels`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ChannelEntry {
    pub conversation_id: ConversationId,
    pub title: Option<String>,
    pub topic: Option<String>,
    pub member_count: u64,
}

/// Body of `GET /v1/channels`: one page of the tenant's public channels,
/// oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ChannelDirectory {
    pub channels: Vec<ChannelEntry>,
    /// Pass as `cursor` for the next page; null on the last.
    pub next_cursor: Option<String>,
}

/// Body of `POST /v1/conversations/{id}/invites`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateInvite {
    /// How many users may join with it (1 to 100000); absent or null: no
    /// limit.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 100000)))]
    pub max_uses: Option<u32>,
    /// When it stops working (in the future, at most 365 days ahead);
    /// absent or null: never.
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
}

impl CreateInvite {
    /// Why the request is out of bounds at `now`, if it is.
    pub fn refusal(&self, now: Timestamp) -> Option<String> {
        if let Some(uses) = self.max_uses
            && !(1..=MAX_INVITE_USES).contains(&uses)
        {
            return Some(format!(
                "max_uses is 1 to {MAX_INVITE_USES}, or null for no limit"
            ));
        }
        if let Some(at) = self.expires_at {
            let ahead = at.unix_ms() - now.unix_ms();
            if ahead <= 0 || ahead > MAX_INVITE_DAYS * 86_400_000 {
                return Some(format!(
                    "expires_at is in the future, at most {MAX_INVITE_DAYS} days ahead, or null for never"
                ));
            }
        }
        None
    }
}

/// An invite code (v1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Invite {
    pub code: String,
    pub conversation_id: ConversationId,
    pub created_by: UserId,
    pub created_at: Timestamp,
    /// Null: no limit.
    pub max_uses: Option<u32>,
    /// How many users joined with it.
    pub uses: u32,
    /// Null: never.
    pub expires_at: Option<Timestamp>,
}

impl Invite {
    /// Why it no longer lets anyone in at `now`, if it does not.
    pub fn spent(&self, now: Timestamp) -> Option<&'static str> {
        if self.expires_at.is_some_and(|at| at <= now) {
            Some("this invite has expired")
        } else if self.max_uses.is_some_and(|max| self.uses >= max) {
            Some("this invite has been used as often as it may be")
        } else {
            None
        }
    }
}

/// Whether `code` has the shape of an invite code (so it may go into
/// keys): 1 to 64 characters of `A-Z a-z 0-9 - _`.
pub fn is_invite_code(code: &str) -> bool {
    (1..=64).contains(&code.len())
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Body of `GET /v1/conversations/{id}/invites`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct InviteList {
    pub invites: Vec<Invite>,
}

/// Body of `GET /v1/invites/{code}`: what an invite leads to, for the
/// user about to accept it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct InvitePreview {
    pub code: String,
    pub channel: ChannelEntry,
    pub expires_at: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn settings_default_to_a_private_channel_where_everyone_posts() {
        let s: ChannelSettings = serde_json::from_str("{}").unwrap();
        assert!(s.is_default());
        let s: ChannelSettings =
            serde_json::from_str(r#"{"visibility":"public","posting":"admins"}"#).unwrap();
        assert_eq!(
            (s.visibility, s.posting),
            (Visibility::Public, Posting::Admins)
        );
        assert!(serde_json::from_str::<ChannelSettings>(r#"{"visibility":"open"}"#).is_err());
    }

    #[test]
    fn topics_are_bounded_in_characters() {
        assert!(topic_refusal(&"é".repeat(MAX_TOPIC_CHARS)).is_none());
        assert!(topic_refusal(&"é".repeat(MAX_TOPIC_CHARS + 1)).is_some());
    }

    #[test]
    fn invite_requests_are_bounded() {
        let now = Timestamp::from_unix_ms(1_000_000);
        let at = |ms| Some(Timestamp::from_unix_ms(1_000_000 + ms));
        let ok = |uses, expires_at| {
            CreateInvite {
                max_uses: uses,
                expires_at,
            }
            .refusal(now)
            .is_none()
        };
        assert!(ok(None, None));
        assert!(ok(Some(1), None) && ok(Some(MAX_INVITE_USES), None));
        assert!(!ok(Some(0), None) && !ok(Some(MAX_INVITE_USES + 1), None));
        let year = MAX_INVITE_DAYS * 86_400_000;
        assert!(ok(None, at(year)) && ok(None, at(1)));
        assert!(!ok(None, at(year + 1)) && !ok(None, at(0)) && !ok(None, at(-5)));
    }

    #[test]
    fn an_invite_is_spent_by_time_or_uses() {
        let invite = Invite {
            code: "abc".into(),
            conversation_id: ConversationId::new("c1").unwrap(),
            created_by: UserId::new("u").unwrap(),
            created_at: Timestamp::from_unix_ms(0),
            max_uses: Some(2),
            uses: 1,
            expires_at: Some(Timestamp::from_unix_ms(10)),
        };
        assert!(invite.spent(Timestamp::from_unix_ms(9)).is_none());
        assert!(invite.spent(Timestamp::from_unix_ms(10)).is_some());
        let used = Invite { uses: 2, ..invite };
        assert!(used.spent(Timestamp::from_unix_ms(0)).is_some());
        assert!(is_invite_code("aZ09-_") && !is_invite_code("") && !is_invite_code("a.b"));
        assert!(!is_invite_code(&"a".repeat(65)));
    }
}
