//! How clients reach this gateway, from configuration only: the base of
//! the URLs it hands out (`PublicBase`), and which `Host` names it answers
//! where the configuration restricts them (`Hosts`: always in `switchboard
//! dev`). The request's `Host` is the client's to choose: a page that
//! points its own DNS name at a loopback gateway (DNS rebinding) sends that
//! name, so it is refused, and nothing is ever built from `Host`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use switchboard_protocol::ErrorCode;

use crate::config::GatewayConfig;
use crate::error::ApiError;

/// Where the URLs this gateway gives out (the local blob store's) point:
/// `public_url`, else the address it listens on, else (a wildcard
/// address) nowhere but a path on the gateway itself.
#[derive(Debug, Clone)]
pub(super) struct PublicBase(Option<Arc<str>>);

impl PublicBase {
    pub(super) fn of(config: &GatewayConfig, listening: Option<SocketAddr>) -> Self {
        if let Some(url) = &config.public_url {
            return Self(Some(url.trim_end_matches('/').into()));
        }
        let on = listening.filter(|a| !a.ip().is_unspecified());
        Self(on.map(|a| format!("http://{a}").into()))
    }

    /// `url` made absolute on this base when it is a path (an S3 URL is
    /// absolute already).
    pub(super) fn absolute(&self, url: String) -> String {
        match &self.0 {
            Some(base) if url.starts_with('/') => format!("{base}{url}"),
            _ => url,
        }
    }
}

/// The `Host` names a gateway answers when its configuration lists some:
/// loopback names and addresses always, then the configured ones and
/// `public_url`'s host.
#[derive(Debug, Clone)]
pub(super) struct Hosts {
    allowed: Arc<Vec<String>>,
}

impl Hosts {
    /// The restriction of `config`, if it has one (`allowed_hosts`).
    pub(super) fn of(config: &GatewayConfig) -> Option<Self> {
        let mut allowed: Vec<String> = config
            .allowed_hosts
            .as_ref()?
            .iter()
            .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        if let Some(host) = config.public_url.as_deref().and_then(url_authority) {
            allowed.push(host.to_ascii_lowercase());
        }
        Some(Self {
            allowed: Arc::new(allowed),
        })
    }

    /// Whether a request naming `authority` (`host[:port]`) is answered.
    fn allows(&self, authority: &str) -> bool {
        let authority = authority.trim().to_ascii_lowercase();
        let host = host_of(&authority);
        is_loopback_name(host) || self.allowed.iter().any(|a| *a == authority || a == host)
    }
}

/// The host of `scheme://authority/...`, with its port.
fn url_authority(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&rest[..end]).filter(|a| !a.is_empty())
}

/// The host of `host[:port]` or `[v6][:port]`, without a trailing dot.
fn host_of(authority: &str) -> &str {
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split_once(']').map_or(v6, |(h, _)| h)
    } else {
        match authority.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => authority,
        }
    };
    host.strip_suffix('.').unwrap_or(host)
}

/// `localhost`, a name under `.localhost` (RFC 6761: always loopback), or
/// a loopback address.
fn is_loopback_name(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// The middleware: a request naming a host this gateway does not answer
/// gets 403 `forbidden` before anything else looks at it.
pub(super) async fn check_host(
    State(hosts): State<Hosts>,
    request: Request,
    next: Next,
) -> Response {
    let named = [
        request
            .headers()
            .get(header::HOST)
            .map(|h| h.to_str().unwrap_or("\u{fffd}")),
        request.uri().authority().map(|a| a.as_str()),
    ];
    if let Some(refused) = named.into_iter().flatten().find(|h| !hosts.allows(h)) {
        return ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "this server does not answer for the host {refused:?}: use a loopback address, or add the name to allowed_hosts"
            ),
        )
        .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(allowed: &[&str], public_url: Option<&str>) -> Hosts {
        let mut config = GatewayConfig::new("g".into(), Vec::new());
        config.allowed_hosts = Some(allowed.iter().map(|h| (*h).to_owned()).collect());
        config.public_url = public_url.map(str::to_owned);
        Hosts::of(&config).unwrap()
    }

    #[test]
    fn loopback_names_and_addresses_are_always_answered() {
        let h = hosts(&[], None);
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST:8080",
            "app.localhost:3000",
            "127.0.0.1:8080",
            "127.1.2.3",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:80",
            "localhost.:8080",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "10.0.0.1:8080",
            "[::2]:8080",
            "0.0.0.0:8080",
            "",
        ] {
            assert!(!h.allows(refused), "{refused}");
        }
    }

    #[test]
    fn configured_hosts_and_the_public_url_are_answered() {
        let h = hosts(
            &["Chat.Example.com", "box:9000"],
            Some("https://gw.example:8443/base"),
        );
        assert!(h.allows("chat.example.com"));
        assert!(
            h.allows("chat.example.com:8080"),
            "a name without a port: any port"
        );
        assert!(h.allows("box:9000"));
        assert!(!h.allows("box:9001"), "a name with a port: that port");
        assert!(h.allows("gw.example:8443"));
        assert!(!h.allows("other.example"));
        assert!(Hosts::of(&GatewayConfig::new("g".into(), Vec::new())).is_none());
    }

    #[test]
    fn urls_are_made_on_the_configured_base_never_the_request() {
        let mut config = GatewayConfig::new("g".into(), Vec::new());
        let listening: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let wildcard: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let path = || "/v1/blobs/t".to_owned();
        assert_eq!(
            PublicBase::of(&config, Some(listening)).absolute(path()),
            "http://127.0.0.1:8080/v1/blobs/t"
        );
        assert_eq!(
            PublicBase::of(&config, Some(wildcard)).absolute(path()),
            "/v1/blobs/t"
        );
        config.public_url = Some("https://chat.example.com/".into());
        let base = PublicBase::of(&config, Some(listening));
        assert_eq!(base.absolute(path()), "https://chat.example.com/v1/blobs/t");
        assert_eq!(
            base.absolute("https://s3.example/x".into()),
            "https://s3.example/x"
        );
    }
}
