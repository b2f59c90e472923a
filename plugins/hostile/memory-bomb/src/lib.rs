//! Allocates until memory runs out: the host's memory cap must stop it.

wit_bindgen::generate!({ path: "../../../wit/0.1.0", world: "moderator" });

use exports::switchboard::plugin::moderation::{Guest, Message, Verdict};

struct Hostile;

impl Guest for Hostile {
    fn moderate(message: Message) -> Verdict {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![message.member_count as u8; 1 << 20]);
            std::hint::black_box(&hoard);
        }
    }
}

export!(Hostile);
