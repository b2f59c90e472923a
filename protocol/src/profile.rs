//! Profiles (v1.3): what a user shows of themselves (a display name, an
//! avatar, a status) and the fields their tenant's admins keep about them
//! (`custom`). Shapes and their bounds; who may change what is decided
//! where the change comes in.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fields::present;
use crate::ids::UserId;
use crate::timestamp::Timestamp;

/// The longest display name, in characters.
pub const MAX_DISPLAY_NAME_CHARS: usize = 64;
/// The longest status text, in characters.
pub const MAX_STATUS_TEXT_CHARS: usize = 140;
/// The longest status emoji, in bytes (one emoji may be several code
/// points joined).
pub const MAX_STATUS_EMOJI_BYTES: usize = 32;
pub use crate::custom::MAX_CUSTOM_BYTES;
/// The most profiles one `GET /v1/users?ids=` reads.
pub const MAX_PROFILE_IDS: usize = 100;

/// A user's profile, as `GET /v1/users/{user}` and `profile_updated` carry
/// it. A user who never set anything has every field empty and
/// `updated_at: null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Profile {
    pub user_id: UserId,
    pub display_name: Option<String>,
    /// A `blob_ref` of an image the user uploaded: `GET /v1/media/{avatar}`
    /// serves it to every user of the tenant.
    pub avatar: Option<String>,
    /// Shown until `expires_at`; null once past it.
    pub status: Option<Status>,
    /// Set by the tenant's admins only; at most 4 KiB of JSON.
    #[serde(default)]
    pub custom: Map<String, Value>,
    /// When it last changed; null for a profile never set.
    pub updated_at: Option<Timestamp>,
}

/// A user's status line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Status {
    /// At most 140 characters; a status with neither text nor emoji is
    /// none (setting one clears it).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(max = 140)))]
    pub text: String,
    /// At most 32 bytes.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 32)))]
    pub emoji: Option<String>,
    /// When the status clears by itself; null: it stays. Must be in the
    /// future when set.
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
}

/// A [`Status`] as a request gives it, for the documents: each field may
/// be left out (a response has them all, null where unset).
#[cfg(feature = "schema")]
#[derive(schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct StatusChange {
    /// At most 140 characters; may be left out when there is an emoji.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 140))]
    text: String,
    /// At most 32 bytes, or null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    emoji: Option<String>,
    /// When the status clears by itself: in the future, or null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<Timestamp>,
}

/// The answer of `GET /v1/users?ids=`: the profiles in the order asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProfileList {
    pub users: Vec<Profile>,
}

/// Body of `PATCH /v1/me/profile`: each field present changes, each
/// absent stays; `null` clears.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(extend("minProperties" = 1)))]
#[serde(deny_unknown_fields)]
pub struct ProfilePatch {
    /// 1 to 64 characters, or null.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<String>", length(min = 1, max = 64))
    )]
    pub display_name: Option<Option<String>>,
    /// A `blob_ref` of an image the caller uploaded, or null.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<String>", length(min = 1, max = 256))
    )]
    pub avatar: Option<Option<String>>,
    /// The status, or null to clear it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<StatusChange>"))]
    pub status: Option<Option<Status>>,
    /// Keys to set in `custom` (a key with `null` is removed; at most 4096
    /// bytes of JSON once merged): tenant admins only, 403 for anyone
    /// else (`PATCH /v1/admin/users/{user}/profile` sets anyone's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<Map<String, Value>>,
}

/// Body of `PATCH /v1/admin/users/{user}/profile`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CustomPatch {
    /// Keys to set (a key with `null` is removed); the result is at most
    /// 4 KiB of JSON.
    pub custom: Map<String, Value>,
}

/// Why a profile change is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("the patch changes nothing: give at least one field")]
    Empty,
    #[error(
        "display_name must be 1 to {MAX_DISPLAY_NAME_CHARS} characters without control characters"
    )]
    DisplayName,
    #[error(
        "status.text must be at most {MAX_STATUS_TEXT_CHARS} characters without control characters"
    )]
    StatusText,
    #[error("status.emoji must be 1 to {MAX_STATUS_EMOJI_BYTES} bytes without control characters")]
    StatusEmoji,
    #[error("status.expires_at must be in the future")]
    StatusExpired,
    #[error("custom must be at most {MAX_CUSTOM_BYTES} bytes of JSON")]
    CustomTooLarge,
}

