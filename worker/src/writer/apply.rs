//! Step 2, apply: plan a batch's commands (`Sequencer::plan`) and commit
//! them in one store commit, the point after which a send is acked;
//! retried as `retry.rs` decides. The commands are applied in parts of
//! at most `max_batch` (a message of several sends can make a batch of
//! many more commands than messages). A part that keeps failing with an
//! error retrying cannot fix is applied again one command at a time, in
//! order: the commands that succeed are stored, and each one that fails
//! alone is handed on to be parked, so one bad command costs its sender
//! an error instead of stalling the partition for everyone.

use std::time::Instant;

use switchboard_nats::trace;
use switchboard_store::StoreError;

use super::retry::{Next, Retry};
use crate::ctx::Ctx;
use crate::error::WorkerError;
use crate::fence::Fence;
use crate::sequencer::{Incoming, Outcome, SequenceError, Sequencer};

/// An outcome to publish, with the trace context of its command.
pub(super) type Traced = (Outcome, Option<String>);

/// What became of a batch's commands, in their order.
pub(super) enum Applied {
    /// Stored (or needing no write): their outcomes.
    Done(Vec<Traced>),
    /// The command at this index of the batch failed alone with an error
    /// retrying cannot fix.
    Poisoned {
        command: usize,
        error: SequenceError,
    },
}

/// Applies `commands`, redelivered or not (then their idempotency keys
/// are looked up from the start).
pub(super) async fn apply(
    ctx: &Ctx,
    sequencer: &mut Sequencer,
    commands: &[Incoming],
    redelivered: bool,
    fence: &Fence,
) -> Result<Vec<Applied>, WorkerError> {
    let per_part = ctx.config.max_batch.max(1);
    let mut applied = Vec::new();
    for (n, part) in commands.chunks(per_part).enumerate() {
        let first = n * per_part;
        let error = match attempt(ctx, sequencer, part, redelivered, fence).await? {
            Ok(outcomes) => {
                applied.push(Applied::Done(outcomes));
                continue;
            }
            Err(error) => error,
        };
        if part.len() == 1 {
            applied.push(Applied::Poisoned {
                command: first,
                error,
            });
            continue;
        }
        tracing::warn!(%error, commands = part.len(), "a batch keeps failing; applying its commands one at a time");
        for (i, one) in part.chunks(1).enumerate() {
            applied.push(
                match attempt(ctx, sequencer, one, redelivered, fence).await? {
                    Ok(outcomes) => Applied::Done(outcomes),
                    Err(error) => Applied::Poisoned {
                        command: first + i,
                        error,
                    },
                },
            );
        }
    }
    Ok(applied)
}

/// Plans and commits `incoming` until it is stored (its outcomes) or
/// given up on (the last error). Fails only when the lease may have
/// expired: nothing is written then.
async fn attempt(
    ctx: &Ctx,
    sequencer: &mut Sequencer,
    incoming: &[Incoming],
    redelivered: bool,
    fence: &Fence,
) -> Result<Result<Vec<Traced>, SequenceError>, WorkerError> {
    let mut check_sent = redelivered;
    let mut retry = Retry::new(Instant::now());
    loop {
        fence.check()?;
        let failure = match sequencer
            .plan(
                ctx.store.as_ref(),
                ctx.ids.as_ref(),
                incoming,
                check_sent,
                switchboard_protocol::Timestamp::now(),
            )
            .await
        {
            Ok(mut plan) => {
                // The plan may have waited on the store: the lease is
                // checked again right before the write.
                fence.check()?;
                let mutations = std::mem::take(&mut plan.mutations);
                let committed = match fence.claim() {
                    _ if mutations.is_empty() => Ok(()),
                    Some(claim) => ctx.store.commit_as(claim, mutations).await,
                    None => ctx.store.commit(mutations).await,
                };
                if let Err(StoreError::Fenced(why)) = &committed {
                    tracing::warn!(%why, "another writer claimed the partition; stopping");
                    return Err(WorkerError::LeaseLost);
                }
                match committed {
                    Ok(()) => {
                        sequencer.committed(&mut plan);
                        let traced = plan
                            .outcomes
                            .into_iter()
                            .zip(plan.caused_by)
                            .map(|(outcome, i)| {
                                let traceparent =
                                    incoming.get(i).and_then(|c| trace::traceparent(&c.span));
                                (outcome, traceparent)
                            })
                            .collect();
                        return Ok(Ok(traced));
                    }
                    Err(e) => SequenceError::Store(e),
                }
            }
            Err(e) => e,
        };
        // The cache may disagree with the store (a refused append) or be
        // half-updated: start again from the store's state, and look the
        // batch's idempotency keys up this time.
        sequencer.forget();
        check_sent = true;
        match retry.after(&failure, Instant::now()) {
            Next::Replan => {
                tracing::warn!(why = %failure, "store refused the batch; reloading state");
            }
            Next::Wait {
                backoff,
                stalled_for,
            } => {
                match stalled_for {
                    Some(stalled_for) => {
                        tracing::error!(error = %failure, ?stalled_for, "the partition is stalled: the store or the id source is unavailable")
                    }
                    None => tracing::warn!(error = %failure, ?backoff, "batch failed; retrying"),
                }
                tokio::time::sleep(backoff).await;
            }
            Next::GiveUp => return Ok(Err(failure)),
        }
    }
}
