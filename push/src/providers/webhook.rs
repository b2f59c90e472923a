//! The tenant's webhook: one JSON POST per push, signed so the tenant can
//! tell it came from Switchboard.
//!
//! `X-Switchboard-Timestamp` is the Unix time in seconds, and
//! `X-Switchboard-Signature` is `v1=` and the hex HMAC-SHA256, keyed with
//! the tenant's webhook secret, of `<timestamp>.<body>`. A receiver
//! recomputes it over the raw body and refuses old timestamps (replays).
//!
//! Only the answer's status counts: at most `AnswerCaps::status_only`
//! bytes of its body are read (for the error text of a failure).

use switchboard_nats::push_jobs::SendJob;
use switchboard_nats::records::tenants::WebhookSettings;

use switchboard_outbound::signature;

use super::{Attempt, Clients, answer, app_data, by_status};

pub fn body(job: &SendJob) -> serde_json::Value {
    serde_json::json!({
        "tenant": job.tenant,
        "user_id": job.user,
        "device_id": job.device,
        "provider": job.provider,
        "token": job.token,
        "title": job.title,
        "body": job.body,
        "badge": job.badge,
        "data": app_data(job),
    })
}

pub async fn send(clients: &Clients, settings: &WebhookSettings, job: &SendJob) -> Attempt {
    let body = match serde_json::to_vec(&body(job)) {
        Ok(b) => b,
        Err(e) => return Attempt::Fatal(e.to_string()),
    };
    let timestamp = switchboard_protocol::Timestamp::now().unix_ms() / 1000;
    let response = clients
        .http
        .post(&settings.url)
        .header("content-type", "application/json")
        .header("x-switchboard-timestamp", timestamp.to_string())
        .header(
            "x-switchboard-signature",
            signature(&settings.secret, timestamp, &body),
        )
        .body(body)
        .send()
        .await;
    match answer(response, clients.caps.status_only).await {
        Ok(a) => by_status(a.status, &a.text),
        Err(attempt) => attempt,
    }
}
