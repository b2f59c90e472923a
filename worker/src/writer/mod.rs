//! One partition's writer: the only task that writes the partition's
//! conversations. For each batch of commands, in stream order:
//!
//! 1. consume (`consume.rs`): take the batch from the partition's
//!    consumer, a fresh one at every start, placed with its stream's
//!    leader; start over whenever a delivery may have been lost
//!    (`checks.rs` decides);
//! 2. apply (`apply.rs`): plan and commit the commands to the store, the
//!    point after which a send is acked; retry what waiting fixes
//!    (`retry.rs` decides), and apply a batch that keeps failing one
//!    command at a time;
//! 3. park (`park.rs`): set aside a command that still fails alone, and
//!    tell its sender, so that the partition goes on;
//! 4. publish (`publish.rs`): the outcomes' events (core NATS, at most
//!    once); then, with the batch's maintenance requests served, hand its
//!    index changes and its one ack (the consumer acks all) to the
//!    worker's feed task (`index_feed.rs`), which stores the changes and
//!    then acks, gathering every partition's within a window; `consume.rs`
//!    purges acked commands from the stream about once a second. A crash
//!    before the ack redelivers the batch, which the idempotency keys
//!    turn into repeats of the same answers (and changes).
//!
//! Nothing is written once the partition's lease may have expired, nor
//! once another writer claimed the partition in the store (`fence.rs`).

mod apply;
mod checks;
mod consume;
pub(crate) mod index_feed;
mod park;
mod publish;
mod retry;
mod webhook_events;

pub(crate) use publish::remember_refusal;

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;
use tracing::Instrument;

use crate::ctx::Ctx;
use crate::duties::archive;
use crate::error::WorkerError;
use crate::fence::Fence;
use crate::policy::Policies;
use crate::sequencer::Sequencer;

/// Runs until `stop` turns true, the lease stops being valid, or the
/// consumer fails (the owner then restarts the task).
pub(crate) async fn run_partition(
    ctx: Arc<Ctx>,
    partition: u16,
    valid_until: watch::Receiver<Instant>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), WorkerError> {
    // The claim comes before any read of the partition's conversations: it
    // finishes a commit the last writer decided but did not write.
    Fence::new(valid_until.clone()).check()?;
    let claim = ctx.store.claim_writer(partition).await?;
    let fence = Fence::writer(valid_until, claim);
    fence.check()?;
    let mut consumer = consume::Consumer::start(&ctx, partition, fence.clone()).await?;
    let mut sequencer = Sequencer::new(
        ctx.config.cache_limit,
        Policies {
            edit: ctx.config.edit_policy,
            fanout: ctx.config.fanout,
            consent: ctx.config.consent,
            plugins: ctx.plugins.clone(),
            tenants: ctx.tenants.clone(),
            bans: ctx.bans.clone(),
            link_previews: ctx.config.link_previews,
        },
    );
    tracing::info!(partition, "writer started");
    while let Some(batch) = consumer.next_batch(&mut stop).await? {
        let span = tracing::info_span!("batch", partition, size = batch.messages.len());
        let indexed = async {
            let applied = apply::apply(
                &ctx,
                &mut sequencer,
                &batch.commands,
                batch.redelivered,
                &fence,
            )
            .await?;
            let outcomes = park::park(&ctx, &batch, applied, &fence).await?;
            // A writer stopped past its lease after committing publishes
            // nothing: the new owner gets the batch again and answers it
            // from the idempotency keys.
            fence.check()?;
            Ok::<_, WorkerError>(publish::publish(&ctx, outcomes).await)
        }
        .instrument(span)
        .await?;
        // Archive requests run after the batch's commands, never between
        // a command's read and its commit.
        if !batch.archive_requests.is_empty() {
            fence.check()?;
            if archive::serve_requests(&ctx, &batch.archive_requests, || fence.holds()).await {
                sequencer.forget();
            }
        }
        // The batch is handled in full: its index changes, then one ack
        // that takes all of it off the consumer, go to the feed task,
        // and the writer goes on. A writer whose lease lapsed meanwhile
        // leaves the batch to the next owner, who answers it from the
        // idempotency keys.
        fence.check()?;
        ctx.index_feed
            .settle(indexed, consumer.batch_ack(&batch))
            .await;
        if *stop.borrow() {
            break;
        }
    }
    tracing::info!(partition, "writer stopped");
    Ok(())
}
