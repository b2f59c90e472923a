//! Partition ownership: which worker writes which partitions.
//!
//! Every worker announces itself with a lease `w.<worker>` in the
//! `sb_workers` bucket, counts the live workers, and holds about
//! `partitions / workers` partition leases `p.<n>`, taking free ones and
//! releasing extras. A worker that dies stops renewing; its leases expire
//! after the bucket's TTL and the others take its partitions over. Each
//! held partition runs one writer task, which stops writing as soon as its
//! lease is no longer valid.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures::StreamExt;
use switchboard_nats::lease::{Lease, LeaseError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::ctx::Ctx;
use crate::error::WorkerError;
use crate::fence::Fence;
use crate::writer;
use crate::writer::index_feed::IndexFeed;

/// How often the loop renews leases and checks writers.
const TICK: Duration = Duration::from_millis(500);
/// How often it counts live workers and rebalances.
const REBALANCE: Duration = Duration::from_secs(2);
/// How long a writer that failed on its own waits before it starts again.
const RESTART_PAUSE: Duration = Duration::from_millis(500);

/// How long a writer handing its partition over waits for the index feed
/// to ack its last batches: one feed round, whose publish may wait out
/// a JetStream timeout (2 s).
const FEED_FLUSH: Duration = Duration::from_secs(5);

/// The writer task of a held partition.
enum WriterTask {
    Running {
        stop: watch::Sender<bool>,
        task: JoinHandle<Result<(), WorkerError>>,
    },
    /// Failed on its own (say, a NATS hiccup); starts again at `until`.
    Paused { until: Instant },
}

struct Held {
    lease: Lease,
    renew_at: Instant,
    /// Tells the writer until when it may write.
    valid_until: watch::Sender<Instant>,
    writer: WriterTask,
}

fn start_writer(
    ctx: &Arc<Ctx>,
    partition: u16,
    valid_until: &watch::Sender<Instant>,
) -> WriterTask {
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(writer::run_partition(
        ctx.clone(),
        partition,
        valid_until.subscribe(),
        stop_rx,
    ));
    WriterTask::Running { stop, task }
}

fn partition_key(p: u16) -> String {
    format!("p.{p}")
}

/// Counts the workers announced in the bucket; `None` when the bucket
/// cannot be read now (then nobody rebalances this round).
async fn live_workers(bucket: &kv::Store) -> Option<usize> {
    let listing = async {
        let keys = bucket.keys().await.ok()?;
        let keys: Vec<_> = keys.collect().await;
        Some(
            keys.into_iter()
                .filter_map(Result::ok)
                .filter(|k| k.starts_with("w."))
                .count()
                .max(1),
        )
    };
    tokio::time::timeout(Duration::from_secs(2), listing)
        .await
        .ok()
        .flatten()
}

/// Why taking a lease failed; logged, and tried again.
#[derive(Debug, thiserror::Error)]
enum AcquireError {
    #[error(transparent)]
    Backbone(#[from] switchboard_nats::BackboneError),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// [`Lease::try_acquire`], bounded like a renewal.
async fn acquire(
    bucket: &kv::Store,
    key: &str,
    value: Bytes,
    ttl: Duration,
) -> Result<Option<Lease>, AcquireError> {
    match tokio::time::timeout(
        LEASE_WRITE_TIMEOUT,
        Lease::try_acquire(bucket, key, value, ttl),
    )
    .await
    {
        Ok(result) => Ok(result?),
        Err(_) => Err(AcquireError::Timeout(LEASE_WRITE_TIMEOUT)),
    }
}

/// What became of a held partition in one tick.
enum Check {
    Keep,
    Lost,
}

/// How long one lease write may take before the tick moves on: a KV
/// request to a stream whose leader just died can otherwise wait for the
/// whole client request timeout, and a renewal that is late is as good as
/// one that failed (the next tick tries again).
const LEASE_WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// Renews the lease when due and keeps the writer running.
///
/// A writer that ended is taken out of `h.writer` before its handle is
/// awaited, so no handle is ever polled again after it completed.
async fn check(ctx: &Arc<Ctx>, p: u16, h: &mut Held) -> Check {
    if matches!(&h.writer, WriterTask::Running { task, .. } if task.is_finished()) {
        let paused = WriterTask::Paused {
            until: Instant::now() + RESTART_PAUSE,
        };
        if let WriterTask::Running { task, .. } = std::mem::replace(&mut h.writer, paused) {
            match task.await {
                Ok(Err(WorkerError::LeaseLost)) => {
                    tracing::warn!(partition = p, "writer stopped: its lease may have expired");
                }
                Ok(Err(e)) => {
                    tracing::warn!(partition = p, error = %e, "writer failed; restarting it");
                }
                Ok(Ok(())) => {}
                Err(e) => {
                    tracing::error!(partition = p, error = %e, "writer panicked; restarting it");
                }
            }
        }
    }
    if Instant::now() >= h.renew_at {
        match tokio::time::timeout(LEASE_WRITE_TIMEOUT, h.lease.renew()).await {
            Ok(Ok(())) => {
                // `send_replace`, not `send`: a writer stopped by a lapse
                // holds no receiver, and `send` would then drop the new
                // time; the writer started next would find the old one and
                // stop again, for good.
                h.valid_until.send_replace(h.lease.valid_until());
                h.renew_at = Instant::now() + h.lease.renew_interval();
            }
            Ok(Err(LeaseError::Lost(_))) => return Check::Lost,
            Ok(Err(e)) => {
                tracing::warn!(partition = p, error = %e, "renewing a partition lease failed; retrying");
            }
            Err(_) => {
                tracing::warn!(
                    partition = p,
                    timeout = ?LEASE_WRITE_TIMEOUT,
                    "renewing a partition lease timed out; retrying"
                );
            }
        }
        // A lease that lapsed is kept, not dropped: its writer stops (it
        // fences itself on `valid_until`), and a later renewal with our
        // revision proves nobody took the partition meanwhile (say, while
        // the bucket's stream elected a new leader), so writing resumes.
        // If someone did, the renewal answers `Lost`.
    }
    // A writer whose lease lapsed starts again once a renewal made the
    // lease valid again.
    if let WriterTask::Paused { until } = h.writer
        && Instant::now() >= until
        && h.lease.is_valid()
    {
        h.writer = start_writer(ctx, p, &h.valid_until);
    }
    Check::Keep
}

/// The holder of partition 0 leads, while its lease is valid.
fn lead(ctx: &Ctx, held: &BTreeMap<u16, Held>) {
    ctx.leader
        .set(held.get(&0).map(|h| Fence::new(h.valid_until.subscribe())));
}

/// Owns partitions until `shutdown` resolves, then stops its writers and
/// releases every lease so that other workers take over at once.
pub(crate) async fn run(
    ctx: Arc<Ctx>,
    bucket: kv::Store,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), WorkerError> {
    let ttl = ctx.config.lease_ttl;
    let me = Bytes::from(ctx.config.worker_id.clone());
    let worker_key = format!("w.{}", ctx.config.worker_id);
    let partitions = ctx.config.partitions.max(1);
    // Workers start looking for free partitions at different places.
    let offset = rand::random::<u16>() % partitions;
    let mut liveness: Option<Lease> = None;
    let mut liveness_renew_at = Instant::now();
    let mut held: BTreeMap<u16, Held> = BTreeMap::new();
    let mut next_rebalance = Instant::now();
    let mut tick = tokio::time::interval(TICK);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tick.tick() => {}
        }

        // Announce ourselves.
        match liveness.as_mut() {
            Some(lease) if Instant::now() >= liveness_renew_at => {
                match tokio::time::timeout(LEASE_WRITE_TIMEOUT, lease.renew()).await {
                    Ok(Ok(())) => liveness_renew_at = Instant::now() + lease.renew_interval(),
                    Ok(Err(LeaseError::Lost(_))) => liveness = None,
                    Ok(Err(e)) => tracing::warn!(error = %e, "renewing worker liveness failed"),
                    Err(_) => tracing::warn!(
                        timeout = ?LEASE_WRITE_TIMEOUT,
                        "renewing worker liveness timed out"
                    ),
                }
            }
            Some(_) => {}
            None => match acquire(&bucket, &worker_key, me.clone(), ttl).await {
                Ok(Some(lease)) => {
                    liveness_renew_at = Instant::now() + lease.renew_interval();
                    liveness = Some(lease);
                }
                Ok(None) => tracing::warn!(key = %worker_key, "worker id already announced"),
                Err(e) => tracing::warn!(error = %e, "announcing the worker failed"),
            },
        }

        // Every held partition at once: one slow KV answer must not hold
        // the others' renewals back.
        let checks = held
            .iter_mut()
            .map(|(p, h)| {
                let ctx = &ctx;
                async move { (*p, check(ctx, *p, h).await) }
            })
            .collect::<Vec<_>>();
        let lost: Vec<u16> = futures::future::join_all(checks)
            .await
            .into_iter()
            .filter_map(|(p, c)| matches!(c, Check::Lost).then_some(p))
            .collect();
        for p in lost {
            if let Some(h) = held.remove(&p) {
                tracing::warn!(partition = p, "partition lease lost; its writer stops");
                if let WriterTask::Running { task, .. } = h.writer {
                    task.abort();
                    // A handle still running here; awaited once, here only.
                    if let Err(e) = task.await
                        && e.is_panic()
                    {
                        tracing::error!(partition = p, error = %e, "writer panicked");
                    }
                }
            }
        }

        lead(&ctx, &held);
        ctx.config.status.ticked(liveness.is_some(), held.len());
        crate::metrics::partitions_held(held.len());

        if Instant::now() < next_rebalance {
            continue;
        }
        next_rebalance = Instant::now() + REBALANCE;
        let Some(workers) = live_workers(&bucket).await else {
            continue;
        };
        let share = usize::from(partitions).div_ceil(workers);
        if held.len() < share && liveness.is_some() {
            for i in 0..partitions {
                if held.len() >= share {
                    break;
                }
                let p = (offset + i) % partitions;
                if held.contains_key(&p) {
                    continue;
                }
                match acquire(&bucket, &partition_key(p), me.clone(), ttl).await {
                    Ok(Some(lease)) => {
                        tracing::info!(
                            partition = p,
                            revision = lease.revision(),
                            "took partition"
                        );
                        let (valid_until, _) = watch::channel(lease.valid_until());
                        let writer = start_writer(&ctx, p, &valid_until);
                        let renew_at = Instant::now() + lease.renew_interval();
                        held.insert(
                            p,
                            Held {
                                lease,
                                renew_at,
                                valid_until,
                                writer,
                            },
                        );
                        if p == 0 {
                            // Lead at once, not a tick later: presence
                            // changes in between would go unannounced.
                            lead(&ctx, &held);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(partition = p, error = %e, "taking a partition failed");
                        break;
                    }
                }
            }
        } else if held.len() > share {
            let extra: Vec<u16> = held
                .keys()
                .rev()
                .take(held.len() - share)
                .copied()
                .collect();
            for p in extra {
                if let Some(h) = held.remove(&p) {
                    tracing::info!(partition = p, "handing partition over");
                    stop_and_release(p, h, &ctx.index_feed).await;
                }
            }
        }
    }

    ctx.leader.set(None);
    for (p, h) in std::mem::take(&mut held) {
        stop_and_release(p, h, &ctx.index_feed).await;
    }
    if let Some(lease) = liveness {
        lease.release().await;
    }
    Ok(())
}

/// Lets the writer finish its batch, waits until the worker's index feed
/// has acked what the writer handed it, then frees the lease: the next
/// owner starts after everything this one handled, instead of answering
/// its last round again as repeats, and no ack of this one's reaches the
/// next one's consumer.
async fn stop_and_release(p: u16, h: Held, feed: &IndexFeed) {
    if let WriterTask::Running { stop, mut task } = h.writer {
        let _ = stop.send(true);
        match tokio::time::timeout(Duration::from_secs(10), &mut task).await {
            Ok(Ok(Err(e))) => tracing::warn!(partition = p, error = %e, "writer ended"),
            Ok(_) => {}
            Err(_) => task.abort(),
        }
    }
    if tokio::time::timeout(FEED_FLUSH, feed.flush())
        .await
        .is_err()
    {
        tracing::warn!(
            partition = p,
            "the index feed did not settle in time; the next owner answers the last batches again"
        );
    }
    h.lease.release().await;
}
