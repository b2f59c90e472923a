//! Rewrites a message into `bytes` of text (configuration, default
//! 8 MiB): the host must refuse output over the tenant's content limits,
//! whether they are the deployment's or a tenant's lower ones.

include!("../../common.rs");

fn attack(_message: &Message) -> Verdict {
    let bytes = config("bytes")
        .and_then(|b| b.parse().ok())
        .unwrap_or(8 << 20);
    Verdict::Rewrite(Content::Text("x".repeat(bytes)))
}
