//! Never returns: the host's deadline (epoch interruption) and fuel must stop it.

include!("../../common.rs");

fn attack(message: &Message) -> Verdict {
    let mut n: u64 = message.member_count as u64;
    loop {
        n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}
