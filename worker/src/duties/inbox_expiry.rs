//! Inbox expiry: a device that stays away longer than the inbox lifetime
//! loses its pending entries, so an abandoned device does not keep every
//! message it never fetched forever. It catches up from the conversation
//! list and history instead (its marks are untouched), as a new device does.
//!
//! Only the leader (the holder of partition 0) sweeps: as soon as it
//! becomes the leader, then every `inbox_sweep_every`. A sweep walks every
//! inbox in steps, each one store write of bounded size, so that it never
//! holds up the messages being written beside it.
//!
//! Walking every inbox is also how the size of the inboxes is known (an
//! exact count on demand would be a scan of its own): a whole sweep sets
//! `switchboard_writer_inbox_entries` to what it left.

use std::sync::Arc;
use std::time::Duration;

use switchboard_protocol::Timestamp;

use crate::ctx::Ctx;

/// Inbox entries one step looks at.
const STEP: usize = 4096;

/// How often a worker checks whether it became the leader (and so should
/// sweep now).
const LEADER_CHECK: Duration = Duration::from_secs(5);

pub(crate) async fn run(ctx: Arc<Ctx>) {
    let mut check = tokio::time::interval(LEADER_CHECK.min(ctx.config.inbox_sweep_every));
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_sweep: Option<tokio::time::Instant> = None;
    loop {
        check.tick().await;
        if !ctx.leader.holds() {
            last_sweep = None;
            continue;
        }
        if last_sweep.is_some_and(|at| at.elapsed() < ctx.config.inbox_sweep_every) {
            continue;
        }
        last_sweep = Some(tokio::time::Instant::now());
        sweep(&ctx).await;
    }
}

async fn sweep(ctx: &Ctx) {
    let ttl_ms = i64::try_from(ctx.config.inbox_ttl.as_millis()).unwrap_or(i64::MAX);
    let before = Timestamp::from_unix_ms(Timestamp::now().unix_ms().saturating_sub(ttl_ms));
    let started = std::time::Instant::now();
    let (mut seen, mut removed) = (Some(0), 0);
    let mut cursor = None;
    loop {
        match ctx.store.expire_inbox(before, cursor.take(), STEP).await {
            Ok(step) => {
                crate::metrics::inbox_expired(step.removed);
                seen = seen.zip(step.seen).map(|(a, b)| a + b);
                removed += step.removed;
                match step.next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            Err(e) => {
                // The next sweep starts over; entries only get older.
                tracing::warn!(error = %e, removed, "inbox expiry sweep stopped");
                return;
            }
        }
        if !ctx.leader.holds() {
            return;
        }
        // Let other store work in between steps.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A backend that sweeps nothing (rows with a TTL) has no count.
    let entries = seen.map(|seen| seen.saturating_sub(removed));
    if let Some(entries) = entries {
        crate::metrics::inbox_entries(entries);
    }
    tracing::info!(
        ?entries,
        removed,
        before = %before,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "inbox expiry sweep done"
    );
}
