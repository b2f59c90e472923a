//! The grammar and limits of what a tenant record names, in one place:
//! web origins and URLs (with the regular expressions the OpenAPI
//! document states them by, tied to the functions by a test), claim,
//! key and delay limits. The record's own check (`record.rs`'s
//! `validate`) and the operator API's origin check both use these.

use super::error::TenantError;

/// The longest web origin accepted (`is_web_origin`).
pub const MAX_ORIGIN_LEN: usize = 266;

/// The longest `issuer` or `audience` a tenant may require.
pub const MAX_CLAIM_LEN: usize = 512;

/// [`is_web_origin`] as a regular expression, for the OpenAPI document
/// (which adds [`MAX_ORIGIN_LEN`]).
pub const WEB_ORIGIN_PATTERN: &str = r"^https?://[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*(:[0-9]{1,5})?$";

/// The longest URL a tenant may name and [`is_http_url`] as a regular
/// expression: the protocol's, whose webhook bodies say them too.
pub use switchboard_protocol::fields::{HTTP_URL_PATTERN, MAX_HTTP_URL_LEN};

/// The longest a push may wait for the device's own ack: jobs wait out
/// their delay while the consumer's ack_wait (60 s) runs.
pub const MAX_PUSH_DELAY_MS: u64 = 30_000;

/// An Ed25519 public key as tenants give it: 32 bytes in canonical
/// base64, standard (padded) or URL-safe (unpadded).
pub const ED25519_KEY_PATTERN: &str =
    "^([A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=|[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048])$";

/// A host and optional port as origins and push URLs may name them: DNS
/// labels (an IPv4 address is four of them), then `:port`.
fn is_host_and_port(authority: &str) -> bool {
    let (host, port) = match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let port_ok =
        port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    host.split('.').all(label_ok) && port_ok
}

/// Whether `origin` is a web origin as browsers send it: `http` or
/// `https`, a host name or IPv4 address, an optional port, and nothing
/// else (no path, no trailing slash, no wildcard). The OpenAPI document's
/// pattern for `allowed_origins` says the same.
pub fn is_web_origin(origin: &str) -> bool {
    if origin.len() > MAX_ORIGIN_LEN {
        return false;
    }
    origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .is_some_and(is_host_and_port)
}

/// Whether `url` is an `http(s)` URL a tenant may name (a push webhook,
/// a JWKS): a host name or IPv4 address, an optional port, and a path of
/// printable characters.
pub fn is_http_url(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return false;
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    url.len() <= MAX_HTTP_URL_LEN
        && is_host_and_port(authority)
        && path.bytes().all(|b| b.is_ascii_graphic())
}

/// Refuses anything but web origins (`https://host[:port]`), naming the
/// first one that is not.
pub fn check_origins(origins: &[String]) -> Result<(), TenantError> {
    match origins.iter().find(|o| !is_web_origin(o)) {
        Some(bad) => Err(TenantError::Invalid(format!(
            "{bad:?} is not a web origin: scheme, host and port only, as in https://chat.example.com"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::{check_origins, is_web_origin};

    #[test]
    fn web_origins_are_scheme_host_and_port() {
        for ok in [
            "https://chat.example.com",
            "http://localhost:8080",
            "http://127.0.0.1",
        ] {
            assert!(is_web_origin(ok), "{ok}");
        }
        for bad in [
            "chat.example.com",
            "https://chat.example.com/",
            "https://*.example.com",
            "http://Vd[:OM1",
            "https://a..b",
            "https://-a.b",
            "https://a.b:",
            "https://a.b:123456",
            "https://[.fe]",
            "ftp://a.b",
            "null",
        ] {
            assert!(!is_web_origin(bad), "{bad}");
        }
        assert!(super::is_http_url("https://push.example.com:8443/hook?a=b"));
        assert!(super::is_http_url("http://127.0.0.1:9000/hook"));
        assert!(!super::is_http_url("https://[::1]/hook"));
        assert!(!super::is_http_url("https://a b/hook"));
        assert!(!super::is_http_url("https://a/ho ok"));
    }

    /// The regular expressions the OpenAPI document states the grammar by
    /// say what the functions say: the same examples pass and fail both.
    #[test]
    fn the_patterns_agree_with_the_functions() {
        let origin = regex::Regex::new(super::WEB_ORIGIN_PATTERN).unwrap();
        let push_url = regex::Regex::new(super::HTTP_URL_PATTERN).unwrap();
        let label = "a".repeat(63);
        // An origin of `len` bytes (`len - 8` not a multiple of 10).
        let long_origin = |len: usize| {
            let host = len - "https://".len();
            format!(
                "https://{}{}",
                "abcdefghi.".repeat(host / 10),
                "b".repeat(host % 10)
            )
        };
        let examples = [
            "https://chat.example.com",
            "http://localhost:8080",
            "http://127.0.0.1",
            "https://push.example.com:8443/hook?a=b",
            "http://127.0.0.1:9000/hook",
            "https://a.b/",
            "https://a.b:1",
            "https://A-1.b2",
            &format!("https://{label}.example"),
            &format!("https://{label}a.example"),
            &long_origin(super::MAX_ORIGIN_LEN),
            &long_origin(super::MAX_ORIGIN_LEN + 1),
            "chat.example.com",
            "https://*.example.com",
            "http://Vd[:OM1",
            "https://a..b",
            "https://-a.b",
            "https://a-.b",
            "https://a.b:",
            "https://a.b:123456",
            "https://[.fe]",
            "https://[::1]/hook",
            "https://a b/hook",
            "https://a/ho ok",
            "https://a/h\u{e9}",
            "https://\u{e9}.b",
            "https://",
            "ftp://a.b",
            "null",
            "",
        ];
        for e in examples {
            let as_origin = origin.is_match(e) && e.len() <= super::MAX_ORIGIN_LEN;
            assert_eq!(as_origin, is_web_origin(e), "origin {e:?}");
            let as_push = push_url.is_match(e) && e.len() <= super::MAX_HTTP_URL_LEN;
            assert_eq!(as_push, super::is_http_url(e), "push URL {e:?}");
        }
        let too_long = format!("https://a.b/{}", "p".repeat(super::MAX_HTTP_URL_LEN));
        assert!(push_url.is_match(&too_long) && !super::is_http_url(&too_long));
        assert!(check_origins(&["https://a.b".into(), "http://c:1".into()]).is_ok());
        assert!(check_origins(&["https://a.b".into(), "https://a.b/".into()]).is_err());
    }
}
