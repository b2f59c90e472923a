//! A fan-out policy, written with the SDK. Configuration: `threshold`
//! (default 100): groups and channels with more members than this fan out
//! on read.

use switchboard_plugin::fan_out::{Conversation, FanOutPolicy, Mode};

struct MemberCount;

impl FanOutPolicy for MemberCount {
    fn choose(conversation: Conversation) -> Mode {
        let threshold: u32 = switchboard_plugin::config_parse("threshold").unwrap_or(100);
        if conversation.member_count > threshold {
            Mode::OnRead
        } else {
            Mode::OnWrite
        }
    }
}

switchboard_plugin::fan_out_policy!(MemberCount);
