//! One webhook POST: the event as its body, signed, bounded in time and
//! in how much of the answer is read (`switchboard_outbound::Clients`,
//! shared with the push providers: no private address unless the operator
//! allows them).

use switchboard_protocol::webhooks::{WebhookEndpoint, WebhookEvent};

use switchboard_outbound::{Attempt, Clients, answer, by_status, signature};

/// `Switchboard-Signature`: `t=<unix seconds>,v1=<hex HMAC-SHA256 of
/// "<t>.<body>">` keyed with the endpoint's secret.
pub fn signature_header(secret: &str, unix: i64, body: &[u8]) -> String {
    format!("t={unix},{}", signature(secret, unix, body))
}

pub(super) async fn post(
    clients: &Clients,
    endpoint: &WebhookEndpoint,
    event: &WebhookEvent,
    body: &[u8],
) -> Attempt {
    if let Err(refused) = clients.check_target(&endpoint.url) {
        return refused;
    }
    let unix = switchboard_protocol::Timestamp::now().unix_ms() / 1000;
    let response = clients
        .http
        .post(&endpoint.url)
        .header("content-type", "application/json")
        .header(
            "switchboard-signature",
            signature_header(&endpoint.secret, unix, body),
        )
        .header("switchboard-event-id", event.id.as_str())
        .header("switchboard-event-type", event.kind.as_str())
        .body(body.to_vec())
        .send()
        .await;
    match answer(response, clients.caps.status_only).await {
        // A webhook that answers 410 wants no more; it is still a failure
        // of this event, kept in the dead letters like any other.
        Ok(a) => match by_status(a.status, &a.text) {
            Attempt::Gone(why) => Attempt::Fatal(why),
            other => other,
        },
        Err(attempt) => attempt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_header_names_its_time_and_covers_the_body() {
        let h = signature_header("webhook-secret-0123", 1_700_000_000, b"{}");
        let (t, v1) = h.split_once(',').unwrap();
        assert_eq!(t, "t=1700000000");
        assert_eq!(v1, signature("webhook-secret-0123", 1_700_000_000, b"{}"));
    }
}
