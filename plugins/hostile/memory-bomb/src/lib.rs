//! Allocates until memory runs out: the host's memory cap must stop it.

include!("../../common.rs");

fn attack(message: &Message) -> Verdict {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![message.member_count as u8; 1 << 20]);
        std::hint::black_box(&hoard);
    }
}