fn plain(s: &str) -> bool {
    !s.chars().any(char::is_control)
}

impl ProfilePatch {
    /// Whether it changes `custom` and nothing else: what a tenant admin
    /// may do to another user's profile.
    pub fn custom_only(&self) -> bool {
        self.display_name.is_none() && self.avatar.is_none() && self.status.is_none()
    }

    /// Why the patch is out of bounds at `now`, if it is. `custom` is
    /// checked as a whole once merged ([`Profile::patched`]).
    pub fn check(&self, now: Timestamp) -> Result<(), ProfileError> {
        if *self == Self::default() {
            return Err(ProfileError::Empty);
        }
        if let Some(Some(name)) = &self.display_name {
            let n = name.chars().count();
            if n == 0 || n > MAX_DISPLAY_NAME_CHARS || !plain(name) || name.trim().is_empty() {
                return Err(ProfileError::DisplayName);
            }
        }
        if let Some(Some(status)) = &self.status {
            if status.text.chars().count() > MAX_STATUS_TEXT_CHARS || !plain(&status.text) {
                return Err(ProfileError::StatusText);
            }
            if let Some(emoji) = &status.emoji
                && (emoji.is_empty() || emoji.len() > MAX_STATUS_EMOJI_BYTES || !plain(emoji))
            {
                return Err(ProfileError::StatusEmoji);
            }
            if status.expires_at.is_some_and(|at| at <= now) {
                return Err(ProfileError::StatusExpired);
            }
        }
        Ok(())
    }
}

impl Profile {
    /// The profile of a user who never set one.
    pub fn empty(user_id: UserId) -> Self {
        Self {
            user_id,
            display_name: None,
            avatar: None,
            status: None,
            custom: Map::new(),
            updated_at: None,
        }
    }

    /// The profile with `patch` applied at `at`: absent fields stay,
    /// `null` clears, `custom` merges key by key. Refused when the merged
    /// `custom` is too large.
    pub fn patched(&self, patch: &ProfilePatch, at: Timestamp) -> Result<Self, ProfileError> {
        let mut next = self.clone();
        if let Some(name) = &patch.display_name {
            next.display_name.clone_from(name);
        }
        if let Some(avatar) = &patch.avatar {
            next.avatar.clone_from(avatar);
        }
        if let Some(status) = &patch.status {
            // A status with neither text nor emoji is none.
            next.status = status
                .clone()
                .filter(|s| !s.text.trim().is_empty() || s.emoji.is_some());
        }
        if let Some(custom) = &patch.custom {
            next.custom =
                crate::custom::merged(&next.custom, custom).ok_or(ProfileError::CustomTooLarge)?;
        }
        if next != *self {
            next.updated_at = Some(at);
        }
        Ok(next)
    }

