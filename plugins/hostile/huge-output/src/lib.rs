//! Rewrites a message into 8 MiB of text: the host must refuse output over the content limits.

wit_bindgen::generate!({ path: "../../../wit/0.1.0", world: "moderator" });

use exports::switchboard::plugin::moderation::{Guest, Message, Verdict};
use switchboard::plugin::host::config;
use switchboard::plugin::types::Content;

struct Hostile;

impl Guest for Hostile {
    fn moderate(message: Message) -> Verdict {
        if !triggered(&message) {
            return Verdict::Allow;
        }
        Verdict::Rewrite(Content::Text("x".repeat(8 << 20)))
    }
}

/// Hostile only for messages with the trigger word (configuration
/// `trigger`, default `attack`): it passes the upload's trial call, as a
/// plugin that misbehaves on some real traffic would.
fn triggered(message: &Message) -> bool {
    let trigger = config("trigger").unwrap_or_else(|| "attack".to_owned());
    matches!(&message.content, Content::Text(t) if t.contains(trigger.as_str()))
}

export!(Hostile);
