//! The archiver (F14): old day buckets move to the blob store.
//!
//! The leader (holder of partition 0) scans the store for buckets older
//! than the configured age and publishes one `archive` request per bucket
//! on the ingest stream, to the conversation's partition. That partition's
//! writer has the bucket moved between two batches of commands (a
//! `MoveToArchive` commit, done by the store's tiered layer, see
//! `switchboard_store::archive`), so no edit or delete of the conversation
//! runs while its rows move: the archive mark is only safe with one writer
//! per conversation, the same rule that makes `seq` safe. Each request carries a `Nats-Msg-Id`, so a
//! scan repeated inside the dedupe window queues nothing twice; a failed
//! move is logged and found again by the next scan.

use std::sync::Arc;

use switchboard_nats::envelope::HEADER_MAINTENANCE;
use switchboard_protocol::Timestamp;
use switchboard_store::{BucketKey, ConversationKey, Mutation, StoreError, day_bucket};

use tracing::Instrument;

use crate::config::ArchiveConfig;
use crate::ctx::Ctx;
use crate::duties::maintenance::{RequestError, publish_request};

/// Bucket rows one scan step looks at.
const STEP: usize = 4096;

pub(crate) const ARCHIVE_REQUEST: &str = "archive";

pub(crate) async fn run(ctx: Arc<Ctx>) {
    let Some(config) = ctx.config.archive.clone() else {
        return;
    };
    let mut every = tokio::time::interval(config.every);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if ctx.leader.holds() {
            scan(&ctx, &config).await;
        }
    }
}

/// The first day that is too young to archive.
fn cutoff_day(after_days: u32) -> u32 {
    day_bucket(Timestamp::now())
        .saturating_sub(after_days)
        .saturating_add(1)
}

async fn scan(ctx: &Ctx, config: &ArchiveConfig) {
    let before_day = cutoff_day(config.after_days);
    let mut requested = 0;
    let mut cursor = None;
    loop {
        let step = match ctx
            .store
            .archive_candidates(before_day, cursor.take(), STEP)
            .await
        {
            Ok(step) => step,
            Err(e) => {
                tracing::warn!(error = %e, requested, "archive scan stopped");
                return;
            }
        };
        for bucket in step.buckets {
            if requested == config.max_per_scan {
                tracing::info!(requested, "archive scan reached its limit; the rest waits");
                return;
            }
            if let Err(e) = request(ctx, &bucket).await {
                tracing::warn!(error = %e, "archive request not published; the next scan retries");
                return;
            }
            requested += 1;
        }
        match step.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
        if !ctx.leader.holds() {
            return;
        }
    }
    if requested > 0 {
        tracing::info!(requested, before_day, "archive scan done");
    }
}

async fn request(ctx: &Ctx, bucket: &BucketKey) -> Result<(), RequestError> {
    let id = format!(
        "archive.{}.{}.{}",
        bucket.tenant, bucket.conversation_id, bucket.day
    );
    let payload = serde_json::to_vec(bucket)?;
    publish_request(ctx, &bucket.conversation(), ARCHIVE_REQUEST, &id, payload).await
}

/// Whether an ingest message is an archive request rather than a command.
pub(crate) fn is_request(m: &async_nats::jetstream::Message) -> bool {
    m.headers
        .as_ref()
        .and_then(|h| h.get(HEADER_MAINTENANCE))
        .is_some()
}

/// Serves the maintenance requests (archive moves, expiry:
/// `message_expiry.rs`, and erasure: `erasure/`), in order; the writer acks them
/// with its batch. Runs in the partition's writer between batches. Whether one changed
/// a conversation's members: the writer then reads its state again.
pub(crate) async fn serve_requests(
    ctx: &Ctx,
    requests: &[async_nats::jetstream::Message],
    lease_valid: impl Fn() -> bool,
) -> bool {
    let mut members_changed = false;
    for m in requests {
        let kind = m
            .headers
            .as_ref()
            .and_then(|h| h.get(HEADER_MAINTENANCE))
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default();
        match kind.as_str() {
            ARCHIVE_REQUEST => match serde_json::from_slice::<BucketKey>(&m.payload) {
                Ok(bucket) => move_bucket(ctx, &bucket, &lease_valid).await,
                Err(e) => tracing::error!(error = %e, "dropping an undecodable archive request"),
            },
            crate::duties::message_expiry::EXPIRE_REQUEST => {
                match serde_json::from_slice::<ConversationKey>(&m.payload) {
                    Ok(key) => crate::duties::message_expiry::expire(ctx, &key, &lease_valid).await,
                    Err(e) => tracing::error!(error = %e, "dropping an undecodable expiry request"),
                }
            }
            crate::duties::erasure::ERASE_REQUEST => {
                match serde_json::from_slice::<crate::duties::erasure::EraseRequest>(&m.payload) {
                    Ok(r) => {
                        members_changed |=
                            crate::duties::erasure::serve_request(ctx, &r, &lease_valid).await
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "dropping an undecodable erasure request")
                    }
                }
            }
            kind => tracing::error!(kind, "dropping an unknown maintenance request"),
        }
    }
    members_changed
}

async fn move_bucket(ctx: &Ctx, bucket: &BucketKey, lease_valid: &impl Fn() -> bool) {
    // Self-fencing, as for commands: a writer whose lease may have run
    // out asks for nothing.
    if !lease_valid() {
        return;
    }
    let span = tracing::info_span!(
        "archive",
        tenant = %bucket.tenant,
        conversation = %bucket.conversation_id,
        day = bucket.day
    );
    let started = std::time::Instant::now();
    let moved = ctx
        .store
        .commit(vec![Mutation::MoveToArchive {
            bucket: bucket.clone(),
        }])
        .instrument(span.clone())
        .await;
    let elapsed_ms = started.elapsed().as_millis() as u64;
    span.in_scope(|| match moved {
        Ok(()) => tracing::info!(elapsed_ms, "bucket archived"),
        // Archived by an earlier request, or changed: the next scan
        // decides again.
        Err(StoreError::Conflict(why)) => tracing::info!(%why, "bucket not archived"),
        Err(e) => tracing::warn!(error = %e, "bucket not archived; the next scan retries"),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn today_is_archived_only_with_an_age_of_zero() {
        let today = day_bucket(Timestamp::now());
        assert_eq!(cutoff_day(0), today + 1);
        assert_eq!(cutoff_day(90), today - 89);
    }
}
