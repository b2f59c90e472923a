//! Fetching a stranger's URL (link previews, v1.3): a GET that follows
//! redirects one hop at a time, checking every hop's address, and reads
//! at most a given number of bytes within one deadline for the whole
//! fetch, redirects included.
//!
//! Where the webhooks' policy is all or nothing (`allow_private_targets`),
//! a fetch has a list: private networks the operator names
//! ([`FetchPolicy::allow`], none by default) may be reached, every other
//! private address may not, whether a URL names it, a name resolves to
//! it, or a redirect leads there.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::private::{PRIVATE_REFUSAL, is_private};

/// A network, as `10.0.0.0/8` or `::1/128` (a bare address is its own /32
/// or /128).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl Network {
    pub fn parse(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|e| format!("{s:?} is no address or network: {e}"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s:?}: the prefix must be 0 to {max}"))?,
            None => max,
        };
        Ok(Self { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let bits = |a: IpAddr| -> (u128, u32) {
            match a {
                IpAddr::V4(v) => (u128::from(u32::from(v)), 32),
                IpAddr::V6(v) => (u128::from(v), 128),
            }
        };
        let ip = match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => return false,
            },
            _ => ip,
        };
        let ((net, width), (ip, ip_width)) = (bits(self.addr), bits(ip));
        if width != ip_width {
            return false;
        }
        let shift = width - u32::from(self.prefix);
        shift >= width || (net >> shift) == (ip >> shift)
    }
}

/// Which addresses a fetch may reach: every public one, and the private
/// networks the operator allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchPolicy {
    pub allow: Vec<Network>,
    /// The setting that allows private networks, named in refusals.
    pub setting: &'static str,
}

impl FetchPolicy {
    pub fn reaches(&self, ip: IpAddr) -> bool {
        !is_private(ip) || self.allow.iter().any(|n| n.contains(ip))
    }
}

/// Resolves host names to the addresses the policy lets a fetch reach.
struct PolicyResolver(Arc<FetchPolicy>);

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let reachable: Vec<SocketAddr> = found.filter(|a| policy.reaches(a.ip())).collect();
            if reachable.is_empty() {
                let refused: Box<dyn std::error::Error + Send + Sync> = format!(
                    "{host} resolves only to {PRIVATE_REFUSAL}, which may not be fetched (see {})",
                    policy.setting
                )
                .into();
                return Err(refused);
            }
            let addrs: reqwest::dns::Addrs = Box::new(reachable.into_iter());
            Ok(addrs)
        })
    }
}

/// How fetches are bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchConfig {
    /// The whole fetch: every hop, and as much of the body as is read.
    pub deadline: Duration,
    /// Connecting, per hop.
    pub connect: Duration,
    /// Redirects followed at most.
    pub max_redirects: usize,
    pub policy: FetchPolicy,
}

/// Why a fetch gave nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("not an http(s) URL: {0}")]
    BadUrl(String),
    #[error("the target is {0}")]
    Private(String),
    #[error("HTTP {0}")]
    Status(u16),
    #[error("more than {0} redirects")]
    Redirects(usize),
    #[error("no answer within {0:?}")]
    Deadline(Duration),
    #[error("request failed: {0}")]
    Transport(String),
}

/// What a fetch read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// Where it ended, after redirects.
    pub url: reqwest::Url,
    /// The answer's `Content-Type`, lower case, without parameters.
    pub content_type: Option<String>,
    /// The body, or its first `max_bytes`.
    pub body: Vec<u8>,
    /// The body was longer: `body` is its start.
    pub over_cap: bool,
}

/// GETs within a [`FetchConfig`].
pub struct Fetcher {
    client: reqwest::Client,
    config: FetchConfig,
}

impl Fetcher {
    pub fn new(config: FetchConfig, user_agent: &'static str) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .dns_resolver(Arc::new(PolicyResolver(Arc::new(config.policy.clone()))))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.connect.min(config.deadline))
            .timeout(config.deadline)
            .user_agent(user_agent)
            .build()?;
        Ok(Self { client, config })
    }

