//! Traps at once: the host must count it and apply the hook's failure policy.

include!("../../common.rs");

fn attack(message: &Message) -> Verdict {
    if message.member_count < u32::MAX {
        std::process::abort();
    }
    Verdict::Allow
}
