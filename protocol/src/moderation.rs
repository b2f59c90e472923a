//! Moderation without code (v1.3): the tenant's word list and its
//! tenant-wide bans.
//!
//! The word list: its shape, its bounds and how it reads a text; where it
//! applies (every send and edit, before the tenant's plugin) is the
//! screening's (`switchboard_plugin_host::screen`).
//!
//! A text is read as words: runs of letters and digits (Unicode), each
//! compared with the list ignoring case. So a listed word matches itself
//! anywhere in a text, between spaces or punctuation, and never inside a
//! longer word ("ass" does not match "class"). A listed word is therefore
//! letters and digits only.

use serde::{Deserialize, Serialize};

use crate::content::Content;
use crate::{ConversationId, Timestamp, UserId};

/// The most words one tenant's list holds.
pub const MAX_BLOCKED_WORDS: usize = 1000;
/// The longest listed word, in characters.
pub const MAX_BLOCKED_WORD_CHARS: usize = 64;

/// What a text with a listed word gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BlocklistMode {
    /// Refused (`rejected_by_policy`); the sender is told why.
    #[default]
    Reject,
    /// Stored with each listed word's characters replaced by `*`; the
    /// sender's ack carries what was stored.
    Mask,
}

/// A tenant's word list (`PUT /v1/admin/blocklist`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Blocklist {
    /// At most 1000 words of letters and digits, each at most 64
    /// characters; matched ignoring case. An empty list turns it off.
    pub words: Vec<String>,
    #[serde(default)]
    pub mode: BlocklistMode,
}

/// Why a list is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlocklistError {
    #[error("a blocklist holds at most {MAX_BLOCKED_WORDS} words")]
    TooMany,
    #[error("a blocked word is 1 to {MAX_BLOCKED_WORD_CHARS} characters")]
    Length,
    #[error("a blocked word is letters and digits only: {0:?}")]
    NotAWord(String),
}

/// What the list makes of one text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    /// No listed word.
    Clean,
    /// A listed word, in `Reject` mode.
    Rejected,
    /// The text with its listed words masked.
    Masked(String),
}

/// What the list did to a message's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Unchanged,
    Masked,
    /// A listed word, in `Reject` mode: the content is not to be stored.
    Rejected,
}

impl Blocklist {
    /// The list as stored: checked, each word in lower case, sorted, each
    /// once.
    pub fn normalized(self) -> Result<Self, BlocklistError> {
        if self.words.len() > MAX_BLOCKED_WORDS {
            return Err(BlocklistError::TooMany);
        }
        let mut words = Vec::with_capacity(self.words.len());
        for word in self.words {
            let chars = word.chars().count();
            if chars == 0 || chars > MAX_BLOCKED_WORD_CHARS {
                return Err(BlocklistError::Length);
            }
            // In lower case too: a few letters lower to a letter and a
            // combining mark ('İ'), which no word of a text contains.
            let lower = word.to_lowercase();
            if !lower.chars().all(char::is_alphanumeric) {
                return Err(BlocklistError::NotAWord(word));
            }
            words.push(lower);
        }
        words.sort_unstable();
        words.dedup();
        Ok(Self {
            words,
            mode: self.mode,
        })
    }

