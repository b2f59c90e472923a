//! Firebase Cloud Messaging, HTTP v1 API.
//!
//! Authentication is the service-account flow of OAuth 2.0 (RFC 7523): a
//! JWT signed with the account's RSA key (RS256) is exchanged at its token
//! endpoint for an access token, which is cached until shortly before it
//! expires. Each push is `POST {base_url}/v1/projects/{project}/messages:send`
//! with that bearer token. The conversation id is the `collapse_key` (and
//! the APNs `thread-id` when FCM relays to Apple), so the device shows one
//! notification per conversation.
//!
//! Each service account's token is fetched under a lock of its own, so a
//! tenant whose token endpoint hangs holds up only its own pushes. The
//! token endpoint's answer is parsed within `AnswerCaps::parsed` bytes
//! (one over it is refused), and its `expires_in` is trusted up to an
//! hour, Google's own lifetime.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use switchboard_nats::push_jobs::SendJob;
use switchboard_nats::records::tenants::FcmSettings;
use tokio::sync::Mutex;

use super::{Attempt, Clients, answer, app_data, by_status, transport};

pub const SCOPE: &str = "https://www.googleapis.com/auth/firebase.messaging";

/// An access token and when to stop using it.
type Cached = Option<(String, Instant)>;

/// Which service account a token is for: (client email, token URL).
type AccountKey = (String, String);

#[derive(Default)]
pub struct Fcm {
    /// Each service account's token, behind a lock of its own (held
    /// while a new one is fetched, so a burst fetches one).
    tokens: std::sync::Mutex<HashMap<AccountKey, Arc<Mutex<Cached>>>>,
}

/// The longest an access token is used, whatever `expires_in` says.
const MAX_TOKEN_LIFE: Duration = Duration::from_secs(3600);

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
    let mut android =
        serde_json::json!({ "collapse_key": job.conversation_id, "priority": "high" });
    let mut aps = serde_json::json!({ "thread-id": job.conversation_id });
    if let Some(badge) = job.badge {
        android["notification"] = serde_json::json!({ "notification_count": badge });
        aps["badge"] = serde_json::json!(badge);
    }
    serde_json::json!({
        "message": {
            "token": job.token,
            "notification": notification,
            "data": app_data(job),
            "android": android,
            "apns": { "payload": { "aps": aps } },
        }
    })
}

impl Fcm {
    /// The lock of one service account's token.
    fn slot(&self, key: &AccountKey) -> Arc<Mutex<Cached>> {
        let mut slots = match self.tokens.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        slots.entry(key.clone()).or_default().clone()
    }

    /// Forgets a token the API refused.
    async fn forget(&self, key: &AccountKey) {
        *self.slot(key).lock().await = None;
    }

    async fn access_token(&self, clients: &Clients, s: &FcmSettings) -> Result<String, Attempt> {
        let key = (s.client_email.clone(), s.token_url.clone());
        let slot = self.slot(&key);
        let mut cached = slot.lock().await;
        if let Some((token, until)) = cached.as_ref()
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
        let response = clients
            .http
            .post(&s.token_url)
            .form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                ("assertion", assertion.as_str()),
            ])
            .send()
            .await
            .map_err(|e| transport(&e))?;
        let cap = clients.caps.parsed;
        let a = super::read_capped(response, cap).await;
        if !(200..300).contains(&a.status) {
            return Err(match by_status(a.status, &a.text) {
                // A refused assertion is our configuration, not the device.
                Attempt::Gone(why) | Attempt::Fatal(why) => {
                    Attempt::Fatal(format!("FCM token endpoint: {why}"))
                }
                other => other,
            });
        }
        if a.over_cap {
            return Err(Attempt::Fatal(format!(
                "FCM token endpoint: the answer is over {cap} bytes"
            )));
        }
        if a.broke_off {
            return Err(Attempt::Retry(
                "FCM token endpoint: the answer broke off".into(),
            ));
        }
        let answer: TokenAnswer = serde_json::from_str(&a.text)
            .map_err(|e| Attempt::Retry(format!("FCM token endpoint answered {e}")))?;
        // A minute early: a token must not expire on its way.
        let life = Duration::from_secs(answer.expires_in.saturating_sub(60)).min(MAX_TOKEN_LIFE);
        *cached = Some((answer.access_token.clone(), Instant::now() + life));
        Ok(answer.access_token)
    }

    pub async fn send(&self, clients: &Clients, s: &FcmSettings, job: &SendJob) -> Attempt {
        let token = match self.access_token(clients, s).await {
            Ok(t) => t,
            Err(attempt) => return attempt,
        };
        let url = format!(
            "{}/v1/projects/{}/messages:send",
            s.base_url.trim_end_matches('/'),
            s.project_id
        );
        let response = clients
            .http
            .post(url)
            .bearer_auth(token)
            .json(&message(job))
            .send()
            .await;
        // An error's reason is a small JSON object: judged on what fits.
        let (status, text) = match answer(response, clients.caps.parsed).await {
            Ok(a) => (a.status, a.text),
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
                self.forget(&(s.client_email.clone(), s.token_url.clone()))
                    .await;
                Attempt::Retry(format!("FCM refused the access token: {text}"))
            }
            _ => by_status(status, &text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_outbound::{CallConfig, test_server};

    fn settings(token_url: String) -> FcmSettings {
        let key = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/fcm-service-account.pem"
        );
        FcmSettings {
            project_id: "p".into(),
            client_email: "push@p.iam.gserviceaccount.com".into(),
            private_key: std::fs::read_to_string(key).unwrap(),
            base_url: token_url.clone(),
            token_url,
        }
    }

    fn clients() -> Clients {
        let config = CallConfig {
            allow_private_targets: true,
            ..CallConfig::default()
        };
        Clients::new(&config, "switchboard-push").unwrap()
    }

    /// A token answer of exactly `len` bytes.
    fn token_answer(len: usize, expires_in: u64) -> Vec<u8> {
        let head = format!(r#"{{"access_token":"at-1","expires_in":{expires_in},"pad":""#);
        let mut body = head.into_bytes();
        body.resize(len - 2, b'x');
        body.extend_from_slice(b"\"}");
        assert_eq!(body.len(), len);
        body
    }

    #[tokio::test]
    async fn a_token_answer_is_parsed_up_to_the_cap_and_refused_past_it() {
        let c = clients();
        let cap = c.caps.parsed;
        let at = test_server::answer_with(200, token_answer(cap, 3600)).await;
        let token = Fcm::default().access_token(&c, &settings(at)).await;
        assert_eq!(token, Ok("at-1".to_owned()));
        let past = test_server::answer_with(200, token_answer(cap + 1, 3600)).await;
        match Fcm::default().access_token(&c, &settings(past)).await {
            Err(Attempt::Fatal(why)) => assert!(why.contains("over"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_token_lifetime_past_any_clock_is_an_hour() {
        let c = clients();
        let at = test_server::answer_with(200, token_answer(100, u64::MAX)).await;
        let token = Fcm::default().access_token(&c, &settings(at)).await;
        assert_eq!(token, Ok("at-1".to_owned()));
    }
}
