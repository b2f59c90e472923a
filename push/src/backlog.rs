//! Each tenant's queued sends, so that a tenant whose endpoints are stuck
//! stops queueing more: its send jobs wait in the shared `push-send`
//! consumer, and enough of them would fill the consumer's
//! `max_ack_pending` for every tenant.
//!
//! `SB_PUSH` is a work queue, so the messages on `sb.push.send.<tenant>`
//! are exactly the tenant's sends not yet done. JetStream counts them per
//! subject; the count is asked at most every [`FRESH_FOR`] per tenant, so
//! the bound is approximate: a tenant can pass it by what it queues within
//! that time.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures::StreamExt;
use switchboard_nats::push_jobs::send_subject;
use switchboard_protocol::TenantId;
use tokio::sync::Mutex;

/// How long a tenant's count is used before it is asked again.
const FRESH_FOR: Duration = Duration::from_millis(250);

pub(crate) struct Backlogs {
    stream: jetstream::stream::Stream,
    max_queued: u64,
    counted: Mutex<HashMap<TenantId, (Instant, u64)>>,
}

impl Backlogs {
    pub(crate) fn new(stream: jetstream::stream::Stream, max_queued: u64) -> Self {
        Self {
            stream,
            max_queued,
            counted: Mutex::default(),
        }
    }

    /// Whether the tenant has `max_queued` sends waiting or more. A count
    /// that cannot be had lets the sends queue: JetStream's own limits
    /// still hold.
    pub(crate) async fn full(&self, tenant: &TenantId) -> bool {
        if let Some((at, n)) = self.counted.lock().await.get(tenant)
            && at.elapsed() < FRESH_FOR
        {
            return *n >= self.max_queued;
        }
        let n = match self.queued(tenant).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(tenant = %tenant, error = %e, "counting a tenant's queued pushes failed");
                return false;
            }
        };
        let mut counted = self.counted.lock().await;
        // Forget tenants not asked about for a while, so the map holds
        // only the active ones.
        counted.retain(|_, (at, _)| at.elapsed() < FRESH_FOR * 40);
        counted.insert(tenant.clone(), (Instant::now(), n));
        n >= self.max_queued
    }

    async fn queued(&self, tenant: &TenantId) -> Result<u64, jetstream::stream::InfoError> {
        let subject = send_subject(tenant);
        let mut subjects = self.stream.info_with_subjects(&subject).await?;
        let mut n = 0;
        while let Some(entry) = subjects.next().await {
            let (s, count) = entry?;
            if s == subject {
                n += count as u64;
            }
        }
        Ok(n)
    }
}
