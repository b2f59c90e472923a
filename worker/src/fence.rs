//! Self-fencing: a writer acts on its partition only while its lease is
//! valid (`partitions.rs` moves `valid_until` with every renewal; the
//! lease may be acted on for four fifths of its TTL, `nats/src/lease.rs`).
//!
//! The clock is read at each check, right before the act it guards, and
//! never remembered: a process stopped for a while (SIGSTOP, a stalled VM)
//! finds the time that passed on its monotonic clock when it goes on, and
//! a check after that fails. So a writer that was stopped past its lease
//! commits nothing it planned before, deletes no consumer (the new
//! owner's has the same name), parks nothing, publishes no event or ack of
//! a batch it committed, and pulls nothing more from its consumer. What no check in this process can cover is an act that
//! had already passed its check when the process stopped: the moment
//! between the check and the request leaving the process. A commit
//! caught there is refused by the store once the new owner has written to
//! the conversation (`expected_last_seq`), and is a repeat of what the new
//! owner is about to write otherwise (the same commands, the same
//! idempotency keys): never a gap or a duplicate. On a store that many
//! processes write (CQL), the store closes that moment itself: a writer
//! claims its partition there when it starts, and its commits carry the
//! claim (`Store::claim_writer`, `Store::commit_as`); a commit after a
//! later claim is refused (`StoreError::Fenced`) and the writer stops.

use std::time::Instant;

use switchboard_store::WriterClaim;
use tokio::sync::watch;

use crate::error::WorkerError;

#[derive(Debug, Clone)]
pub(crate) struct Fence {
    valid_until: watch::Receiver<Instant>,
    /// The store's claim of a writer's partition; `None` for the leader's
    /// tasks, which do not commit as a writer.
    claim: Option<WriterClaim>,
}

impl Fence {
    pub(crate) fn new(valid_until: watch::Receiver<Instant>) -> Self {
        Self {
            valid_until,
            claim: None,
        }
    }

    /// A writer's fence: its lease, and its claim in the store.
    pub(crate) fn writer(valid_until: watch::Receiver<Instant>, claim: WriterClaim) -> Self {
        Self {
            valid_until,
            claim: Some(claim),
        }
    }

    pub(crate) fn claim(&self) -> Option<WriterClaim> {
        self.claim
    }

    /// Whether the lease is valid now.
    pub(crate) fn holds(&self) -> bool {
        Instant::now() < *self.valid_until.borrow()
    }

    /// `LeaseLost` unless the lease is valid now.
    pub(crate) fn check(&self) -> Result<(), WorkerError> {
        if self.holds() {
            Ok(())
        } else {
            Err(WorkerError::LeaseLost)
        }
    }
}

/// Whether this worker leads: it holds partition 0, and the lease is
/// valid now. The leader's tasks (presence, inbox expiry, archiving,
/// leader balancing) ask before each round, so a stopped worker that goes
/// on does not act as the leader it no longer is.
#[derive(Debug, Default)]
pub(crate) struct Leadership(std::sync::Mutex<Option<Fence>>);

impl Leadership {
    /// Partition 0's fence while this worker holds it, else `None`.
    pub(crate) fn set(&self, partition_zero: Option<Fence>) {
        if let Ok(mut held) = self.0.lock() {
            *held = partition_zero;
        }
    }

    pub(crate) fn holds(&self) -> bool {
        self.0
            .lock()
            .is_ok_and(|held| held.as_ref().is_some_and(Fence::holds))
    }
}
