//! Retention and disappearing messages (v1.2): a message goes at its
//! `expires_at` (set when it was sent, from the shorter of its
//! conversation's `retention_days` and `disappearing_secs` then), and in
//! a conversation with `retention_days` also once it is older than that,
//! as a deletion does, its inbox entries with it.
//!
//! A tenant's default `retention_days` (its record, v1.2) applies to its
//! conversations that set none: at send (`expires_at`), and by age.
//!
//! Every `expiry_pass_every` the leader scans the conversations that
//! have a lifetime and publishes one `expire` request per conversation
//! on the ingest stream, to its partition, as the archiver does: the
//! conversation's writer expires between two batches of commands, so no
//! edit races an expiry. A request takes one bounded step (`STEP` rows
//! per store read and commit) of each kind: what the store's expiry
//! index says is due, then, for retention, live messages in seq order
//! from where its last step stopped (kept in memory: after a restart it
//! starts from the first message again, passing over what is gone).
//! When more is due, the writer asks again for the rest with a request
//! at the back of its partition's queue, so the commands that came
//! meanwhile go first: expiry never holds a partition for more than one
//! step, and a message is gone within one pass of its time plus the
//! steps its conversation had queued before it.
//!
//! Every `tenant_retention_pass_every` (an hour), it asks the same for
//! every conversation of each tenant with a default retention: those are
//! not in the policy scan, and a pass visits all of them.
//!
//! Archived buckets (F14) expire too: a due message the index finds in
//! one, and for retention every archived day at or before the cutoff's,
//! is taken out of the bucket's object, which the archive tier rewrites
//! in place (`store/src/archive/expire.rs`), its reaction rows, mentions
//! and media references going first; at most `ARCHIVED_STEPS` days of
//! one conversation a step for retention.
//!
//! Clients are not sent anything: a message's `expires_at` says when it
//! goes, and afterwards history shows it deleted (`deleted_at`, no
//! content), as it does a deletion.

use std::sync::Arc;

use switchboard_protocol::Timestamp;
use switchboard_store::{ArchivedBucket, BucketKey, ConversationKey, Mutation, day_bucket};

use crate::ctx::Ctx;

pub(crate) const EXPIRE_REQUEST: &str = "expire";

/// Policy rows one scan step looks at.
const SCAN: usize = 1024;
/// Message rows one expiry step looks at (and at most expires in one
/// commit): a request takes one step of each kind, and asks again at
/// the back of the queue for the rest.
const STEP: usize = 500;
/// Archived buckets one step rewrites for retention.
const ARCHIVED_STEPS: usize = 2;

pub(crate) async fn run(ctx: Arc<Ctx>) {
    let mut every = tokio::time::interval(ctx.config.expiry_pass_every);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tenants_every = tokio::time::interval(ctx.config.tenant_retention_pass_every);
    tenants_every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {
                if ctx.leader.holds() {
                    pass(&ctx).await;
                }
            }
            _ = tenants_every.tick() => {
                if ctx.leader.holds() {
                    tenants_pass(&ctx).await;
                }
            }
        }
    }
}

/// A conversation's retention in days: its own, else its tenant's.
fn retention_days(ctx: &Ctx, key: &ConversationKey, own: Option<u32>) -> Option<u32> {
    own.or_else(|| ctx.tenants.retention_days(&key.tenant))
}

/// Asks for an expiry step of every conversation of each tenant with a
/// default retention: those without a policy of their own are not in the
/// store's policy scan, yet their messages carry an `expires_at` and
/// age.
async fn tenants_pass(ctx: &Ctx) {
    let pass_id = Pass::Tenants.id(ctx);
    let mut requested = 0usize;
    for tenant in ctx.tenants.with_retention() {
        let mut cursor = None;
        loop {
            let step = match ctx
                .store
                .tenant_conversations(&tenant, cursor.take(), SCAN)
                .await
            {
                Ok(step) => step,
                Err(e) => {
                    tracing::warn!(%tenant, error = %e, requested, "tenant retention pass stopped; the next one starts over");
                    return;
                }
            };
            let keys = step
                .conversations
                .into_iter()
                .map(|c| ConversationKey::new(tenant.clone(), c));
            if !request_all(ctx, keys, pass_id, &mut requested).await {
                return;
            }
            match step.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
            if !ctx.leader.holds() {
                return;
            }
        }
    }
    if requested > 0 {
        tracing::debug!(requested, "tenant retention pass done");
    }
}

/// Which scan asks for an expiry step.
#[derive(Clone, Copy)]
enum Pass {
    /// The conversations with a lifetime of their own.
    Policies,
    /// Every conversation of the tenants with a default retention.
    Tenants,
}