    /// GETs `url` asking for `accept`, following redirects hop by hop,
    /// and reads at most `max_bytes` of the final answer's body.
    pub async fn get(
        &self,
        url: &str,
        accept: &str,
        max_bytes: usize,
    ) -> Result<Fetched, FetchError> {
        let deadline = Instant::now() + self.config.deadline;
        let late = || FetchError::Deadline(self.config.deadline);
        let mut url = reqwest::Url::parse(url).map_err(|e| FetchError::BadUrl(e.to_string()))?;
        for _ in 0..=self.config.max_redirects {
            self.check(&url)?;
            let sent = self
                .client
                .get(url.clone())
                .header(reqwest::header::ACCEPT, accept)
                .send();
            let response = tokio::time::timeout_at(deadline, sent)
                .await
                .map_err(|_| late())?
                .map_err(|e| transport(&e))?;
            let status = response.status();
            if status.is_redirection() {
                let next = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| url.join(l).ok())
                    .ok_or(FetchError::Status(status.as_u16()))?;
                url = next;
                continue;
            }
            if !status.is_success() {
                return Err(FetchError::Status(status.as_u16()));
            }
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(|v| {
                    v.split(';')
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_ascii_lowercase()
                });
            let (body, over_cap) =
                tokio::time::timeout_at(deadline, read_at_most(response, max_bytes))
                    .await
                    .map_err(|_| late())??;
            return Ok(Fetched {
                url,
                content_type,
                body,
                over_cap,
            });
        }
        Err(FetchError::Redirects(self.config.max_redirects))
    }

    /// A hop's URL: http(s), and not a private address literal the
    /// policy does not allow (names are checked as they resolve).
    fn check(&self, url: &reqwest::Url) -> Result<(), FetchError> {
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(FetchError::BadUrl(url.to_string()));
        }
        let literal = url
            .host_str()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>();
        match literal {
            Ok(ip) if !self.config.policy.reaches(ip) => Err(FetchError::Private(format!(
                "the private address {ip} (see {})",
                self.config.policy.setting
            ))),
            _ => Ok(()),
        }
    }
}

/// At most `cap` bytes of the body; whether there was more. Dropping the
/// response closes the connection, so the rest never arrives.
async fn read_at_most(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<(Vec<u8>, bool), FetchError> {
    if response.content_length().is_some_and(|n| n > cap as u64) {
        return Ok((Vec::new(), true));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport(&e))? {
        let room = cap.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

fn transport(e: &reqwest::Error) -> FetchError {
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why = format!("{why}: {s}");
        source = s.source();
    }
    if why.contains(PRIVATE_REFUSAL) {
        FetchError::Private(why)
    } else {
        FetchError::Transport(why)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::test_server;

    fn fetcher(allow: &[&str], deadline_ms: u64) -> Fetcher {
        Fetcher::new(
            FetchConfig {
                deadline: Duration::from_millis(deadline_ms),
                connect: Duration::from_millis(500),
                max_redirects: 3,
                policy: FetchPolicy {
                    allow: allow.iter().map(|n| Network::parse(n).unwrap()).collect(),
                    setting: "[previews] allow_private",
                },
            },
            "switchboard-test",
        )
        .unwrap()
    }

    #[test]
    fn networks_contain_their_addresses() {
        let n = Network::parse("10.0.0.0/8").unwrap();
        assert!(n.contains("10.200.1.1".parse().unwrap()));
        assert!(!n.contains("11.0.0.1".parse().unwrap()));
        assert!(n.contains("::ffff:10.0.0.1".parse().unwrap()));
        let one = Network::parse("127.0.0.1").unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        assert!(
            Network::parse("::1/128")
                .unwrap()
                .contains("::1".parse().unwrap())
        );
        assert!(
            Network::parse("0.0.0.0/0")
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
        assert!(Network::parse("10.0.0.0/33").is_err());
        assert!(Network::parse("nope").is_err());
    }

    #[tokio::test]
    async fn a_private_address_is_refused_unless_its_network_is_allowed() {
        let url = test_server::answer_with(200, b"<html></html>".to_vec()).await;
        let refused = fetcher(&[], 2_000).get(&url, "*/*", 1024).await;
        assert!(
            matches!(refused, Err(FetchError::Private(_))),
            "{refused:?}"
        );
        let page = fetcher(&["127.0.0.1/32"], 2_000)
            .get(&url, "*/*", 1024)
            .await
            .unwrap();
        assert_eq!(page.body, b"<html></html>");
        let named = url.replace("127.0.0.1", "localhost");
        let refused = fetcher(&[], 2_000).get(&named, "*/*", 1024).await;
        assert!(
            matches!(refused, Err(FetchError::Private(_))),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn an_endless_body_is_read_to_the_cap() {
        let (url, _) = test_server::endless(200).await;
        let got = fetcher(&["127.0.0.1"], 5_000)
            .get(&url, "*/*", 100_000)
            .await
            .unwrap();
        assert_eq!((got.body.len(), got.over_cap), (100_000, true));
    }

    #[tokio::test]
    async fn non_http_schemes_are_refused() {
        for url in ["file:///etc/passwd", "gopher://x.example/", "http://"] {
            let got = fetcher(&["0.0.0.0/0"], 1_000).get(url, "*/*", 10).await;
            assert!(matches!(got, Err(FetchError::BadUrl(_))), "{url}: {got:?}");
        }
    }
}
