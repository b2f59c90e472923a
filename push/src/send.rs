//! The send stage: one provider call per job, and what its outcome does
//! to the job.
//!
//! Attempts are counted in the job's `Sb-Push-Attempts` header, not in
//! JetStream's delivery count: a job also comes back when its tenant was
//! at its share ([`crate::share`]), and those returns are no attempts. A
//! failure worth retrying republishes the job with the count and an
//! `Sb-Push-Not-Before` time (1 s, 2 s, 4 s ... up to a minute later), and
//! acknowledges the copy in hand; a job that arrives before its time goes
//! back with a delay that ends there. After the tenant's `max_attempts`
//! the job goes to `SB_PUSH_DEAD` as it came, with the last error.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, AckKind};
use switchboard_nats::publish::publish_stored;
use switchboard_nats::push_jobs::{HEADER_PUSH_ERROR, SendJob, dead_subject, send_subject};
use switchboard_nats::records::tenants::PushSettings;
use switchboard_protocol::Timestamp;
use switchboard_protocol::push::PushProvider;

use crate::counters::PUSH_JOBS;
use crate::providers::{self, Attempt};
use crate::stage::{Ctx, ack, with_push};

/// Attempts made before this copy of a job (absent: none).
pub const HEADER_PUSH_ATTEMPTS: &str = "Sb-Push-Attempts";

/// Unix milliseconds before which a retried job is not tried again.
pub const HEADER_PUSH_NOT_BEFORE: &str = "Sb-Push-Not-Before";

/// How long until a retried job is due, if it is not yet.
pub(crate) fn not_due_for(m: &jetstream::Message) -> Option<Duration> {
    let at: i64 = header(m, HEADER_PUSH_NOT_BEFORE)?.parse().ok()?;
    let wait = at.saturating_sub(Timestamp::now().unix_ms());
    (wait > 0).then(|| Duration::from_millis(u64::try_from(wait).unwrap_or(0)))
}

fn header<'a>(m: &'a jetstream::Message, name: &str) -> Option<&'a str> {
    m.headers.as_ref()?.get(name).map(|v| v.as_str())
}

