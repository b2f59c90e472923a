//! Rewrites a message into 8 MiB of text: the host must refuse output over the content limits.

include!("../../common.rs");

fn attack(_message: &Message) -> Verdict {
    Verdict::Rewrite(Content::Text("x".repeat(8 << 20)))
}
