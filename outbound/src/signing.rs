//! How a delivery proves it came from Switchboard: an HMAC-SHA256 of
//! `<unix seconds>.<body>`, keyed with the tenant's secret. The push
//! webhook and the event webhooks carry it in their own headers.

/// `v1=` and the hex HMAC-SHA256 of `<timestamp>.<body>` keyed with
/// `secret`.
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let mut ctx = ring::hmac::Context::with_key(&key);
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    let tag = ctx.sign();
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("v1={hex}")
}

#[cfg(test)]
mod tests {
    use super::signature;

    #[test]
    fn the_signature_covers_timestamp_and_body() {
        let a = signature("webhook-secret-0123", 1_700_000_000, b"{}");
        assert!(a.starts_with("v1=") && a.len() == 3 + 64);
        assert_ne!(a, signature("webhook-secret-0123", 1_700_000_001, b"{}"));
        assert_ne!(a, signature("webhook-secret-0123", 1_700_000_000, b"{ }"));
        assert_ne!(a, signature("webhook-secret-0124", 1_700_000_000, b"{}"));
        // The HMAC of "t.body", checked by hand.
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"webhook-secret-0123");
        let tag = ring::hmac::sign(&key, b"1700000000.{}");
        let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(a, format!("v1={hex}"));
    }
}
