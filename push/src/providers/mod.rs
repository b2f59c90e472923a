//! The push providers: one call per push, and what its answer means.

pub mod apns;
pub mod fcm;
pub mod webhook;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use switchboard_backbone::push_jobs::SendJob;

/// What became of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    Sent,
    /// Worth trying again later (the provider is down, overloaded, or our
    /// credentials needed refreshing).
    Retry(String),
    /// The device's token is dead: forget it.
    Gone(String),
    /// Will never work as it is (a bad request, a misconfiguration).
    Fatal(String),
}

/// How an HTTP status is read by every provider, unless it says more.
pub(crate) fn by_status(status: u16, body: &str) -> Attempt {
    let why = format!(
        "HTTP {status}: {}",
        body.chars().take(300).collect::<String>()
    );
    match status {
        200..=299 => Attempt::Sent,
        408 | 429 | 500..=599 => Attempt::Retry(why),
        410 => Attempt::Gone(why),
        _ => Attempt::Fatal(why),
    }
}

pub(crate) fn transport(e: &reqwest::Error) -> Attempt {
    // `{:#}`-style chain: the refusal of a private target is the source.
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why = format!("{why}: {s}");
        source = s.source();
    }
    if why.contains("private addresses") {
        return Attempt::Fatal(why);
    }
    Attempt::Retry(format!("request failed: {why}"))
}

/// The status and body of a provider's answer, or what a request that got
/// none means.
pub(crate) async fn answer(
    response: Result<reqwest::Response, reqwest::Error>,
) -> Result<(u16, String), Attempt> {
    match response {
        Ok(r) => {
            let status = r.status().as_u16();
            Ok((status, r.text().await.unwrap_or_default()))
        }
        Err(e) => Err(transport(&e)),
    }
}

/// Whether an address is one a tenant's push settings may not reach
/// unless the operator allows it: loopback, private (RFC 1918, unique
/// local), link-local (cloud metadata services live there), shared
/// (carrier-grade NAT), unspecified, broadcast, multicast or
/// documentation ranges. A tenant's webhook could otherwise make the
/// worker call the deployment's own services.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || first == 0x2001 && v6.segments()[1] == 0x0db8
        }
    }
}

/// Resolves provider host names, refusing the private addresses among
/// the answers (`is_private`): checked on every connection, so a name
/// that later points inside (DNS rebinding) is refused too.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let public: Vec<SocketAddr> = found.filter(|a| !is_private(a.ip())).collect();
            if public.is_empty() {
                let refused: Box<dyn std::error::Error + Send + Sync> = format!(
                    "{host} resolves only to private addresses, which push targets may not be (see [push] allow_private_targets)"
                )
                .into();
                return Err(refused);
            }
            let addrs: reqwest::dns::Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}

/// Refuses a target URL whose host is a private address literal (names
/// are checked when they resolve, by `PublicOnly`), unless `allow_private`.
pub(crate) fn check_target(url: &str, allow_private: bool) -> Result<(), Attempt> {
    if allow_private {
        return Ok(());
    }
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| Attempt::Fatal(format!("the target URL {url:?} does not parse: {e}")))?;
    let literal = parsed
        .host_str()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
        .and_then(|h| h.parse::<IpAddr>().ok());
    match literal {
        Some(ip) if is_private(ip) => Err(Attempt::Fatal(format!(
            "the target {url} is a private address, which push targets may not be (see [push] allow_private_targets)"
        ))),
        _ => Ok(()),
    }
}

/// The HTTP clients the providers share.
pub struct Clients {
    /// HTTP/1.1 or HTTP/2, as the server offers (webhooks, FCM).
    pub http: reqwest::Client,
    /// HTTP/2 only: APNs refuses anything else.
    pub h2: reqwest::Client,
    /// Whether targets may be private addresses (`[push]
    /// allow_private_targets`, for an operator's own proxy or tests).
    pub allow_private: bool,
}

impl Clients {
    /// `extra_root` adds a trusted CA (PEM) besides the public ones, for
    /// a private provider proxy or a test server.
    /// Redirects are never followed: a provider does not redirect, and a
    /// redirect could lead a tenant's webhook anywhere. Unless
    /// `allow_private`, no target may be a private address.
    pub fn new(
        timeout: Duration,
        extra_root: Option<&[u8]>,
        allow_private: bool,
    ) -> Result<Self, reqwest::Error> {
        let build = |h2_only: bool| {
            let mut b = reqwest::Client::builder()
                .timeout(timeout)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent("switchboard-push");
            if !allow_private {
                b = b.dns_resolver(std::sync::Arc::new(PublicOnly));
            }
            if h2_only {
                b = b.http2_prior_knowledge();
            }
            if let Some(pem) = extra_root {
                match reqwest::Certificate::from_pem(pem) {
                    Ok(cert) => b = b.add_root_certificate(cert),
                    Err(e) => return Err(e),
                }
            }
            b.build()
        };
        Ok(Self {
            http: build(false)?,
            h2: build(true)?,
            allow_private,
        })
    }
}

/// The payload fields every provider carries for the app.
pub(crate) fn app_data(job: &SendJob) -> serde_json::Value {
    serde_json::json!({
        "conversation_id": job.conversation_id,
        "message_id": job.message_id,
        "seq": job.seq.to_string(),
        "sender_id": job.sender,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_told_apart() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            let ip: IpAddr = private.parse().unwrap();
            assert!(is_private(ip), "{private}");
        }
        for public in ["8.8.8.8", "142.250.1.1", "2607:f8b0::1", "100.128.0.1"] {
            let ip: IpAddr = public.parse().unwrap();
            assert!(!is_private(ip), "{public}");
        }
    }

    #[test]
    fn literal_private_targets_are_refused_unless_allowed() {
        assert!(matches!(
            check_target("https://127.0.0.1:8443/hook", false),
            Err(Attempt::Fatal(_))
        ));
        assert!(matches!(
            check_target("http://[::1]/hook", false),
            Err(Attempt::Fatal(_))
        ));
        assert!(check_target("https://127.0.0.1:8443/hook", true).is_ok());
        assert!(check_target("https://push.example.com/hook", false).is_ok());
    }

    #[tokio::test]
    async fn names_resolving_inside_are_refused() {
        use reqwest::dns::Resolve;
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        assert!(PublicOnly.resolve(name).await.is_err());
    }
}