    /// Whether it lists nothing (and so changes nothing).
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// What the list makes of `text`. Expects a [`Self::normalized`]
    /// list: the words are looked up by binary search.
    pub fn read(&self, text: &str) -> Listed {
        let mut hits: Vec<(usize, usize)> = Vec::new();
        let mut start = None;
        for (i, ch) in text
            .char_indices()
            .chain(std::iter::once((text.len(), ' ')))
        {
            match (ch.is_alphanumeric(), start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    if self.lists(&text[s..i]) {
                        if self.mode == BlocklistMode::Reject {
                            return Listed::Rejected;
                        }
                        hits.push((s, i));
                    }
                    start = None;
                }
                _ => {}
            }
        }
        if hits.is_empty() {
            return Listed::Clean;
        }
        let mut masked = String::with_capacity(text.len());
        let mut at = 0;
        for (s, e) in hits {
            masked.push_str(&text[at..s]);
            masked.extend(text[s..e].chars().map(|_| '*'));
            at = e;
        }
        masked.push_str(&text[at..]);
        Listed::Masked(masked)
    }

    fn lists(&self, word: &str) -> bool {
        if word.chars().count() > MAX_BLOCKED_WORD_CHARS {
            return false;
        }
        let lower = word.to_lowercase();
        self.words.binary_search(&lower).is_ok()
    }

    /// What the list makes of a message's content, masking it in place:
    /// its text, a media caption, a custom message's `fallback_text`, or
    /// a poll's question and options (never ciphertext, nor a custom
    /// message's `data`, which is the app's).
    pub fn apply(&self, content: &mut Content) -> Applied {
        if self.is_empty() {
            return Applied::Unchanged;
        }
        let texts: Vec<&mut String> = match content {
            Content::Text { text } => vec![text],
            Content::Image(m) | Content::File(m) | Content::Voice(m) => {
                m.caption.as_mut().into_iter().collect()
            }
            Content::Custom(c) => c.fallback_text.as_mut().into_iter().collect(),
            Content::Poll(p) => p.texts_mut().collect(),
            Content::Ciphertext { .. } | Content::System(_) => Vec::new(),
        };
        let mut masked_any = false;
        let mut masks = Vec::new();
        for text in texts {
            match self.read(text) {
                Listed::Clean => {}
                Listed::Rejected => return Applied::Rejected,
                Listed::Masked(masked) => masks.push((text, masked)),
            }
        }
        // Nothing is masked until every text passed: a rejection leaves
        // the content as it came.
        for (text, masked) in masks {
            *text = masked;
            masked_any = true;
        }
        if masked_any {
            Applied::Masked
        } else {
            Applied::Unchanged
        }
    }
}

/// The longest reason a tenant ban carries, in characters.
pub const MAX_BAN_REASON_CHARS: usize = 500;

/// `PUT /v1/admin/bans/{user}`: a tenant-wide ban, until a time or until
/// lifted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TenantBanRequest {
    /// When the ban ends by itself (in the future); absent or null: until
    /// lifted.
    #[serde(default)]
    pub until: Option<Timestamp>,
    /// Why, for the tenant's admins (at most 500 characters); never shown
    /// to the banned user.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Why a tenant ban is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenantBanError {
    #[error("a ban's reason is at most {MAX_BAN_REASON_CHARS} characters")]
    ReasonTooLong,
    #[error("a ban's until is in the future: leave it out for a ban until lifted")]
    UntilPassed,
}

impl TenantBanRequest {
    /// The ban it asks for, by `by` at `now`, if it is one.
    pub fn ban(
        self,
        user_id: UserId,
        by: UserId,
        now: Timestamp,
    ) -> Result<TenantBan, TenantBanError> {
        if self
            .reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > MAX_BAN_REASON_CHARS)
        {
            return Err(TenantBanError::ReasonTooLong);
        }
        if self.until.is_some_and(|until| until <= now) {
            return Err(TenantBanError::UntilPassed);
        }
        Ok(TenantBan {
            user_id,
            by,
            banned_at: now,
            until: self.until,
            reason: self.reason.filter(|r| !r.is_empty()),
        })
    }
}

/// A user banned from the whole tenant: their tokens are refused
/// (`banned`) and their connections closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TenantBan {
    pub user_id: UserId,
    /// The tenant admin who banned them.
    pub by: UserId,
    pub banned_at: Timestamp,
    /// When it ends by itself; null: until lifted.
    pub until: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl TenantBan {
    /// Whether the ban keeps its user out at `now`.
    pub fn holds_at(&self, now: Timestamp) -> bool {
        self.until.is_none_or(|until| until > now)
    }
}

/// `GET /v1/admin/bans`: the tenant's bans in force, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TenantBanList {
    pub bans: Vec<TenantBan>,
    /// Where the next page starts (`?cursor=`); absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The most mutes one conversation keeps.
pub const MAX_MUTES: usize = 1000;

/// `POST /v1/conversations/{id}/mutes`: a member who stays but may not
/// post, react or reply, until a time or until lifted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MuteRequest {
    pub user_id: UserId,
    /// When the mute ends by itself (in the future); absent or null:
    /// until lifted.
    #[serde(default)]
    pub until: Option<Timestamp>,
}

