//! Fails on every other message: a text ending in an odd digit (`m1`,
//! `m3`, ...) spins until the host's deadline or fuel stops it, every
//! other text is allowed. A plugin gets a fresh instance per call and
//! keeps nothing from one to the next, so "every other call" comes from
//! the input: numbered messages alternate. Such a plugin never fails
//! twice in a row, which is what quarantine must not be fooled by; its
//! trial call ("hello") passes.

wit_bindgen::generate!({ path: "../../../wit/0.1.0", world: "moderator" });

use exports::switchboard::plugin::moderation::{Guest, Message, Verdict};
use switchboard::plugin::types::Content;

struct Flaky;

impl Guest for Flaky {
    fn moderate(message: Message) -> Verdict {
        let odd = matches!(
            &message.content,
            Content::Text(t) if t.ends_with(['1', '3', '5', '7', '9'])
        );
        if !odd {
            return Verdict::Allow;
        }
        let mut n = u64::from(message.member_count);
        loop {
            n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

export!(Flaky);
