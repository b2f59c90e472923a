//! One call to an address a tenant names, and what its answer means: the
//! clients every outbound delivery shares (push providers, webhooks),
//! bounded in time and in how much of an answer is read.

use std::time::Duration;

/// What became of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    Sent,
    /// Worth trying again later (the target is down, overloaded, or our
    /// credentials needed refreshing).
    Retry(String),
    /// The target says the address is dead (HTTP 410, a provider's dead
    /// token): forget it.
    Gone(String),
    /// Will never work as it is (a bad request, a misconfiguration, a
    /// private target).
    Fatal(String),
}

/// How an HTTP status is read by every caller, unless it says more.
pub fn by_status(status: u16, body: &str) -> Attempt {
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

/// What a request that got no answer means.
pub fn transport(e: &reqwest::Error) -> Attempt {
    // `{:#}`-style chain: the refusal of a private target is the source.
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why = format!("{why}: {s}");
        source = s.source();
    }
    if why.contains(crate::private::PRIVATE_REFUSAL) {
        return Attempt::Fatal(why);
    }
    Attempt::Retry(format!("request failed: {why}"))
}

/// How much of an answer is read. A tenant chooses its webhook and
/// provider URLs, so an answer may be hostile: endless, huge, or
/// trickled. Reading stops at the cap and the response is dropped, which
/// closes the connection (HTTP/1.1) or resets the stream (HTTP/2), so the
/// rest never reaches this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerCaps {
    /// An answer whose status is all that matters (a webhook's): this
    /// much of its body is read, for the error text of a failure.
    pub status_only: usize,
    /// An answer that is parsed: the FCM token endpoint's, and FCM's and
    /// APNs' error reasons. A token answer over it is refused; an error
    /// reason is judged on what fits.
    pub parsed: usize,
}

impl Default for AnswerCaps {
    fn default() -> Self {
        Self {
            status_only: 4 * 1024,
            parsed: 16 * 1024,
        }
    }
}

/// An answer's status and the start of its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// The body, or its first `cap` bytes, as text (lossy).
    pub text: String,
    /// The body is longer than the cap: `text` is its start.
    pub over_cap: bool,
    /// The body broke off (a timeout, a reset): `text` is what arrived.
    pub broke_off: bool,
}

/// Reads at most `cap` bytes of the body, then drops the response.
pub async fn read_capped(mut response: reqwest::Response, cap: usize) -> Answer {
    let status = response.status().as_u16();
    let mut body: Vec<u8> = Vec::new();
    // A declared length over the cap: its start is still read, for the
    // error text.
    let mut over_cap = response.content_length().is_some_and(|n| n > cap as u64);
    let mut broke_off = false;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = cap.saturating_sub(body.len());
                if chunk.len() > room {
                    body.extend_from_slice(&chunk[..room]);
                    over_cap = true;
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(_) => {
                broke_off = true;
                break;
            }
        }
    }
    drop(response);
    Answer {
        status,
        text: String::from_utf8_lossy(&body).into_owned(),
        over_cap,
        broke_off,
    }
}

/// The status and the start of the body of an answer (at most `cap`
/// bytes), or what a request that got none means.
pub async fn answer(
    response: Result<reqwest::Response, reqwest::Error>,
    cap: usize,
) -> Result<Answer, Attempt> {
    match response {
        Ok(r) => Ok(read_capped(r, cap).await),
        Err(e) => Err(transport(&e)),
    }
}

/// How a call is bounded in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// The whole call: connecting, sending, the answer's head and as much
    /// of its body as is read.
    pub call: Duration,
    /// Connecting (TCP and TLS), within `call`.
    pub connect: Duration,
}

/// The deployment's settings of calls to tenants' addresses, shared by
/// the push providers and the webhooks (`[push]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallConfig {
    pub timeouts: Timeouts,
    /// A CA (PEM) to trust besides the public ones (a private proxy in
    /// front of the targets, or a test server).
    pub extra_root_pem: Option<Vec<u8>>,
    /// Whether targets may be private addresses (loopback, RFC 1918,
    /// link-local...): off by default, so a tenant cannot reach the
    /// deployment's own network.
    pub allow_private_targets: bool,
    /// How much of an answer is read.
    pub answer_caps: AnswerCaps,
}

impl Default for CallConfig {
    fn default() -> Self {
        Self {
            timeouts: Timeouts {
                call: Duration::from_secs(10),
                connect: Duration::from_secs(5),
            },
            extra_root_pem: None,
            allow_private_targets: false,
            answer_caps: AnswerCaps::default(),
        }
    }
}

/// The setting that lets push targets and webhooks be private addresses.
pub const ALLOW_PRIVATE: &str = "[push] allow_private_targets";

/// The most header bytes an HTTP/2 answer may carry (hyper's own bound
/// of HTTP/1.1 heads is about as large).
const MAX_HEADER_LIST_BYTES: u32 = 64 * 1024;