/// A muted member of a conversation (v1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Mute {
    pub user_id: UserId,
    /// The owner or admin who muted them.
    pub by: UserId,
    pub muted_at: Timestamp,
    /// When it ends by itself; null: until lifted.
    pub until: Option<Timestamp>,
}

impl Mute {
    /// Whether the mute holds at `now`.
    pub fn holds_at(&self, now: Timestamp) -> bool {
        self.until.is_none_or(|until| until > now)
    }
}

/// `GET /v1/conversations/{id}/mutes`: the mutes in force, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MuteList {
    pub mutes: Vec<Mute>,
}

/// What a moderation change was (the audit log, v1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    /// The word list was replaced: `details.words` (how many),
    /// `details.mode`.
    BlocklistSet,
    /// `user_id` was banned from the tenant: `details.until`,
    /// `details.reason`.
    UserBanned,
    /// `user_id`'s tenant ban was lifted.
    UserUnbanned,
    /// `user_id` was shadow-banned: `details.until`, `details.reason`.
    UserShadowBanned,
    /// `user_id`'s shadow ban was lifted.
    UserShadowUnbanned,
    /// `user_id` was muted in `conversation_id`: `details.until`.
    MemberMuted,
    /// `user_id`'s mute in `conversation_id` was lifted.
    MemberUnmuted,
    /// `conversation_id` was frozen.
    ConversationFrozen,
    /// `conversation_id` was thawed.
    ConversationThawed,
}

/// One moderation change: who did what to whom, and when
/// (`GET /v1/admin/audit`, the `moderation.audit` webhook event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AuditEntry {
    /// The entry's place in the tenant's log: later entries have larger
    /// ids (decimal digits).
    #[serde(default)]
    pub id: String,
    pub at: Timestamp,
    /// The tenant admin (or owner, for a conversation's change) who made
    /// it.
    pub actor: UserId,
    pub action: AuditAction,
    /// The user it was done to, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<UserId>,
    /// The conversation it was done in, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<ConversationId>,
    /// What the action says.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub details: serde_json::Value,
}