/// Attempts made before this copy: a header a worker wrote, so anything
/// that does not parse (an operator's replay without it) is none.
fn attempts_before(m: &jetstream::Message) -> u32 {
    header(m, HEADER_PUSH_ATTEMPTS)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The wait before the next attempt after `tries` attempts.
fn backoff(tries: u32) -> Duration {
    Duration::from_secs(1 << (tries.saturating_sub(1)).min(6))
}

pub(crate) async fn send_stage(ctx: &Ctx, m: jetstream::Message) {
    let job: SendJob = match serde_json::from_slice(&m.payload) {
        Ok(j) => j,
        Err(e) => {
            tracing::error!(error = %e, "dropping a push that does not decode");
            ack(&m, AckKind::Term).await;
            return;
        }
    };
    let Some(record) = with_push(ctx, &job.tenant) else {
        ack(&m, AckKind::Ack).await;
        return;
    };
    let Some(settings) = record.push.as_ref() else {
        ack(&m, AckKind::Ack).await;
        return;
    };
    let attempt = call(ctx, settings, &job).await;
    let tries = attempts_before(&m).saturating_add(1);
    let outcome = match &attempt {
        Attempt::Sent => "sent",
        Attempt::Gone(_) => "token_gone",
        Attempt::Retry(_) if tries < settings.max_attempts => "retry",
        Attempt::Retry(_) | Attempt::Fatal(_) => "dead_letter",
    };
    metrics::counter!(PUSH_JOBS, "outcome" => outcome).increment(1);
    match attempt {
        Attempt::Sent => {
            tracing::info!(tenant = %job.tenant, user = %job.user, device = %job.device, provider = ?job.provider, "push sent");
            ack(&m, AckKind::Ack).await;
        }
        Attempt::Gone(why) => {
            tracing::info!(tenant = %job.tenant, user = %job.user, device = %job.device, %why, "push token is dead; forgetting it");
            if let Err(e) = ctx
                .tokens
                .unregister(&job.tenant, &job.user, &job.device, Some(&job.token))
                .await
            {
                tracing::warn!(error = %e, "forgetting a dead push token failed");
            }
            ack(&m, AckKind::Ack).await;
        }
        Attempt::Retry(why) if tries < settings.max_attempts => {
            let delay = backoff(tries);
            tracing::info!(tenant = %job.tenant, tries, ?delay, %why, "push failed; trying again");
            retry_later(ctx, &m, &job, tries, delay).await;
        }
        Attempt::Retry(why) | Attempt::Fatal(why) => {
            tracing::warn!(tenant = %job.tenant, user = %job.user, device = %job.device, tries, %why, "push failed for good; to the dead letters");
            dead_letter(ctx, &m, &job, &why).await;
        }
    }
}

/// The provider call the job's token is for.
async fn call(ctx: &Ctx, settings: &PushSettings, job: &SendJob) -> Attempt {
    let targets_ok = |urls: &[&str]| urls.iter().try_for_each(|u| ctx.clients.check_target(u));
    match (job.provider, settings) {
        (
            PushProvider::Webhook,
            PushSettings {
                webhook: Some(w), ..
            },
        ) => match targets_ok(&[&w.url]) {
            Ok(()) => providers::webhook::send(&ctx.clients, w, job).await,
            Err(refused) => refused,
        },
        (PushProvider::Fcm, PushSettings { fcm: Some(f), .. }) => {
            match targets_ok(&[&f.base_url, &f.token_url]) {
                Ok(()) => ctx.fcm.send(&ctx.clients, f, job).await,
                Err(refused) => refused,
            }
        }
        (PushProvider::Apns, PushSettings { apns: Some(a), .. }) => {
            match targets_ok(&[&a.base_url]) {
                Ok(()) => ctx.apns.send(&ctx.clients, a, job).await,
                Err(refused) => refused,
            }
        }
        (provider, _) => Attempt::Fatal(format!(
            "the tenant has no {provider:?} settings for this device's token"
        )),
    }
}

/// Republishes the job with its attempts and when it is due, then lets
/// the copy in hand go. Should the republish fail, the copy comes back
/// after the same delay and is tried again with the old count.
async fn retry_later(
    ctx: &Ctx,
    m: &jetstream::Message,
    job: &SendJob,
    tries: u32,
    delay: Duration,
) {
    let due = Timestamp::now()
        .unix_ms()
        .saturating_add(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX));
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_PUSH_ATTEMPTS, tries.to_string().as_str());
    headers.insert(HEADER_PUSH_NOT_BEFORE, due.to_string().as_str());
    let stored = publish_stored(
        &ctx.js,
        send_subject(&job.tenant),
        headers,
        m.payload.clone(),
        "a push to retry",
    )
    .await;
    match stored {
        Ok(_) => ack(m, AckKind::Ack).await,
        Err(e) => {
            tracing::warn!(tenant = %job.tenant, error = %e, "a push to retry was not republished; it comes back as it is");
            ack(m, AckKind::Nak(Some(delay))).await;
        }
    }
}

async fn dead_letter(ctx: &Ctx, m: &jetstream::Message, job: &SendJob, why: &str) {
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_PUSH_ERROR, why.replace(['\r', '\n'], " ").as_str());
    let dead = publish_stored(
        &ctx.js,
        dead_subject(&job.tenant),
        headers,
        m.payload.clone(),
        "a dead letter",
    )
    .await;
    match dead {
        Ok(_) => ack(m, AckKind::Ack).await,
        Err(e) => {
            tracing::warn!(error = %e, "a dead letter was not stored; trying again");
            ack(m, AckKind::Nak(Some(Duration::from_secs(5)))).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_longer_each_time_up_to_a_minute() {
        let waits: Vec<u64> = (1..=9).map(|t| backoff(t).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 64, 64]);
        assert_eq!(backoff(u32::MAX).as_secs(), 64);
    }
}
