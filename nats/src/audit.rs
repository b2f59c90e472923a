//! Tenants' moderation audit logs (v1.3) on the stream `SB_AUDIT`: one
//! subject per tenant, `sb.audit.<tenant>`, one [`AuditEntry`] per
//! message, its stream sequence its id. The stream bounds each tenant's
//! log on its own (`max_msgs_per_subject`) and keeps it 400 days.
//!
//! A log is read newest first ([`page`]). JetStream reads a subject
//! forward only, so a page is read from a start time to its end, keeping
//! the last entries: first over the day before the page's end (the
//! common case, a few entries), then, if that day does not fill the page,
//! over the whole log, which the per-tenant bound keeps bounded.

use std::collections::VecDeque;
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use switchboard_protocol::moderation::AuditEntry;
use switchboard_protocol::{TenantId, Timestamp};

use crate::BackboneError;
use crate::definitions::AUDIT_STREAM;
use crate::subject::token;

pub const AUDIT_PREFIX: &str = "sb.audit";

/// How long one entry of a page may take to arrive.
const READ_WAIT: Duration = Duration::from_secs(5);
/// The first part of the log a page reads: the day before its end.
const RECENT_MS: i64 = 86_400_000;

pub fn audit_subject(tenant: &TenantId) -> String {
    format!("{AUDIT_PREFIX}.{}", token(tenant.as_str()))
}

/// The tenant whose log `subject` is.
pub fn tenant_of_subject(subject: &str) -> Option<TenantId> {
    let t = subject.strip_prefix(AUDIT_PREFIX)?.strip_prefix('.')?;
    TenantId::new(t.replace("%2E", ".")).ok()
}

/// Appends `entry` to the tenant's log once JetStream stored it; answers
/// it with its id.
pub async fn record(
    js: &jetstream::Context,
    tenant: &TenantId,
    entry: AuditEntry,
) -> Result<AuditEntry, BackboneError> {
    record_once(js, tenant, entry, None).await
}

/// As [`record`]; with `id`, JetStream stores an entry of that id once
/// within its dedupe window (a writer's replayed command records its
/// change once).
pub async fn record_once(
    js: &jetstream::Context,
    tenant: &TenantId,
    mut entry: AuditEntry,
    id: Option<&str>,
) -> Result<AuditEntry, BackboneError> {
    entry.id.clear();
    let body = serde_json::to_vec(&entry).map_err(BackboneError::encoding)?;
    let mut headers = async_nats::HeaderMap::new();
    if let Some(id) = id {
        headers.insert(async_nats::header::NATS_MESSAGE_ID, id);
    }
    let ack = js
        .publish_with_headers(audit_subject(tenant), headers, body.into())
        .await
        .map_err(|e| BackboneError::nats("recording an audit entry", e))?
        .await
        .map_err(|e| BackboneError::nats("recording an audit entry", e))?;
    entry.id = ack.sequence.to_string();
    Ok(entry)
}

/// Where a page ended: its oldest entry's id and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub seq: u64,
    pub at: Timestamp,
}

impl Cursor {
    fn of(entry: &AuditEntry) -> Option<Self> {
        Some(Self {
            seq: entry.id.parse().ok()?,
            at: entry.at,
        })
    }

    /// `<id>-<unix ms>`.
    pub fn encode(self) -> String {
        format!("{}-{}", self.seq, self.at.unix_ms())
    }

    pub fn decode(s: &str) -> Option<Self> {
        let (seq, ms) = s.split_once('-')?;
        Some(Self {
            seq: seq.parse().ok()?,
            at: Timestamp::from_unix_ms(ms.parse().ok()?),
        })
    }
}

/// Up to `limit` entries of the tenant's log older than `before` (all,
/// without it), newest first, and the cursor of the next page if there
/// is one.
pub async fn page(
    js: &jetstream::Context,
    tenant: &TenantId,
    before: Option<Cursor>,
    limit: usize,
) -> Result<(Vec<AuditEntry>, Option<Cursor>), BackboneError> {
    let limit = limit.max(1);
    let end = before.map_or_else(Timestamp::now, |c| c.at);
    let recent = Timestamp::from_unix_ms(end.unix_ms().saturating_sub(RECENT_MS));
    let mut kept = read(js, tenant, Some(recent), before, limit + 1).await?;
    if kept.len() <= limit {
        kept = read(js, tenant, None, before, limit + 1).await?;
    }
    let more = kept.len() > limit;
    if more {
        kept.pop_front();
    }
    let entries: Vec<AuditEntry> = kept.into_iter().rev().collect();
    let next = if more {
        entries.last().and_then(Cursor::of)
    } else {
        None
    };
    Ok((entries, next))
}

/// The last `keep` entries of the tenant's log from `from` (the start
/// without it) up to `before`, oldest first.
async fn read(
    js: &jetstream::Context,
    tenant: &TenantId,
    from: Option<Timestamp>,
    before: Option<Cursor>,
    keep: usize,
) -> Result<VecDeque<AuditEntry>, BackboneError> {
    let nats = |e: Box<dyn std::error::Error + Send + Sync>| {
        BackboneError::nats(format!("reading {AUDIT_STREAM}"), e)
    };
    // A time past what a date holds (a cursor's, say) reads from the
    // start: the page is then made of what comes before `before`.
    let start = from.and_then(|at| {
        time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(at.unix_ms()) * 1_000_000).ok()
    });
    let deliver_policy = match start {
        Some(start_time) => consumer::DeliverPolicy::ByStartTime { start_time },
        None => consumer::DeliverPolicy::All,
    };
    let stream = js
        .get_stream(AUDIT_STREAM)
        .await
        .map_err(|e| nats(e.into()))?;
    let consumer = stream
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: audit_subject(tenant),
            deliver_policy,
            ..Default::default()
        })
        .await
        .map_err(|e| nats(e.into()))?;
    let mut kept = VecDeque::with_capacity(keep + 1);
    if consumer.cached_info().num_pending == 0 {
        return Ok(kept);
    }
    let mut messages = consumer.messages().await.map_err(|e| nats(e.into()))?;
    loop {
        let message = match tokio::time::timeout(READ_WAIT, messages.next()).await {
            Ok(Some(Ok(m))) => m,
            Ok(Some(Err(e))) => return Err(nats(e.into())),
            Ok(None) => break,
            Err(_) => return Err(nats("an audit entry took too long to arrive".into())),
        };
        let info = message.info().map_err(&nats)?;
        let (seq, pending) = (info.stream_sequence, info.pending);
        if before.is_some_and(|b| seq >= b.seq) {
            break;
        }
        match serde_json::from_slice::<AuditEntry>(&message.payload) {
            Ok(mut entry) => {
                entry.id = seq.to_string();
                kept.push_back(entry);
                if kept.len() > keep {
                    kept.pop_front();
                }
            }
            Err(e) => tracing::warn!(seq, error = %e, "an audit entry does not decode; skipped"),
        }
        if pending == 0 {
            break;
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_and_cursors_come_back() {
        let t = TenantId::new("acme.eu").unwrap();
        let s = audit_subject(&t);
        assert_eq!(s, "sb.audit.acme%2Eeu");
        assert_eq!(tenant_of_subject(&s), Some(t));
        assert_eq!(tenant_of_subject("sb.auditx.acme"), None);
        let c = Cursor {
            seq: 42,
            at: Timestamp::from_unix_ms(1_700_000_000_000),
        };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        assert_eq!(Cursor::decode("42"), None);
        assert_eq!(Cursor::decode("x-1"), None);
    }
}
