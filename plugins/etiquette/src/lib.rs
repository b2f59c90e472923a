//! A moderator of reactions and mentions, written with the SDK.
//! Configuration:
//! - `blocked_emoji`: comma-separated emoji nobody may react with
//!   (default `🖕`);
//! - `max_mentions`: the most members one message may mention (default
//!   10);
//! - `all_up_to`: the largest conversation in which a message may
//!   mention everyone (default 50): past it, `@all` is refused.

use switchboard_plugin::moderation::{Message, Moderator, Reaction, ReactionVerdict, Verdict};
use switchboard_plugin::{config_or, config_parse};

struct Etiquette;

impl Moderator for Etiquette {
    fn moderate(message: Message) -> Verdict {
        let max_mentions = config_parse("max_mentions").unwrap_or(10);
        if message.mentions.len() > max_mentions {
            return Verdict::reject(format!(
                "a message here mentions at most {max_mentions} members"
            ));
        }
        let all_up_to = config_parse("all_up_to").unwrap_or(50);
        if message.mention_all && message.member_count > all_up_to {
            return Verdict::reject(format!(
                "mentioning everyone is for conversations of at most {all_up_to} members"
            ));
        }
        Verdict::Allow
    }

    fn moderate_reaction(reaction: Reaction) -> ReactionVerdict {
        let blocked = config_or("blocked_emoji", "🖕");
        if blocked.split(',').any(|e| e.trim() == reaction.emoji) {
            switchboard_plugin::info("refused a blocked emoji");
            return ReactionVerdict::reject("that emoji is not allowed here");
        }
        ReactionVerdict::Allow
    }
}

switchboard_plugin::moderator!(Etiquette);
