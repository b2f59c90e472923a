//! Traps at once: the host must count it and apply the hook's failure policy.

wit_bindgen::generate!({ path: "../../../wit/0.1.0", world: "moderator" });

use exports::switchboard::plugin::moderation::{Guest, Message, Verdict};

struct Hostile;

impl Guest for Hostile {
    fn moderate(message: Message) -> Verdict {
        if message.member_count < u32::MAX {
            std::process::abort();
        }
        Verdict::Allow
    }
}

export!(Hostile);
