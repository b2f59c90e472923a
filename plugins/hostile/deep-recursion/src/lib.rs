//! Recurses without end: the host's stack limit must stop it.

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
        #[allow(unconditional_recursion)] // the point of this plugin
        fn down(n: u64) -> u64 {
            std::hint::black_box(down(std::hint::black_box(n + 1)) + 1)
        }
        if down(message.member_count as u64) > 0 {
            Verdict::Allow
        } else {
            Verdict::Reject(String::new())
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
