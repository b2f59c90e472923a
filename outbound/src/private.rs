//! Which addresses a tenant's settings may not reach, and the client
//! pieces that refuse them: at the URL, at every name resolution, at
//! every redirect.

use std::net::{IpAddr, SocketAddr};

/// What a refusal of a private target says, whichever check made it, so
/// that a caller tells it from a failure worth retrying.
pub(crate) const PRIVATE_REFUSAL: &str = "private addresses";

/// Whether an address is one a tenant's settings may not reach unless the
/// operator allows it: loopback, private (RFC 1918, unique local),
/// link-local (cloud metadata services live there), shared (carrier-grade
/// NAT), unspecified, broadcast, multicast, benchmarking or documentation
/// ranges.
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

/// The private address `url` names as its host, if it names one literally
/// (names are checked when they resolve, by [`PublicOnly`]).
pub fn private_literal(url: &reqwest::Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    let ip = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .ok()?;
    is_private(ip).then_some(ip)
}

/// Resolves host names, refusing the private addresses among the answers.
/// `setting` names the configuration that allows them, for the error.
#[derive(Debug, Clone, Copy)]
pub struct PublicOnly {
    pub setting: &'static str,
}

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let setting = self.setting;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let public: Vec<SocketAddr> = found.filter(|a| !is_private(a.ip())).collect();
            if public.is_empty() {
                let refused: Box<dyn std::error::Error + Send + Sync> = format!(
                    "{host} resolves only to {PRIVATE_REFUSAL}, which may not be called (see {setting})"
                )
                .into();
                return Err(refused);
            }
            let addrs: reqwest::dns::Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}

/// A client builder for calls to tenants' addresses: no proxy, and unless
/// `allow_private`, names resolved by [`PublicOnly`]. Redirects are the
/// caller's choice (`Policy::none()`, or [`redirects`]).
pub fn client_builder(allow_private: bool, setting: &'static str) -> reqwest::ClientBuilder {
    let b = reqwest::Client::builder().no_proxy();
    if allow_private {
        b
    } else {
        b.dns_resolver(std::sync::Arc::new(PublicOnly { setting }))
    }
}

/// Follows at most `max` redirects, none to a private address literal
/// unless `allow_private` (a name is checked when it resolves).
pub fn redirects(max: usize, allow_private: bool) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > max {
            attempt.error(format!("more than {max} redirects"))
        } else if !allow_private && let Some(ip) = private_literal(attempt.url()) {
            attempt.error(format!("a redirect to the private address {ip}"))
        } else {
            attempt.follow()
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn private_ranges_are_private_and_public_ones_are_not() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "198.18.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "100.128.0.1"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn literal_hosts_are_read_from_urls() {
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        assert!(private_literal(&url("http://127.0.0.1:8222/varz")).is_some());
        assert!(private_literal(&url("http://[::1]/")).is_some());
        assert!(private_literal(&url("https://id.example/jwks")).is_none());
        assert!(private_literal(&url("https://8.8.8.8/")).is_none());
    }

    #[tokio::test]
    async fn names_resolving_inside_are_refused() {
        use reqwest::dns::Resolve;
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        let only = PublicOnly { setting: "a test" };
        assert!(only.resolve(name).await.is_err());
    }
}
