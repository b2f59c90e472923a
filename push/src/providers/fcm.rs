//! Firebase Cloud Messaging, HTTP v1 API.
//!
//! Authentication is the service-account flow of OAuth 2.0 (RFC 7523): a
//! JWT signed with the account's RSA key (RS256) is exchanged at its token
//! endpoint for an access token, which is cached until shortly before it
//! expires. Each push is `POST {base_url}/v1/projects/{project}/messages:send`
//! with that bearer token. The conversation id is the `collapse_key` (and
//! the APNs `thread-id` when FCM relays to Apple), so the device shows one
//! notification per conversation.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Deserialize;
use switchboard_backbone::push_jobs::SendJob;
use switchboard_backbone::records::tenants::FcmSettings;
use tokio::sync::Mutex;

use super::{Attempt, answer, app_data, by_status, transport};

pub const SCOPE: &str = "https://www.googleapis.com/auth/firebase.messaging";

#[derive(Default)]
pub struct Fcm {
    /// (client email, token URL) → access token and when to stop using it.
    tokens: Mutex<HashMap<(String, String), (String, Instant)>>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    expires_in: u64,
}

#[derive(serde::Serialize)]
struct Assertion<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

/// The body of one push.
pub fn message(job: &SendJob) -> serde_json::Value {
    let mut notification = serde_json::json!({ "title": job.title });
    if let Some(body) = &job.body {
        notification["body"] = serde_json::json!(body);
    }
    serde_json::json!({
        "message": {
            "token": job.token,
            "notification": notification,
            "data": app_data(job),
            "android": { "collapse_key": job.conversation_id, "priority": "high" },
            "apns": { "payload": { "aps": { "thread-id": job.conversation_id } } },
        }
    })
}

impl Fcm {
    async fn access_token(
        &self,
        client: &reqwest::Client,
        s: &FcmSettings,
    ) -> Result<String, Attempt> {
        let key = (s.client_email.clone(), s.token_url.clone());
        let mut tokens = self.tokens.lock().await;
        if let Some((token, until)) = tokens.get(&key)
            && Instant::now() < *until
        {
            return Ok(token.clone());
        }
        let iat =
            u64::try_from(switchboard_protocol::Timestamp::now().unix_ms() / 1000).unwrap_or(0);
        let claims = Assertion {
            iss: &s.client_email,
            scope: SCOPE,
            aud: &s.token_url,
            iat,
            exp: iat + 3600,
        };
        let signing =
            jsonwebtoken::EncodingKey::from_rsa_pem(s.private_key.as_bytes()).map_err(|e| {
                Attempt::Fatal(format!(
                    "the FCM service account key is not an RSA PEM key: {e}"
                ))
            })?;
        let assertion = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
            &claims,
            &signing,
        )
        .map_err(|e| Attempt::Fatal(format!("signing the FCM assertion: {e}")))?;
        let response = client
            .post(&s.token_url)
            .form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                ("assertion", assertion.as_str()),
            ])
            .send()
            .await
            .map_err(|e| transport(&e))?;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        if !(200..300).contains(&status) {
            return Err(match by_status(status, &text) {
                // A refused assertion is our configuration, not the device.
                Attempt::Gone(why) | Attempt::Fatal(why) => {
                    Attempt::Fatal(format!("FCM token endpoint: {why}"))
                }
                other => other,
            });
        }
        let answer: TokenAnswer = serde_json::from_str(&text)
            .map_err(|e| Attempt::Retry(format!("FCM token endpoint answered {e}")))?;
        // A minute early: a token must not expire on its way.
        let until = Instant::now() + Duration::from_secs(answer.expires_in.saturating_sub(60));
        tokens.insert(key, (answer.access_token.clone(), until));
        Ok(answer.access_token)
    }

    pub async fn send(&self, client: &reqwest::Client, s: &FcmSettings, job: &SendJob) -> Attempt {
        let token = match self.access_token(client, s).await {
            Ok(t) => t,
            Err(attempt) => return attempt,
        };
        let url = format!(
            "{}/v1/projects/{}/messages:send",
            s.base_url.trim_end_matches('/'),
            s.project_id
        );
        let response = client
            .post(url)
            .bearer_auth(token)
            .json(&message(job))
            .send()
            .await;
        let (status, text) = match answer(response).await {
            Ok(a) => a,
            Err(attempt) => return attempt,
        };
        match status {
            // UNREGISTERED (404) or a token FCM no longer knows.
            404 => Attempt::Gone(format!("FCM: {text}")),
            400 if text.contains("UNREGISTERED") || text.contains("registration token") => {
                Attempt::Gone(format!("FCM: {text}"))
            }
            401 => {
                // The cached access token was revoked: the next
                // attempt gets a new one.
                self.tokens
                    .lock()
                    .await
                    .remove(&(s.client_email.clone(), s.token_url.clone()));
                Attempt::Retry(format!("FCM refused the access token: {text}"))
            }
            _ => by_status(status, &text),
        }
    }
}
