//! Reactions (v1.1): what a `react` frame may name, and how a message's
//! reaction counts change with one.

use serde::{Deserialize, Serialize};

use crate::ids::UserId;
use crate::message::{Message, Reaction};
use crate::poll::split_marks;

/// What a `react` frame does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReactAction {
    Add,
    Remove,
}

/// The most characters an emoji may have (`react`'s `emoji`).
pub const MAX_EMOJI_CHARS: usize = 32;

/// The most different emoji one user may have on one message.
pub const MAX_REACTIONS_PER_USER: usize = 20;

/// The most different emoji one message may carry.
pub const MAX_EMOJI_PER_MESSAGE: usize = 50;

/// Why an emoji is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmojiError {
    #[error("emoji must be 1 to {MAX_EMOJI_CHARS} characters")]
    Length,
    #[error("emoji must not contain whitespace or control characters")]
    Characters,
}

/// Checks a reaction's emoji: 1 to 32 characters (Unicode scalar values,
/// enough for any emoji sequence with skin tones and joiners, or a
/// `:shortcode:`), none of them whitespace or control characters.
pub fn check_emoji(emoji: &str) -> Result<(), EmojiError> {
    let n = emoji.chars().count();
    if n == 0 || n > MAX_EMOJI_CHARS {
        return Err(EmojiError::Length);
    }
    if emoji.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(EmojiError::Characters);
    }
    Ok(())
}

/// The counts after one user's reaction with `emoji` was added or
/// removed (the caller knows it changed something): a new emoji goes
/// last, an emoji whose count reaches 0 goes.
pub fn apply(reactions: &mut Vec<Reaction>, emoji: &str, action: ReactAction) {
    let at = reactions.iter().position(|r| r.emoji == emoji);
    match (action, at) {
        (ReactAction::Add, Some(i)) => reactions[i].count += 1,
        (ReactAction::Add, None) => reactions.push(Reaction {
            emoji: emoji.to_owned(),
            count: 1,
            me: false,
        }),
        (ReactAction::Remove, Some(i)) => {
            reactions[i].count = reactions[i].count.saturating_sub(1);
            if reactions[i].count == 0 {
                reactions.remove(i);
            }
        }
        (ReactAction::Remove, None) => {}
    }
}

/// Takes back what `user`'s marks on message `m` counted (their
/// reaction emoji and their poll vote, as the store keeps them:
/// [`crate::poll::vote_mark`]) when the marks go without the message
/// (erasure). Whether anything changed.
pub fn forget_marks(m: &mut Message, user: &UserId, marks: &[String]) -> bool {
    let (emoji, votes) = split_marks(marks);
    for e in &emoji {
        apply(&mut m.reactions, e, ReactAction::Remove);
    }
    if let Some(results) = m.poll_results.as_mut()
        && !votes.is_empty()
    {
        results.apply(user, &votes, &[]);
    }
    !marks.is_empty()
}

/// `{emoji: count}` of a message's reactions, as the `reaction` event
/// carries them.
pub fn counts(reactions: &[Reaction]) -> std::collections::BTreeMap<String, u64> {
    reactions
        .iter()
        .map(|r| (r.emoji.clone(), r.count))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emoji_are_one_to_thirty_two_visible_characters() {
        assert!(check_emoji("👍").is_ok());
        assert!(check_emoji("👩🏽‍💻").is_ok(), "a ZWJ sequence with a skin tone");
        assert!(check_emoji(":party_parrot:").is_ok());
        assert!(check_emoji(&"x".repeat(32)).is_ok());
        assert_eq!(check_emoji(&"x".repeat(33)), Err(EmojiError::Length));
        assert_eq!(check_emoji(""), Err(EmojiError::Length));
        assert_eq!(check_emoji("a b"), Err(EmojiError::Characters));
        assert_eq!(check_emoji("\u{7}"), Err(EmojiError::Characters));
    }

    #[test]
    fn counts_follow_adds_and_removes_in_first_seen_order() {
        let mut r = Vec::new();
        apply(&mut r, "👍", ReactAction::Add);
        apply(&mut r, "🎉", ReactAction::Add);
        apply(&mut r, "👍", ReactAction::Add);
        assert_eq!(
            counts(&r),
            [("👍".to_owned(), 2), ("🎉".to_owned(), 1)].into()
        );
        assert_eq!(r[0].emoji, "👍");
        apply(&mut r, "🎉", ReactAction::Remove);
        apply(&mut r, "🎉", ReactAction::Remove);
        assert_eq!(r.len(), 1);
    }
}
