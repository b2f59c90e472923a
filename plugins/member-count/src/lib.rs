//! A fan-out policy. Configuration: `threshold` (default 100): groups and
//! channels with more members than this fan out on read.

wit_bindgen::generate!({ path: "../../wit/0.1.0", world: "fan-out-plugin" });

use exports::switchboard::plugin::fan_out::{Conversation, Guest, Mode};
use switchboard::plugin::host::config;

struct MemberCount;

impl Guest for MemberCount {
    fn choose(conversation: Conversation) -> Mode {
        let threshold: u32 = config("threshold")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(100);
        if conversation.member_count > threshold {
            Mode::OnRead
        } else {
            Mode::OnWrite
        }
    }
}

export!(MemberCount);