impl Pass {
    /// The request id of one pass of this scan for a conversation: one
    /// request per conversation and pass, however often it is repeated
    /// within the backbone's dedupe window.
    fn id(self, ctx: &Ctx) -> PassId {
        let (scan, every) = match self {
            Pass::Policies => ("expire", ctx.config.expiry_pass_every),
            Pass::Tenants => ("retain", ctx.config.tenant_retention_pass_every),
        };
        PassId {
            scan,
            n: Timestamp::now().unix_ms() as u128 / every.as_millis().max(1),
        }
    }
}

/// One pass of one scan: what its requests' ids are made of.
#[derive(Clone, Copy)]
struct PassId {
    scan: &'static str,
    n: u128,
}

async fn pass(ctx: &Ctx) {
    let pass_id = Pass::Policies.id(ctx);
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
        let keys = step.conversations.into_iter().map(|(key, _)| key);
        if !request_all(ctx, keys, pass_id, &mut requested).await {
            return;
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

/// Asks for one expiry step of each conversation, counting them; false
/// when a request could not be published (the pass stops there, and the
/// next one asks again).
async fn request_all(
    ctx: &Ctx,
    keys: impl IntoIterator<Item = ConversationKey>,
    pass: PassId,
    requested: &mut usize,
) -> bool {
    for key in keys {
        if let Err(e) = request(ctx, &key, pass).await {
            tracing::warn!(error = %e, "expiry request not published; the next pass retries");
            return false;
        }
        *requested += 1;
    }
    true
}

async fn request(
    ctx: &Ctx,
    key: &ConversationKey,
    pass: PassId,
) -> Result<(), crate::duties::maintenance::RequestError> {
    let PassId { scan, n } = pass;
    let id = format!("{scan}.{}.{}.{n}", key.tenant, key.conversation_id);
    let payload = serde_json::to_vec(key)?;
    crate::duties::maintenance::publish_request(ctx, key, EXPIRE_REQUEST, &id, payload).await
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
    let archived = match ctx.store.archived_buckets(key, 0, u64::MAX).await {
        Ok(archived) => archived,
        Err(e) => {
            tracing::warn!(error = %e, "expiry: cannot read the archived buckets; the next pass retries");
            return;
        }
    };
    let now = Timestamp::now();
    let mut more = false;
    let due = match ctx.store.due(key, now, STEP).await {
        Ok(due) => due,
        Err(e) => {
            tracing::warn!(error = %e, "expiry: cannot read what is due; the next pass retries");
            return;
        }
    };
    more |= due.len() == STEP;
    let seqs: Vec<u64> = due.iter().map(|(_, seq)| *seq).collect();
    // Archived ones first: the live commit takes their index entries.
    if !expire_archived_seqs(ctx, key, &archived, &seqs, now, lease_valid).await
        || !commit(ctx, key, seqs, due, now, lease_valid).await
    {
        return;
    }
    if let Some(days) = retention_days(ctx, key, state.policy.retention_days) {
        let cutoff =
            Timestamp::from_unix_ms(now.unix_ms().saturating_sub(i64::from(days) * 86_400_000));
        match expire_by_age(ctx, key, &archived, cutoff, now, lease_valid).await {
            Some(done) => more |= !done,
            None => return,
        }
    }
    if more {
        continue_later(ctx, key).await;
    }
}

/// One step of retention by age: archived days, then live messages in
/// seq order from where the last step stopped. Whether nothing older is
/// left (`None`: it stopped on a failure; the next pass retries).
async fn expire_by_age(
    ctx: &Ctx,
    key: &ConversationKey,
    archived: &[ArchivedBucket],
    cutoff: Timestamp,
    now: Timestamp,
    lease_valid: &impl Fn() -> bool,
) -> Option<bool> {
    let archived_done = expire_archived_days(ctx, key, archived, cutoff, now, lease_valid).await?;
    // The index drops everything older in one change, archived days too.
    let older = switchboard_nats::search::IndexOp::RemoveBefore {
        tenant: key.tenant.clone(),
        conversation_id: key.conversation_id.clone(),
        before: cutoff,
    };
    feed(ctx, vec![older]).await;
    let after = ctx
        .expired_through
        .lock()
        .ok()
        .and_then(|m| m.get(key).copied())
        .unwrap_or(0);
    let scan = match ctx.store.expired(key, after, cutoff, STEP).await {
        Ok(scan) => scan,
        Err(e) => {
            tracing::warn!(error = %e, "expiry: scan failed; the next pass retries");
            return None;
        }
    };
    if !commit(ctx, key, scan.seqs, Vec::new(), now, lease_valid).await {
        return None;
    }
    if let Ok(mut marks) = ctx.expired_through.lock() {
        marks.insert(key.clone(), scan.last_seen);
    }
    Some(scan.done && archived_done)
}

/// Feeds the search index, behind the writers' changes queued before.
async fn feed(ctx: &Ctx, ops: Vec<switchboard_nats::search::IndexOp>) {
    // Counted and logged there: the expiry goes on (a rebuild has it).
    let _ = ctx.index_feed.store(ops).await;
}

/// More is due than one step takes: the rest is asked for again at the
/// back of the partition's queue, so the commands already waiting there
/// go first and a writer never stops its partition for more than a step.
async fn continue_later(ctx: &Ctx, key: &ConversationKey) {
    if let Err(e) = crate::duties::maintenance::continue_later(ctx, key, EXPIRE_REQUEST, key).await
    {
        tracing::warn!(error = %e, "expiry: the rest waits for the next pass");
    }
}

/// The due messages `seqs` that are in archived buckets, a rewrite of
/// each bucket's object (`Mutation::ExpireArchived`); whether every one
/// went.
async fn expire_archived_seqs(
    ctx: &Ctx,
    key: &ConversationKey,
    archived: &[ArchivedBucket],
    seqs: &[u64],
    now: Timestamp,
    lease_valid: &impl Fn() -> bool,
) -> bool {
    for b in archived {
        let here: Vec<u64> = seqs
            .iter()
            .copied()
            .filter(|s| (b.first_seq..=b.last_seq).contains(s))
            .collect();
        if here.is_empty() {
            continue;
        }
        // Counted by the live commit that follows, which takes their
        // index entries.
        if !rewrite(ctx, key, b.day, here, None, now, lease_valid).await {
            return false;
        }
    }
    true
}

/// Retention in the archive: each archived bucket of a day at or before
/// the cutoff's is rewritten without what is older than the cutoff, at
/// most `ARCHIVED_STEPS` a step; whether none is left past those
/// (`None`: a rewrite failed). A day wholly before the cutoff's is
/// done for good once rewritten (this worker remembers it; after a
/// restart it is read once more and found done).
async fn expire_archived_days(
    ctx: &Ctx,
    key: &ConversationKey,
    archived: &[ArchivedBucket],
    cutoff: Timestamp,
    now: Timestamp,
    lease_valid: &impl Fn() -> bool,
) -> Option<bool> {
    let cutoff_day = day_bucket(cutoff);
    let done = |day: u32| {
        ctx.archive_expired
            .lock()
            .is_ok_and(|d| d.contains(&(key.clone(), day)))
    };
    let due: Vec<&ArchivedBucket> = archived
        .iter()
        .filter(|b| b.day <= cutoff_day && !done(b.day))
        .collect();
    for b in due.iter().take(ARCHIVED_STEPS) {
        if !rewrite(ctx, key, b.day, Vec::new(), Some(cutoff), now, lease_valid).await {
            return None;
        }
        if b.day < cutoff_day
            && let Ok(mut d) = ctx.archive_expired.lock()
        {
            // A bound, not a policy: past it, days are read once more.
            if d.len() > 100_000 {
                d.clear();
            }
            d.insert((key.clone(), b.day));
        }
    }
    // The cutoff's own day is rewritten each pass (what is older goes as
    // the day goes on); the others are done once.
    Some(due.iter().filter(|b| b.day < cutoff_day).count() <= ARCHIVED_STEPS)
}

#[allow(clippy::too_many_arguments)]
async fn rewrite(
    ctx: &Ctx,
    key: &ConversationKey,
    day: u32,
    seqs: Vec<u64>,
    cutoff: Option<Timestamp>,
    at: Timestamp,
    lease_valid: &impl Fn() -> bool,
) -> bool {
    if !lease_valid() {
        return false;
    }
    let bucket = BucketKey {
        tenant: key.tenant.clone(),
        conversation_id: key.conversation_id.clone(),
        day,
    };
    let expired = Mutation::ExpireArchived {
        bucket,
        seqs,
        cutoff,
        at,
    };
    match ctx.store.commit(vec![expired]).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, day, "expiry: an archived bucket was not rewritten; the next pass retries");
            false
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
    let gone = switchboard_nats::search::IndexOp::Remove {
        tenant: key.tenant.clone(),
        conversation_id: key.conversation_id.clone(),
        seqs: seqs.clone(),
    };
    let expired = Mutation::Expire {
        key: key.clone(),
        seqs,
        at,
        unindex,
    };
    match ctx.store.commit(vec![expired]).await {
        Ok(()) => {
            crate::metrics::messages_expired(n);
            if n > 0 {
                feed(ctx, vec![gone]).await;
            }
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "expiry: commit failed; the next pass retries");
            false
        }
    }
}
