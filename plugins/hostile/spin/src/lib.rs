//! Never returns: the host's deadline (epoch interruption) and fuel must stop it.

wit_bindgen::generate!({ path: "../../../wit/0.1.0", world: "moderator" });

use exports::switchboard::plugin::moderation::{Guest, Message, Verdict};

struct Hostile;

impl Guest for Hostile {
    fn moderate(message: Message) -> Verdict {
        let mut n: u64 = message.member_count as u64;
        loop {
            n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

export!(Hostile);
