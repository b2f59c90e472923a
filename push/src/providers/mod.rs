//! The push providers: one call per push, and what its answer means.

pub mod apns;
pub mod fcm;
pub mod webhook;

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
    Attempt::Retry(format!("request failed: {e}"))
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

/// The HTTP clients the providers share.
pub struct Clients {
    /// HTTP/1.1 or HTTP/2, as the server offers (webhooks, FCM).
    pub http: reqwest::Client,
    /// HTTP/2 only: APNs refuses anything else.
    pub h2: reqwest::Client,
}

impl Clients {
    /// `extra_root` adds a trusted CA (PEM) besides the public ones, for
    /// a private provider proxy or a test server.
    pub fn new(timeout: Duration, extra_root: Option<&[u8]>) -> Result<Self, reqwest::Error> {
        let build = |h2_only: bool| {
            let mut b = reqwest::Client::builder()
                .timeout(timeout)
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
