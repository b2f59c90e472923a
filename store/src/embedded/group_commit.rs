//! The commit thread: group commit.
//!
//! Every write goes through one thread that takes all jobs waiting in its
//! queue, applies them to one write batch and commits it with one journal
//! sync, so one fsync covers as many messages, acks and membership changes
//! as arrived while the previous commit was on disk. Under load the groups
//! grow by themselves; idle, a lone write commits at once.

use std::sync::Arc;

use fjall::{Database, PersistMode};
use tokio::sync::{mpsc, oneshot};

use super::apply::{Applied, ApplyError, GroupView, WriteOp};
use super::cache::{Pending, RowCache};
use super::codec::storage;
use super::keys::Spaces;
use crate::{StoreError, StoreResult};

/// The most jobs one transaction takes, so that one commit's latency stays bounded.
const MAX_GROUP: usize = 4096;

pub(super) struct Job {
    pub op: WriteOp,
    pub done: oneshot::Sender<StoreResult<Applied>>,
}

pub(super) fn spawn(
    db: Database,
    spaces: Arc<Spaces>,
    queue_depth: usize,
) -> std::io::Result<mpsc::Sender<Job>> {
    let (tx, rx) = mpsc::channel(queue_depth);
    std::thread::Builder::new()
        .name("store-commit".into())
        .spawn(move || run(&db, &spaces, rx))?;
    Ok(tx)
}

fn run(db: &Database, spaces: &Spaces, mut rx: mpsc::Receiver<Job>) {
    let mut cache = RowCache::default();
    while let Some(first) = rx.blocking_recv() {
        let mut jobs = vec![first];
        while jobs.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        commit_group(db, spaces, &mut cache, jobs);
        cache.trim();
    }
    tracing::debug!("store commit thread stopped: every handle is gone");
}

fn fail_all(jobs: Vec<Job>, err: &StoreError) {
    for job in jobs {
        let _ = job.done.send(Err(err.clone()));
    }
}

fn commit_group(db: &Database, spaces: &Spaces, cache: &mut RowCache, mut jobs: Vec<Job>) {
    let started = std::time::Instant::now();
    let count = jobs.len();
    let mut refused: Vec<(Job, StoreError)> = Vec::new();
    loop {
        // What each applied job produced, in job order.
        let mut applied: Vec<Applied> = Vec::with_capacity(jobs.len());
        // Everything committed so far; the cache covers this group's writes.
        let snap = db.snapshot();
        let mut batch = db.batch().durability(Some(PersistMode::SyncData));
        let mut pending = Pending::default();
        let mut dirty = None;
        let mut i = 0;
        while i < jobs.len() {
            let mut group = GroupView {
                snap: &snap,
                batch: &mut batch,
                s: spaces,
                cache: &mut *cache,
                pending: &mut pending,
            };
            match group.apply(&jobs[i].op) {
                Ok(result) => {
                    applied.push(result);
                    i += 1;
                }
                Err(ApplyError::Clean(e)) => refused.push((jobs.remove(i), e)),
                Err(ApplyError::Dirty(e)) => {
                    dirty = Some((i, e));
                    break;
                }
            }
        }
        if let Some((i, e)) = dirty {
            // Throw the transaction away and redo the group without the job
            // that wrote half its changes. Only storage failures and
            // conflicting writers get here, so the retry is rare.
            drop(batch);
            // The cache may hold what the thrown-away batch wrote.
            cache.clear();
            if matches!(e, StoreError::Unavailable(_)) {
                fail_all(jobs, &e);
                break;
            }
            refused.push((jobs.remove(i), e));
            continue;
        }
        match batch.commit() {
            Ok(()) => {
                for (job, result) in jobs.into_iter().zip(applied) {
                    let _ = job.done.send(Ok(result));
                }
            }
            Err(e) => {
                cache.clear();
                fail_all(jobs, &storage(e));
            }
        }
        break;
    }
    for (job, e) in refused {
        let _ = job.done.send(Err(e));
    }
    let took = started.elapsed();
    crate::metrics::group_committed(count, took);
    tracing::trace!(
        jobs = count,
        elapsed_us = took.as_micros() as u64,
        "store group committed"
    );
}
