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

struct Held {
    lease: Lease,
    /// When a writer that failed on its own may start again.
    restart_at: Option<Instant>,
    valid_until: watch::Sender<Instant>,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), WorkerError>>,
    renew_at: Instant,
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
    let mut liveness: Option<Lease> = None;
    let mut liveness_renew_at = Instant::now();
    let mut held: BTreeMap<u16, Held> = BTreeMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
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

        // Renew held partitions; drop those whose lease is gone; restart
        // writers that failed on their own (NATS hiccups) after a pause.
        let mut lost = Vec::new();
        for (p, h) in held.iter_mut() {
            if h.task.is_finished() && h.restart_at.is_none() {
                let finished = std::mem::replace(&mut h.task, tokio::spawn(async { Ok(()) }));
                match finished.await {
                    Ok(Err(WorkerError::LeaseLost)) => {
                        lost.push(*p);
                        continue;
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(partition = p, error = %e, "writer failed; restarting it")
                    }
                    Ok(Ok(())) => {}
                    Err(e) => {
                        tracing::error!(partition = p, error = %e, "writer panicked; restarting it")
                    }
                }
                h.restart_at = Some(Instant::now() + Duration::from_secs(1));
            }
            if Instant::now() >= h.renew_at {
                match h.lease.renew().await {
                    Ok(()) => {
                        let _ = h.valid_until.send(h.lease.valid_until());
                        h.renew_at = Instant::now() + h.lease.renew_interval();
                    }
                    Err(LeaseError::Lost(_)) => {
                        lost.push(*p);
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(partition = p, error = %e, "renewing a partition lease failed");
                        if !h.lease.is_valid() {
                            lost.push(*p);
                            continue;
                        }
                    }
                }
            }
            if h.restart_at.is_some_and(|at| Instant::now() >= at) && h.lease.is_valid() {
                h.restart_at = None;
                let (stop_tx, stop_rx) = watch::channel(false);
                h.stop = stop_tx;
                h.task = tokio::spawn(writer::run_partition(
                    ctx.clone(),
                    *p,
                    h.valid_until.subscribe(),
                    stop_rx,
                ));
            }
        }
        for p in lost {
            if let Some(h) = held.remove(&p) {
                tracing::warn!(partition = p, "partition lease lost; its writer stops");
                h.task.abort();
                let _ = h.task.await;
            }
        }

        // Take or give partitions to reach a fair share.
        let partitions = ctx.config.partitions;
        let workers = live_workers(&bucket).await;
        let share = usize::from(partitions).div_ceil(workers);
        if held.len() < share && liveness.is_some() {
            let offset = (ctx.config.worker_id.len() * 7) % usize::from(partitions.max(1));
            for i in 0..usize::from(partitions) {
                if held.len() >= share {
                    break;
                }
                let p = ((i + offset) % usize::from(partitions)) as u16;
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
                        let (valid_tx, valid_rx) = watch::channel(lease.valid_until());
                        let (stop_tx, stop_rx) = watch::channel(false);
                        let task =
                            tokio::spawn(writer::run_partition(ctx.clone(), p, valid_rx, stop_rx));
                        let renew_at = Instant::now() + lease.renew_interval();
                        held.insert(
                            p,
                            Held {
                                lease,
                                restart_at: None,
                                valid_until: valid_tx,
                                stop: stop_tx,
                                task,
                                renew_at,
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
    let _ = h.stop.send(true);
    let mut task = h.task;
    match tokio::time::timeout(Duration::from_secs(10), &mut task).await {
        Ok(Ok(Err(e))) => tracing::warn!(partition = p, error = %e, "writer ended"),
        Ok(_) => {}
        Err(_) => task.abort(),
    }
    h.lease.release().await;
}
