//! The writer thread: group commit.
//!
//! Every write goes through one thread that takes all jobs waiting in its
//! queue, applies them in one redb transaction and commits it once, so one
//! fsync covers as many messages, acks and membership changes as arrived
//! while the previous commit was on disk. Under load the groups grow by
//! themselves; idle, a lone write commits at once.

use std::sync::Arc;

use redb::{Database, Durability};
use tokio::sync::{mpsc, oneshot};

use super::apply::{ApplyError, WriteOp, apply};
use super::codec::storage;
use crate::{StoreError, StoreResult};

/// The most jobs one transaction takes, so that one commit's latency stays bounded.
const MAX_GROUP: usize = 4096;

pub(super) struct Job {
    pub op: WriteOp,
    pub done: oneshot::Sender<StoreResult<()>>,
}

pub(super) fn spawn(db: Arc<Database>, queue_depth: usize) -> std::io::Result<mpsc::Sender<Job>> {
    let (tx, rx) = mpsc::channel(queue_depth);
    std::thread::Builder::new()
        .name("store-writer".into())
        .spawn(move || run(&db, rx))?;
    Ok(tx)
}

fn run(db: &Database, mut rx: mpsc::Receiver<Job>) {
    while let Some(first) = rx.blocking_recv() {
        let mut jobs = vec![first];
        while jobs.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        commit_group(db, jobs);
    }
    tracing::debug!("store writer stopped: every handle is gone");
}

fn fail_all(jobs: Vec<Job>, err: &StoreError) {
    for job in jobs {
        let _ = job.done.send(Err(err.clone()));
    }
}

fn commit_group(db: &Database, mut jobs: Vec<Job>) {
    let started = std::time::Instant::now();
    let mut refused: Vec<(Job, StoreError)> = Vec::new();
    let count = jobs.len();
    loop {
        let mut txn = match db.begin_write() {
            Ok(txn) => txn,
            Err(e) => return fail_all(jobs, &storage(e)),
        };
        if let Err(e) = txn.set_durability(Durability::Immediate) {
            return fail_all(jobs, &storage(e));
        }
        let mut dirty = None;
        let mut i = 0;
        while i < jobs.len() {
            match apply(&txn, &jobs[i].op) {
                Ok(()) => i += 1,
                Err(ApplyError::Clean(e)) => {
                    refused.push((jobs.remove(i), e));
                }
                Err(ApplyError::Dirty(e)) => {
                    dirty = Some((i, e));
                    break;
                }
            }
        }
        if let Some((i, e)) = dirty {
            // Throw the transaction away and redo the group without the
            // job that wrote half its changes. Only storage failures and
            // conflicting writers get here, so the retry is rare.
            if let Err(abort) = txn.abort() {
                tracing::error!(error = %abort, "aborting a store transaction failed");
            }
            if matches!(e, StoreError::Unavailable(_)) {
                fail_all(jobs, &e);
                break;
            }
            refused.push((jobs.remove(i), e));
            continue;
        }
        match txn.commit() {
            Ok(()) => {
                for job in jobs {
                    let _ = job.done.send(Ok(()));
                }
            }
            Err(e) => fail_all(jobs, &storage(e)),
        }
        break;
    }
    for (job, e) in refused {
        let _ = job.done.send(Err(e));
    }
    tracing::trace!(
        jobs = count,
        elapsed_us = started.elapsed().as_micros() as u64,
        "store group committed"
    );
}
