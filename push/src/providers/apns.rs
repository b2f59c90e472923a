//! Apple Push Notification service, token-based authentication over
//! HTTP/2.
//!
//! The provider token is a JWT signed with the team's `.p8` key (ES256,
//! header `kid` = key id, claims `iss` = team id and `iat`); Apple accepts
//! one for an hour and refuses new ones more often than every 20 minutes,
//! so it is made once per 40 minutes and reused. Each push is `POST
//! {base_url}/3/device/{token}` with `apns-topic`, `apns-push-type: alert`
//! and `apns-collapse-id` (the conversation, so the device shows one
//! notification per conversation).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use switchboard_nats::push_jobs::SendJob;
use switchboard_nats::records::push_tokens::{APNS_TOKEN_RULE, apns_token_ok};
use switchboard_nats::records::tenants::ApnsSettings;
use tokio::sync::Mutex;

use super::{Attempt, Clients, answer, by_status};

const TOKEN_LIFE: Duration = Duration::from_secs(40 * 60);

#[derive(Default)]
pub struct Apns {
    /// (team id, key id) → provider token and when it was made.
    tokens: Mutex<HashMap<(String, String), (String, Instant)>>,
}

#[derive(serde::Serialize)]
struct Claims<'a> {
    iss: &'a str,
    iat: u64,
}

/// `apns-collapse-id` is at most 64 bytes; longer conversation ids are
/// replaced by a digest of themselves.
pub fn collapse_id(conversation: &str) -> String {
    if conversation.len() <= 64 {
        return conversation.to_owned();
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, conversation.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The body of one push.
pub fn payload(job: &SendJob) -> serde_json::Value {
    let mut alert = serde_json::json!({ "title": job.title });
    if let Some(body) = &job.body {
        alert["body"] = serde_json::json!(body);
    }
    let mut aps = serde_json::json!({
        "alert": alert,
        "sound": "default",
        "thread-id": job.conversation_id,
    });
    if let Some(badge) = job.badge {
        aps["badge"] = serde_json::json!(badge);
    }
    serde_json::json!({
        "aps": aps,
        "conversation_id": job.conversation_id,
        "message_id": job.message_id,
        "seq": job.seq,
        "sender_id": job.sender,
    })
}

impl Apns {
    async fn provider_token(&self, s: &ApnsSettings) -> Result<String, Attempt> {
        let key = (s.team_id.clone(), s.key_id.clone());
        let mut tokens = self.tokens.lock().await;
        if let Some((token, made)) = tokens.get(&key)
            && made.elapsed() < TOKEN_LIFE
        {
            return Ok(token.clone());
        }
        let signing = jsonwebtoken::EncodingKey::from_ec_pem(s.private_key.as_bytes())
            .map_err(|e| Attempt::Fatal(format!("the APNs key is not a P-256 PEM key: {e}")))?;
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(s.key_id.clone());
        let iat =
            u64::try_from(switchboard_protocol::Timestamp::now().unix_ms() / 1000).unwrap_or(0);
        let token = jsonwebtoken::encode(
            &header,
            &Claims {
                iss: &s.team_id,
                iat,
            },
            &signing,
        )
        .map_err(|e| Attempt::Fatal(format!("signing the APNs token: {e}")))?;
        tokens.insert(key, (token.clone(), Instant::now()));
        Ok(token)
    }

    pub async fn send(&self, clients: &Clients, s: &ApnsSettings, job: &SendJob) -> Attempt {
        // The token goes into the URL's path: checked again here, as the
        // job may come from anywhere on the backbone (a replayed dead
        // letter, an operator's publish).
        if !apns_token_ok(&job.token) {
            return Attempt::Gone(format!("APNs: the device token is not {APNS_TOKEN_RULE}"));
        }
        let token = match self.provider_token(s).await {
            Ok(t) => t,
            Err(attempt) => return attempt,
        };
        let url = format!(
            "{}/3/device/{}",
            s.base_url.trim_end_matches('/'),
            job.token
        );
        let response = clients
            .h2
            .post(url)
            .header("authorization", format!("bearer {token}"))
            .header("apns-topic", &s.topic)
            .header("apns-push-type", "alert")
            .header("apns-priority", "10")
            .header(
                "apns-collapse-id",
                collapse_id(job.conversation_id.as_str()),
            )
            .json(&payload(job))
            .send()
            .await;
        // An error's reason is a small JSON object: judged on what fits.
        let (status, text) = match answer(response, clients.caps.parsed).await {
            Ok(a) => (a.status, a.text),
            Err(attempt) => return attempt,
        };
        match status {
            400 if text.contains("BadDeviceToken") => Attempt::Gone(format!("APNs: {text}")),
            403 if text.contains("ExpiredProviderToken") => {
                self.tokens
                    .lock()
                    .await
                    .remove(&(s.team_id.clone(), s.key_id.clone()));
                Attempt::Retry(format!("APNs: {text}"))
            }
            _ => by_status(status, &text),
        }
    }
}