/// `GET /v1/admin/audit`: a page of the tenant's audit log, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AuditList {
    pub entries: Vec<AuditEntry>,
    /// Where the next (older) page starts (`?cursor=`); absent on the
    /// last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(words: &[&str], mode: BlocklistMode) -> Blocklist {
        Blocklist {
            words: words.iter().map(|w| (*w).to_owned()).collect(),
            mode,
        }
        .normalized()
        .unwrap()
    }

    #[test]
    fn words_match_whole_and_ignoring_case() {
        let l = list(&["Darn", "heck"], BlocklistMode::Mask);
        assert_eq!(l.words, ["darn", "heck"]);
        assert_eq!(l.read("oh DARN it"), Listed::Masked("oh **** it".into()));
        assert_eq!(
            l.read("heck,darn!heck"),
            Listed::Masked("****,****!****".into())
        );
        assert_eq!(l.read("darned hecks"), Listed::Clean, "never inside a word");
        assert_eq!(l.read(""), Listed::Clean);
        let r = list(&["darn"], BlocklistMode::Reject);
        assert_eq!(r.read("well, Darn."), Listed::Rejected);
        assert_eq!(r.read("darning"), Listed::Clean);
    }

    #[test]
    fn letters_of_any_script_are_words_and_masks_keep_their_length() {
        let l = list(&["Straße", "ковер"], BlocklistMode::Mask);
        assert_eq!(
            l.read("STRASSE straße Ковер"),
            Listed::Masked("STRASSE ****** *****".into())
        );
    }

    #[test]
    fn the_list_is_bounded_at_its_limits() {
        let words = |n: usize, w: &str| Blocklist {
            words: vec![w.to_owned(); n],
            mode: BlocklistMode::Reject,
        };
        assert!(words(MAX_BLOCKED_WORDS, "a").normalized().is_ok());
        assert_eq!(
            words(MAX_BLOCKED_WORDS + 1, "a").normalized(),
            Err(BlocklistError::TooMany)
        );
        let long = "é".repeat(MAX_BLOCKED_WORD_CHARS);
        assert!(words(1, &long).normalized().is_ok());
        assert_eq!(
            words(1, &format!("{long}e")).normalized(),
            Err(BlocklistError::Length)
        );
        assert_eq!(words(1, "").normalized(), Err(BlocklistError::Length));
        assert!(matches!(
            words(1, "two words").normalized(),
            Err(BlocklistError::NotAWord(_))
        ));
        assert_eq!(words(3, "Same").normalized().unwrap().words, ["same"]);
        assert!(matches!(
            words(1, "İ").normalized(),
            Err(BlocklistError::NotAWord(_))
        ));
    }

    #[test]
    fn a_polls_question_and_options_are_read() {
        let poll = r#"{"kind":"poll","question":"Darn lunch?","options":[{"id":"a","text":"pizza"},{"id":"b","text":"darn salad"}]}"#;
        let mut masked: Content = serde_json::from_str(poll).unwrap();
        let l = list(&["darn"], BlocklistMode::Mask);
        assert_eq!(l.apply(&mut masked), Applied::Masked);
        let Content::Poll(p) = &masked else {
            panic!("{masked:?}")
        };
        assert_eq!(p.question, "**** lunch?");
        assert_eq!(p.options[0].text, "pizza");
        assert_eq!(p.options[1].text, "**** salad");
        let mut rejected: Content = serde_json::from_str(poll).unwrap();
        let l = list(&["salad"], BlocklistMode::Reject);
        assert_eq!(l.apply(&mut rejected), Applied::Rejected);
    }

    #[test]
    fn content_is_read_where_people_read_it() {
        let l = list(&["darn"], BlocklistMode::Mask);
        let mut text: Content = serde_json::from_str(r#"{"kind":"text","text":"darn"}"#).unwrap();
        assert_eq!(l.apply(&mut text), Applied::Masked);
        assert_eq!(
            text,
            serde_json::from_str(r#"{"kind":"text","text":"****"}"#).unwrap()
        );
        let mut custom: Content = serde_json::from_str(
            r#"{"kind":"custom","type":"t","data":{"x":"darn"},"fallback_text":"darn"}"#,
        )
        .unwrap();
        assert_eq!(l.apply(&mut custom), Applied::Masked);
        let Content::Custom(c) = &custom else {
            panic!("{custom:?}")
        };
        assert_eq!(c.fallback_text.as_deref(), Some("****"));
        assert_eq!(c.data["x"], "darn", "the app's data is the app's");
        let mut sealed: Content =
            serde_json::from_str(r#"{"kind":"ciphertext","algorithm":"x","body":"darn"}"#).unwrap();
        assert_eq!(l.apply(&mut sealed), Applied::Unchanged);
        let reject = list(&["darn"], BlocklistMode::Reject);
        let mut caption: Content = serde_json::from_str(
            r#"{"kind":"image","blob_ref":"b","mime":"image/png","size":3,"caption":"Darn cat"}"#,
        )
        .unwrap();
        assert_eq!(reject.apply(&mut caption), Applied::Rejected);
    }

    #[test]
    fn a_ban_request_is_checked_at_its_bounds() {
        let now = Timestamp::from_unix_ms(1_000_000);
        let user = UserId::new("mallory").unwrap();
        let admin = UserId::new("root").unwrap();
        let ask = |until: Option<i64>, reason: Option<String>| {
            TenantBanRequest {
                until: until.map(Timestamp::from_unix_ms),
                reason,
            }
            .ban(user.clone(), admin.clone(), now)
        };
        let longest = "é".repeat(MAX_BAN_REASON_CHARS);
        let ban = ask(Some(1_000_001), Some(longest.clone())).unwrap();
        assert_eq!(ban.reason.as_deref(), Some(longest.as_str()));
        assert!(ban.holds_at(now));
        assert!(!ban.holds_at(Timestamp::from_unix_ms(1_000_001)));
        assert_eq!(
            ask(None, Some(format!("{longest}x"))),
            Err(TenantBanError::ReasonTooLong)
        );
        assert_eq!(ask(Some(1_000_000), None), Err(TenantBanError::UntilPassed));
        let forever = ask(None, Some(String::new())).unwrap();
        assert_eq!(forever.reason, None, "an empty reason is none");
        assert!(forever.holds_at(Timestamp::from_unix_ms(i64::MAX)));
    }
}
