//! Retention and disappearing messages (v1.2): a message goes at its
//! `expires_at` (set when it was sent, from the shorter of its
//! conversation's `retention_days` and `disappearing_secs` then), and in
//! a conversation with `retention_days` also once it is older than that,
//! as a deletion does, its inbox entries with it.
//!
//! Every `expiry_pass_every` the leader scans the conversations that
//! have a lifetime and publishes one `expire` request per conversation
//! on the ingest stream, to its partition, as the archiver does: the
//! conversation's writer expires between two batches of commands, so no
//! edit races an expiry. A writer expires in bounded steps (`STEP` rows
//! per store read and commit, `STEPS` per request): what the store's
//! expiry index says is due, then, for retention, live messages in seq
//! order from where its last request stopped (kept in memory: after a
//! restart it starts from the first message again, passing over what is
//! gone). A message is gone at most one pass after its time, while a
//! conversation expires no more than `STEP * STEPS` messages of each
//! kind a pass.
//!
//! Clients are not sent anything: a message's `expires_at` says when it
//! goes, and afterwards history shows it deleted (`deleted_at`, no
//! content), as it does a deletion. Archived buckets are not expired yet.

use std::sync::Arc;

use switchboard_protocol::Timestamp;
use switchboard_store::{ConversationKey, Mutation};

use crate::ctx::Ctx;

pub(crate) const EXPIRE_REQUEST: &str = "expire";

/// Policy rows one scan step looks at.
const SCAN: usize = 1024;
/// Message rows one expiry step looks at (and at most expires in one
/// commit), and steps per request.
const STEP: usize = 1000;
const STEPS: usize = 10;

pub(crate) async fn run(ctx: Arc<Ctx>) {
    let mut every = tokio::time::interval(ctx.config.expiry_pass_every);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if ctx.leader.holds() {
            pass(&ctx).await;
        }
    }
}

async fn pass(ctx: &Ctx) {
    let every_ms = ctx.config.expiry_pass_every.as_millis().max(1);
    let pass_id = Timestamp::now().unix_ms() as u128 / every_ms;
    let mut requested = 0usize;
    let mut cursor = None;
    loop {
        let step = match ctx.store.expiring(cursor.take(), SCAN).await {
            Ok(step) => step,
            Err(e) => {
                tracing::warn!(error = %e, requested, "expiry pass stopped; the next one starts over");
                return;
            }
        };
        for (key, _) in step.conversations {
            if let Err(e) = request(ctx, &key, pass_id).await {
                tracing::warn!(error = %e, "expiry request not published; the next pass retries");
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
        tracing::debug!(requested, "expiry pass done");
    }
}

async fn request(
    ctx: &Ctx,
    key: &ConversationKey,
    pass_id: u128,
) -> Result<(), crate::maintenance::RequestError> {
    // One request per conversation and pass, however often a pass is
    // repeated inside the dedupe window.
    let id = format!("expire.{}.{}.{pass_id}", key.tenant, key.conversation_id);
    let payload = serde_json::to_vec(key)?;
    crate::maintenance::publish_request(ctx, key, EXPIRE_REQUEST, &id, payload).await
}

/// Expires what is due in one conversation: the messages whose
/// `expires_at` passed (found by the store's expiry index), and, where
/// the conversation keeps `retention_days`, every live message older than
/// that (messages sent before it was set, or while it was longer). Runs
/// in its partition's writer between batches.
pub(crate) async fn expire(ctx: &Ctx, key: &ConversationKey, lease_valid: &impl Fn() -> bool) {
    if !lease_valid() {
        return;
    }
    let state = match ctx.store.sequencer_states(vec![key.clone()]).await {
        Ok(mut states) => states.pop().flatten(),
        Err(e) => {
            tracing::warn!(error = %e, "expiry: cannot read the conversation; the next pass retries");
            return;
        }
    };
    let Some(state) = state else {
        return;
    };
    let now = Timestamp::now();
    for _ in 0..STEPS {
        let due = match ctx.store.due(key, now, STEP).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "expiry: cannot read what is due; the next pass retries");
                return;
            }
        };
        let full = due.len() == STEP;
        let seqs = due.iter().map(|(_, seq)| *seq).collect();
        if !commit(ctx, key, seqs, due, now, lease_valid).await || !full {
            break;
        }
    }
    let Some(days) = state.policy.retention_days else {
        return;
    };
    let cutoff =
        Timestamp::from_unix_ms(now.unix_ms().saturating_sub(i64::from(days) * 86_400_000));
    let mut after = ctx
        .expired_through
        .lock()
        .ok()
        .and_then(|m| m.get(key).copied())
        .unwrap_or(0);
    for _ in 0..STEPS {
        let scan = match ctx.store.expired(key, after, cutoff, STEP).await {
            Ok(scan) => scan,
            Err(e) => {
                tracing::warn!(error = %e, "expiry: scan failed; the next pass retries");
                return;
            }
        };
        if !commit(ctx, key, scan.seqs, Vec::new(), now, lease_valid).await {
            return;
        }
        after = scan.last_seen;
        if let Ok(mut marks) = ctx.expired_through.lock() {
            marks.insert(key.clone(), after);
        }
        if scan.done {
            return;
        }
    }
}

/// One expiry commit, fenced as commands are; whether it went (or had
/// nothing to do).
async fn commit(
    ctx: &Ctx,
    key: &ConversationKey,
    seqs: Vec<u64>,
    unindex: Vec<(Timestamp, u64)>,
    at: Timestamp,
    lease_valid: &impl Fn() -> bool,
) -> bool {
    if seqs.is_empty() && unindex.is_empty() {
        return true;
    }
    if !lease_valid() {
        return false;
    }
    let n = seqs.len();
    let expired = Mutation::Expire {
        key: key.clone(),
        seqs,
        at,
        unindex,
    };
    match ctx.store.commit(vec![expired]).await {
        Ok(()) => {
            crate::metrics::messages_expired(n);
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "expiry: commit failed; the next pass retries");
            false
        }
    }
}
