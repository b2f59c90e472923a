//! Recurses without end: the host's stack limit must stop it.

include!("../../common.rs");

fn attack(message: &Message) -> Verdict {
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
