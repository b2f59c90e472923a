//! A moderator of reactions and mentions, written with the SDK.
//! Configuration:
//! - `blocked_emoji`: comma-separated emoji nobody may react with
//!   (default `🖕`);
//! - `max_mentions`: the most members one message may mention (default
//!   10);
//! - `all_up_to`: the largest conversation in which a message may
//!   mention everyone (default 50): past it, `@all` is refused;
//! - `custom_types`: comma-separated custom message types the community
//!   uses (default: any); another type is refused;
//! - `max_custom_bytes`: the most bytes of a message's own `custom`
//!   fields as JSON (default 4096, the server's own bound);
//! - `blocked_sites`: comma-separated hosts whose links show no preview
//!   card (their subdomains neither; default none);
//! - `preview_images`: `false` shows cards without their images
//!   (default `true`).

use switchboard_plugin::moderation::{
    Content, LinkPreview, Message, Moderator, Preview, PreviewVerdict, Reaction, ReactionVerdict,
    Verdict,
};
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
        if let Content::Custom(custom) = &message.content {
            let allowed = config_or("custom_types", "");
            let listed = allowed.split(',').map(str::trim).filter(|t| !t.is_empty());
            if !allowed.trim().is_empty() && !listed.clone().any(|t| t == custom.custom_type) {
                return Verdict::reject(format!(
                    "custom messages here are of the types {}",
                    listed.collect::<Vec<_>>().join(", ")
                ));
            }
        }
        let max_custom = config_parse("max_custom_bytes").unwrap_or(4096);
        if message.custom.as_ref().is_some_and(|c| c.len() > max_custom) {
            return Verdict::reject(format!(
                "a message's custom fields here are at most {max_custom} bytes"
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

    fn moderate_preview(preview: Preview) -> PreviewVerdict {
        let host = preview.host();
        let blocked = config_or("blocked_sites", "");
        let on_list = blocked
            .split(',')
            .map(|s| s.trim().to_lowercase())
            .filter(|s| !s.is_empty())
            .any(|site| host == site || host.ends_with(&format!(".{site}")));
        if on_list {
            return PreviewVerdict::Drop;
        }
        if preview.card.image.is_some() && config_or("preview_images", "true") == "false" {
            return PreviewVerdict::Rewrite(LinkPreview {
                image: None,
                ..preview.card
            });
        }
        PreviewVerdict::Allow
    }
}

switchboard_plugin::moderator!(Etiquette);
