//! Rewrites every message into 8 MiB of text: the host must refuse output over the content limits.

wit_bindgen::generate!({ path: "../../../wit/0.1.0", world: "moderator" });

use exports::switchboard::plugin::moderation::{Guest, Message, Verdict};

struct Hostile;

impl Guest for Hostile {
    fn moderate(message: Message) -> Verdict {
        let _ = message;
        Verdict::Rewrite(switchboard::plugin::types::Content::Text("x".repeat(8 << 20)))
    }
}

export!(Hostile);
