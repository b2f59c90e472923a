//! Never returns: the host's deadline (epoch interruption) and fuel must stop it.

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
        let mut n: u64 = message.member_count as u64;
        loop {
            n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
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
