//! The push providers: one call per push, and what its answer means.

pub mod apns;
pub mod fcm;
#[cfg(test)]
pub(crate) mod test_server;
pub mod webhook;

use std::time::Duration;

use switchboard_nats::push_jobs::SendJob;

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

/// How much of a provider's answer is read. A tenant chooses its
/// webhook and provider URLs, so an answer may be hostile: endless,
/// huge, or trickled. Reading stops at the cap and the response is
/// dropped, which closes the connection (HTTP/1.1) or resets the stream
/// (HTTP/2), so the rest never reaches this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerCaps {
    /// An answer whose status is all that matters (the webhook's): this
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
pub(crate) struct Answer {
    pub status: u16,
    /// The body, or its first `cap` bytes, as text (lossy).
    pub text: String,
    /// The body is longer than the cap: `text` is its start.
    pub over_cap: bool,
    /// The body broke off (a timeout, a reset): `text` is what arrived.
    pub broke_off: bool,
}

/// Reads at most `cap` bytes of the body, then drops the response.
pub(crate) async fn read_capped(mut response: reqwest::Response, cap: usize) -> Answer {
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

/// The status and the start of the body of a provider's answer (at most
/// `cap` bytes), or what a request that got none means.
pub(crate) async fn answer(
    response: Result<reqwest::Response, reqwest::Error>,
    cap: usize,
) -> Result<Answer, Attempt> {
    match response {
        Ok(r) => Ok(read_capped(r, cap).await),
        Err(e) => Err(transport(&e)),
    }
}

/// Refuses a target URL whose host is a private address literal (names
/// are checked when they resolve), unless `allow_private`
/// (`switchboard_outbound`).
pub(crate) fn check_target(url: &str, allow_private: bool) -> Result<(), Attempt> {
    if allow_private {
        return Ok(());
    }
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| Attempt::Fatal(format!("the target URL {url:?} does not parse: {e}")))?;
    match switchboard_outbound::private_literal(&parsed) {
        Some(_) => Err(Attempt::Fatal(format!(
            "the target {url} is a private address, which push targets may not be (see {ALLOW_PRIVATE})"
        ))),
        None => Ok(()),
    }
}

/// The setting that lets push targets and webhooks be private addresses.
const ALLOW_PRIVATE: &str = "[push] allow_private_targets";

/// The HTTP clients the providers share, and how they read answers.
pub struct Clients {
    /// HTTP/1.1 or HTTP/2, as the server offers (webhooks, FCM).
    pub http: reqwest::Client,
    /// HTTP/2 only: APNs refuses anything else.
    pub h2: reqwest::Client,
    /// Whether targets may be private addresses (`[push]
    /// allow_private_targets`, for an operator's own proxy or tests).
    pub allow_private: bool,
    /// How much of an answer is read.
    pub caps: AnswerCaps,
}

/// How a provider call is bounded in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// The whole call: connecting, sending, the answer's head and as much
    /// of its body as is read.
    pub call: Duration,
    /// Connecting (TCP and TLS), within `call`.
    pub connect: Duration,
}

/// The most header bytes an HTTP/2 answer may carry (hyper's own bound
/// of HTTP/1.1 heads is about as large).
const MAX_HEADER_LIST_BYTES: u32 = 64 * 1024;

impl Clients {
    /// `extra_root` adds a trusted CA (PEM) besides the public ones, for
    /// a private provider proxy or a test server.
    /// Redirects are never followed: a provider does not redirect, and a
    /// redirect could lead a tenant's webhook anywhere. Unless
    /// `allow_private`, no target may be a private address; no proxy is
    /// used (`switchboard_outbound`).
    pub fn new(
        timeouts: Timeouts,
        extra_root: Option<&[u8]>,
        allow_private: bool,
        caps: AnswerCaps,
    ) -> Result<Self, reqwest::Error> {
        let build = |h2_only: bool| {
            let mut b = switchboard_outbound::client_builder(allow_private, ALLOW_PRIVATE)
                .timeout(timeouts.call)
                .connect_timeout(timeouts.connect.min(timeouts.call))
                .http2_max_header_list_size(MAX_HEADER_LIST_BYTES)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent("switchboard-push");
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
            caps,
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

    fn clients(caps: AnswerCaps) -> Clients {
        let timeouts = Timeouts {
            call: Duration::from_secs(5),
            connect: Duration::from_secs(1),
        };
        Clients::new(timeouts, None, true, caps).unwrap()
    }

    async fn read(url: &str, cap: usize) -> Answer {
        let c = clients(AnswerCaps::default());
        answer(c.http.post(url).send().await, cap).await.unwrap()
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