/// The HTTP clients of one kind of delivery, and how they read answers.
pub struct Clients {
    /// HTTP/1.1 or HTTP/2, as the server offers (webhooks, FCM).
    pub http: reqwest::Client,
    /// HTTP/2 only: APNs refuses anything else.
    pub h2: reqwest::Client,
    /// Whether targets may be private addresses.
    pub allow_private: bool,
    /// How much of an answer is read.
    pub caps: AnswerCaps,
}

impl Clients {
    /// Clients that name themselves `user_agent`. Redirects are never
    /// followed: a provider does not redirect, and a redirect could lead
    /// a tenant's webhook anywhere. Unless `allow_private_targets`, no
    /// target may be a private address; no proxy is used.
    pub fn new(config: &CallConfig, user_agent: &'static str) -> Result<Self, reqwest::Error> {
        let timeouts = config.timeouts;
        let build = |h2_only: bool| {
            let mut b = crate::private::client_builder(config.allow_private_targets, ALLOW_PRIVATE)
                .timeout(timeouts.call)
                .connect_timeout(timeouts.connect.min(timeouts.call))
                .http2_max_header_list_size(MAX_HEADER_LIST_BYTES)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(user_agent);
            if h2_only {
                b = b.http2_prior_knowledge();
            }
            if let Some(pem) = &config.extra_root_pem {
                b = b.add_root_certificate(reqwest::Certificate::from_pem(pem)?);
            }
            b.build()
        };
        Ok(Self {
            http: build(false)?,
            h2: build(true)?,
            allow_private: config.allow_private_targets,
            caps: config.answer_caps,
        })
    }

    /// Refuses a target URL whose host is a private address literal
    /// (names are checked when they resolve), unless private targets are
    /// allowed.
    pub fn check_target(&self, url: &str) -> Result<(), Attempt> {
        if self.allow_private {
            return Ok(());
        }
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| Attempt::Fatal(format!("the target URL {url:?} does not parse: {e}")))?;
        match crate::private::private_literal(&parsed) {
            Some(_) => Err(Attempt::Fatal(format!(
                "the target {url} is a private address, which push targets and webhooks may not be (see {ALLOW_PRIVATE})"
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::test_server;

    fn clients(allow_private: bool) -> Clients {
        let config = CallConfig {
            timeouts: Timeouts {
                call: Duration::from_secs(5),
                connect: Duration::from_secs(1),
            },
            allow_private_targets: allow_private,
            ..CallConfig::default()
        };
        Clients::new(&config, "switchboard-test").unwrap()
    }

    #[test]
    fn literal_private_targets_are_refused_unless_allowed() {
        let (closed, open) = (clients(false), clients(true));
        assert!(matches!(
            closed.check_target("https://127.0.0.1:8443/hook"),
            Err(Attempt::Fatal(_))
        ));
        assert!(matches!(
            closed.check_target("http://[::1]/hook"),
            Err(Attempt::Fatal(_))
        ));
        assert!(open.check_target("https://127.0.0.1:8443/hook").is_ok());
        assert!(closed.check_target("https://push.example.com/hook").is_ok());
    }

    #[tokio::test]
    async fn a_name_resolving_inside_is_a_fatal_attempt() {
        let got = clients(false)
            .http
            .post("http://localhost:9/hook")
            .send()
            .await;
        assert!(matches!(answer(got, 64).await, Err(Attempt::Fatal(_))));
    }

    async fn read(url: &str, cap: usize) -> Answer {
        answer(clients(true).http.post(url).send().await, cap)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn answers_are_read_up_to_the_cap_and_no_further() {
        let cap = 4096;
        let at = test_server::answer_with(500, vec![b'a'; cap]).await;
        let a = read(&at, cap).await;
        assert_eq!((a.status, a.text.len(), a.over_cap), (500, cap, false));
        let past = test_server::answer_with(500, vec![b'a'; cap + 1]).await;
        let a = read(&past, cap).await;
        assert_eq!((a.status, a.text.len(), a.over_cap), (500, cap, true));
    }

    #[tokio::test]
    async fn an_endless_answer_is_cut_and_its_connection_dropped() {
        let (url, written) = test_server::endless(200).await;
        let started = std::time::Instant::now();
        let a = read(&url, 4096).await;
        assert_eq!((a.status, a.text.len(), a.over_cap), (200, 4096, true));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "not read to the timeout"
        );
        // The server's writes fail soon: what it got out is what the
        // socket buffers held, not the body. The client's connection task
        // closes the socket on its own time, so the writes may go on for a
        // moment after the answer is returned; they must stop within 2 s.
        let written_so_far = || written.load(std::sync::atomic::Ordering::SeqCst);
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        let mut last = written_so_far();
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = written_so_far();
            if now == last {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server still writes 2 s after the answer was cut"
            );
            last = now;
        }
        assert!(last < 64 << 20, "{last} bytes went out");
    }
}
