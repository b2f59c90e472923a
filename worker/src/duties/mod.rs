//! What a worker does besides writing conversations, each part a task
//! that [`Duties`] starts, restarts after a panic, and stops.
//!
//! On every worker: `scheduler` (its share of the scheduled messages
//! that came due), `audit_events` (its share of the moderation audit
//! entries, relayed as webhook events) and the erasure requests of
//! gateways (`erasure::serve_gateways`). On the leader only (the holder of
//! partition 0; each part waits for leadership itself): `archive` (old
//! day buckets to the blob store), `message_expiry` (messages past their
//! retention or disappearing time), `inbox_expiry` (undelivered inbox
//! entries past their TTL), `erasure` (erasure jobs), `report_count`,
//! `presence` (last-seen times and presence notices) and `balance` (the
//! ingest streams' Raft leaders spread over the nodes).
//!
//! Work that must be ordered with a conversation's writes is not done
//! here: a duty asks the conversation's writer (`maintenance`), which
//! serves the request between batches (`archive::serve`).

pub(crate) mod archive;
mod audit_events;
mod balance;
pub(crate) mod erasure;
mod inbox_expiry;
pub(crate) mod maintenance;
pub(crate) mod message_expiry;
mod presence;
mod report_count;
pub(crate) mod scheduler;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use switchboard_nats::records::presence::RoutingTable;

use crate::ctx::Ctx;

/// The running duties; [`Duties::stop`] ends them all.
pub(crate) struct Duties(Vec<tokio::task::JoinHandle<()>>);

impl Duties {
    /// Starts every duty. `routing_table` and `last_seen` are what the
    /// presence notices read.
    pub fn start(ctx: &Arc<Ctx>, routing_table: Arc<RoutingTable>, last_seen: kv::Store) -> Self {
        let part =
            |name: &'static str, run: fn(Arc<Ctx>) -> futures::future::BoxFuture<'static, ()>| {
                let ctx = ctx.clone();
                supervised(name, move || run(ctx.clone()))
            };
        let presence = {
            let ctx = ctx.clone();
            supervised("presence notifier", move || {
                presence::notify(ctx.clone(), routing_table.clone(), last_seen.clone())
            })
        };
        Duties(vec![
            presence,
            part("inbox expiry", |c| Box::pin(inbox_expiry::run(c))),
            part("archiver", |c| Box::pin(archive::run(c))),
            part("message expiry", |c| Box::pin(message_expiry::run(c))),
            part("erasure jobs", |c| Box::pin(erasure::run(c))),
            part("erasure requests", |c| Box::pin(erasure::serve_gateways(c))),
            part("report counter", |c| Box::pin(report_count::run(c))),
            part("scheduler", |c| Box::pin(scheduler::run(c))),
            part("audit relay", |c| Box::pin(audit_events::run(c))),
            part("leader balancer", |c| Box::pin(balance::run(c))),
        ])
    }

    pub fn stop(self) {
        for duty in self.0 {
            duty.abort();
        }
    }
}

/// Runs one duty, and starts it again after a second if it panics: a bug
/// in one must take neither the others nor the process down. Aborting
/// the returned handle stops it.
fn supervised<F, Fut>(name: &'static str, make: F) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    /// Aborts the running duty when the supervisor itself is aborted.
    struct AbortOnDrop(tokio::task::AbortHandle);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    tokio::spawn(async move {
        loop {
            let part = tokio::spawn(make());
            let guard = AbortOnDrop(part.abort_handle());
            let ended = part.await;
            drop(guard);
            match ended {
                Err(e) if e.is_panic() => {
                    tracing::error!(part = name, error = %e, "a worker part panicked; starting it again");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                _ => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_part_that_panics_is_started_again() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let part = supervised("test part", move || {
            let runs = counted.clone();
            async move {
                if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("a bug in the first run");
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(10), part)
            .await
            .expect("the part ended")
            .expect("the supervisor itself did not panic");
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }
}