    /// The profile as readers see it at `now`: a status past its
    /// `expires_at` is gone.
    pub fn seen_at(mut self, now: Timestamp) -> Self {
        if self
            .status
            .as_ref()
            .and_then(|s| s.expires_at)
            .is_some_and(|at| at <= now)
        {
            self.status = None;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn now() -> Timestamp {
        Timestamp::from_unix_ms(1_000_000)
    }

    fn patch(json: &str) -> ProfilePatch {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn absent_fields_stay_and_null_clears() {
        let alice = UserId::new("alice").unwrap();
        let p = Profile::empty(alice)
            .patched(&patch(r#"{"display_name":"Alice","avatar":"b1"}"#), now())
            .unwrap();
        assert_eq!(p.display_name.as_deref(), Some("Alice"));
        assert_eq!(p.updated_at, Some(now()));
        let later = Timestamp::from_unix_ms(2_000_000);
        let q = p.patched(&patch(r#"{"avatar":null}"#), later).unwrap();
        assert_eq!(q.display_name.as_deref(), Some("Alice"));
        assert_eq!(q.avatar, None);
        assert_eq!(q.updated_at, Some(later));
        // The same change again changes nothing, not even the time.
        let r = q
            .patched(&patch(r#"{"avatar":null}"#), Timestamp::from_unix_ms(3))
            .unwrap();
        assert_eq!(r, q);
    }

    #[test]
    fn bounds_hold_at_the_threshold_and_just_past_it() {
        let name = |n: usize| format!(r#"{{"display_name":"{}"}}"#, "é".repeat(n));
        assert!(patch(&name(MAX_DISPLAY_NAME_CHARS)).check(now()).is_ok());
        assert_eq!(
            patch(&name(MAX_DISPLAY_NAME_CHARS + 1)).check(now()),
            Err(ProfileError::DisplayName)
        );
        assert_eq!(
            patch(r#"{"display_name":"  "}"#).check(now()),
            Err(ProfileError::DisplayName)
        );
        let text = |n: usize| format!(r#"{{"status":{{"text":"{}"}}}}"#, "a".repeat(n));
        assert!(patch(&text(MAX_STATUS_TEXT_CHARS)).check(now()).is_ok());
        assert_eq!(
            patch(&text(MAX_STATUS_TEXT_CHARS + 1)).check(now()),
            Err(ProfileError::StatusText)
        );
        let emoji = |n: usize| format!(r#"{{"status":{{"emoji":"{}"}}}}"#, "a".repeat(n));
        assert!(patch(&emoji(MAX_STATUS_EMOJI_BYTES)).check(now()).is_ok());
        assert_eq!(
            patch(&emoji(MAX_STATUS_EMOJI_BYTES + 1)).check(now()),
            Err(ProfileError::StatusEmoji)
        );
        // A status of nothing clears it.
        let cleared = Profile::empty(UserId::new("a").unwrap())
            .patched(&patch(r#"{"status":{"text":"x"}}"#), now())
            .unwrap()
            .patched(&patch(r#"{"status":{"text":" "}}"#), now())
            .unwrap();
        assert_eq!(cleared.status, None);
        assert_eq!(patch("{}").check(now()), Err(ProfileError::Empty));
        assert!(serde_json::from_str::<ProfilePatch>(r#"{"nick":"x"}"#).is_err());
    }

    #[test]
    fn custom_merges_and_is_bounded_as_a_whole() {
        let alice = Profile::empty(UserId::new("alice").unwrap());
        let set = |json: &str| ProfilePatch {
            custom: Some(serde_json::from_str(json).unwrap()),
            ..ProfilePatch::default()
        };
        let p = alice
            .patched(&set(r#"{"team":"blue","level":3}"#), now())
            .unwrap();
        let p = p
            .patched(&set(r#"{"level":null,"x":true}"#), now())
            .unwrap();
        assert_eq!(
            serde_json::to_string(&p.custom).unwrap(),
            r#"{"team":"blue","x":true}"#
        );
        // `{"k":"…"}` is 8 bytes around the value.
        let fits = format!(r#"{{"k":"{}"}}"#, "a".repeat(MAX_CUSTOM_BYTES - 8));
        assert!(alice.patched(&set(&fits), now()).is_ok());
        let over = format!(r#"{{"k":"{}"}}"#, "a".repeat(MAX_CUSTOM_BYTES - 7));
        assert_eq!(
            alice.patched(&set(&over), now()),
            Err(ProfileError::CustomTooLarge)
        );
    }

    #[test]
    fn a_status_past_its_time_is_not_seen() {
        let p = Profile::empty(UserId::new("alice").unwrap())
            .patched(
                &patch(r#"{"status":{"text":"lunch","expires_at":"1970-01-01T00:16:41Z"}}"#),
                now(),
            )
            .unwrap();
        assert!(p.clone().seen_at(now()).status.is_some());
        assert!(
            p.seen_at(Timestamp::from_unix_ms(1_001_000))
                .status
                .is_none()
        );
    }
}
