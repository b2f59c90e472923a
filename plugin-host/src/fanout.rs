//! How a conversation's messages reach its members (F10): the built-in
//! policy. Below the threshold, fan-out on write: every member's devices
//! get inbox entries and every member is pushed to by user. Above it,
//! fan-out on read: one stored copy, live pushes through the
//! conversation's own subject to members connected now, history for the
//! rest, and marks stored but not broadcast. A tenant's fan-out plugin
//! replaces this threshold for its conversations; the writer and the
//! gateways ask `Plugins::fan_out_mode`, which falls back to it.

use serde::{Deserialize, Serialize};
use switchboard_protocol::ConversationKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FanOut {
    Write,
    Read,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FanOutPolicy {
    /// Conversations with more members than this fan out on read.
    pub threshold: usize,
}

impl Default for FanOutPolicy {
    fn default() -> Self {
        Self { threshold: 500 }
    }
}

impl FanOutPolicy {
    pub fn mode(&self, kind: ConversationKind, members: usize) -> FanOut {
        match kind {
            ConversationKind::Direct => FanOut::Write,
            ConversationKind::Group | ConversationKind::Channel if members > self.threshold => {
                FanOut::Read
            }
            ConversationKind::Group | ConversationKind::Channel => FanOut::Write,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn above_the_threshold_groups_and_channels_fan_out_on_read() {
        let p = FanOutPolicy { threshold: 3 };
        assert_eq!(p.mode(ConversationKind::Group, 3), FanOut::Write);
        assert_eq!(p.mode(ConversationKind::Group, 4), FanOut::Read);
        assert_eq!(p.mode(ConversationKind::Channel, 4), FanOut::Read);
        assert_eq!(p.mode(ConversationKind::Direct, 2), FanOut::Write);
    }
}
