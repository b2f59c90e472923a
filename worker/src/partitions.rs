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
use switchboard_backbone::lease::{Lease, LeaseError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{Ctx, WorkerError, writer};

/// How often the loop renews leases and checks writers.
const TICK: Duration = Duration::from_millis(500);
/// How often it counts live workers and rebalances.
const REBALANCE: Duration = Duration::from_secs(2);
/// How long a writer that failed on its own waits before it starts again.
const RESTART_PAUSE: Duration = Duration::from_secs(1);

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

async fn live_workers(bucket: &kv::Store) -> usize {
    let Ok(keys) = bucket.keys().await else {
        return 1;
    };
    let keys: Vec<_> = keys.collect().await;
    keys.into_iter()
        .filter_map(Result::ok)
        .filter(|k| k.starts_with("w."))
        .count()
        .max(1)
}

/// What became of a held partition in one tick.
enum Check {
    Keep,
    Lost,
}

/// Renews the lease when due and keeps the writer running.
async fn check(ctx: &Arc<Ctx>, p: u16, h: &mut Held) -> Check {
    if let WriterTask::Running { task, .. } = &mut h.writer
        && task.is_finished()
    {
        match task.await {
            Ok(Err(WorkerError::LeaseLost)) => return Check::Lost,
            Ok(Err(e)) => tracing::warn!(partition = p, error = %e, "writer failed; restarting it"),
            Ok(Ok(())) => {}
            Err(e) => tracing::error!(partition = p, error = %e, "writer panicked; restarting it"),
        }
        h.writer = WriterTask::Paused {
            until: Instant::now() + RESTART_PAUSE,
        };
    }
    if Instant::now() >= h.renew_at {
        match h.lease.renew().await {
            Ok(()) => {
                let _ = h.valid_until.send(h.lease.valid_until());
                h.renew_at = Instant::now() + h.lease.renew_interval();
            }
            Err(LeaseError::Lost(_)) => return Check::Lost,
            Err(e) => {
                tracing::warn!(partition = p, error = %e, "renewing a partition lease failed");
                if !h.lease.is_valid() {
                    return Check::Lost;
                }
            }
        }
    }
    if let WriterTask::Paused { until } = h.writer
        && Instant::now() >= until
        && h.lease.is_valid()
    {
        h.writer = start_writer(ctx, p, &h.valid_until);
    }
    Check::Keep
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
            Some(lease) if Instant::now() >= liveness_renew_at => match lease.renew().await {
                Ok(()) => liveness_renew_at = Instant::now() + lease.renew_interval(),
                Err(LeaseError::Lost(_)) => liveness = None,
                Err(e) => tracing::warn!(error = %e, "renewing worker liveness failed"),
            },
            Some(_) => {}
            None => match Lease::try_acquire(&bucket, &worker_key, me.clone(), ttl).await {
                Ok(Some(lease)) => {
                    liveness_renew_at = Instant::now() + lease.renew_interval();
                    liveness = Some(lease);
                }
                Ok(None) => tracing::warn!(key = %worker_key, "worker id already announced"),
                Err(e) => tracing::warn!(error = %e, "announcing the worker failed"),
            },
        }

        let mut lost = Vec::new();
        for (p, h) in held.iter_mut() {
            if let Check::Lost = check(&ctx, *p, h).await {
                lost.push(*p);
            }
        }
        for p in lost {
            if let Some(h) = held.remove(&p) {
                tracing::warn!(partition = p, "partition lease lost; its writer stops");
                if let WriterTask::Running { task, .. } = h.writer {
                    task.abort();
                    let _ = task.await;
                }
            }
        }

        // The holder of partition 0 announces presence.
        ctx.leader
            .store(held.contains_key(&0), std::sync::atomic::Ordering::Relaxed);

        if Instant::now() < next_rebalance {
            continue;
        }
        next_rebalance = Instant::now() + REBALANCE;
        let share = usize::from(partitions).div_ceil(live_workers(&bucket).await);
        if held.len() < share && liveness.is_some() {
            for i in 0..partitions {
                if held.len() >= share {
                    break;
                }
                let p = (offset + i) % partitions;
                if held.contains_key(&p) {
                    continue;
                }
                match Lease::try_acquire(&bucket, &partition_key(p), me.clone(), ttl).await {
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
                    stop_and_release(p, h).await;
                }
            }
        }
    }

    ctx.leader
        .store(false, std::sync::atomic::Ordering::Relaxed);
    for (p, h) in std::mem::take(&mut held) {
        stop_and_release(p, h).await;
    }
    if let Some(lease) = liveness {
        lease.release().await;
    }
    Ok(())
}

/// Lets the writer finish its batch, then frees the lease.
async fn stop_and_release(p: u16, h: Held) {
    if let WriterTask::Running { stop, mut task } = h.writer {
        let _ = stop.send(true);
        match tokio::time::timeout(Duration::from_secs(10), &mut task).await {
            Ok(Ok(Err(e))) => tracing::warn!(partition = p, error = %e, "writer ended"),
            Ok(_) => {}
            Err(_) => task.abort(),
        }
    }
    h.lease.release().await;
}
