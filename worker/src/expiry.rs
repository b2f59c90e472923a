//! Inbox expiry: a device that stays away longer than the inbox lifetime
//! loses its pending entries, so an abandoned device does not keep every
//! message it never fetched forever. It catches up from the conversation
//! list and history instead (its marks are untouched), as a new device does.
//!
//! Only the leader (the holder of partition 0) sweeps. A sweep walks every
//! inbox in steps, each one store write of bounded size, so that it never
//! holds up the messages being written beside it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use switchboard_protocol::Timestamp;

use crate::Ctx;

/// Inbox entries one step looks at.
const STEP: usize = 4096;

pub(crate) async fn run(ctx: Arc<Ctx>) {
    let mut every = tokio::time::interval(ctx.config.inbox_sweep_every);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if ctx.leader.load(Ordering::Relaxed) {
            sweep(&ctx).await;
        }
    }
}

async fn sweep(ctx: &Ctx) {
    let ttl_ms = i64::try_from(ctx.config.inbox_ttl.as_millis()).unwrap_or(i64::MAX);
    let before = Timestamp::from_unix_ms(Timestamp::now().unix_ms().saturating_sub(ttl_ms));
    let started = std::time::Instant::now();
    let mut removed = 0;
    let mut cursor = None;
    loop {
        match ctx.store.expire_inbox(before, cursor.take(), STEP).await {
            Ok(step) => {
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
        if !ctx.leader.load(Ordering::Relaxed) {
            return;
        }
        // Let other store work in between steps.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tracing::info!(
        removed,
        before = %before,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "inbox expiry sweep done"
    );
}
