// The part every hostile plugin shares, `include!`d by each: the
// bindings, the moderation export, and the trigger. Each plugin defines
// `fn attack(message: &Message) -> Verdict`, what it does once triggered.

wit_bindgen::generate!({ path: "../../../wit/0.1.0", world: "moderator" });

use exports::switchboard::plugin::moderation::{Guest, Message, Verdict};
use switchboard::plugin::host::config;
use switchboard::plugin::types::Content;

struct Hostile;

impl Guest for Hostile {
    fn moderate(message: Message) -> Verdict {
        if triggered(&message) {
            attack(&message)
        } else {
            Verdict::Allow
        }
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
