//! What a writer does after a batch failed to plan or commit: a decision
//! on plain data, the time passed in. Waiting is right for what goes away
//! by itself (the store or the id source unavailable), and keeps order;
//! a commit the store refused is planned again at once from the store's
//! state; anything else fails the same way every time, and after a few
//! attempts is given up on (`apply.rs` then applies the batch one command
//! at a time, and `park.rs` sets aside the command that still fails).

use std::time::{Duration, Instant};

use switchboard_store::StoreError;

use crate::sequencer::SequenceError;

/// Attempts of a batch that fails the same way, with an error retrying
/// cannot fix, before it is given up on.
pub(super) const POISON_ATTEMPTS: u32 = 3;

/// How long a transient failure may go on before each retry is an alert:
/// the partition is stalled, by design, until the store is back.
pub(super) const STALL_ALERT_AFTER: Duration = Duration::from_secs(30);

const FIRST_BACKOFF: Duration = Duration::from_millis(20);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// The store refused the commit (a conversation moved on, a key is
    /// stored already): plan again at once.
    Replan,
    /// Wait `backoff`, then try again; `stalled_for` is how long the
    /// failures have gone on, once that is past `STALL_ALERT_AFTER`.
    Wait {
        backoff: Duration,
        stalled_for: Option<Duration>,
    },
    /// The same kind of failure `POISON_ATTEMPTS` times: give up.
    GiveUp,
}

/// The retries of one batch.
#[derive(Debug)]
pub(super) struct Retry {
    since: Instant,
    backoff: Duration,
    poisoned: u32,
}

impl Retry {
    /// For a batch first tried at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Self {
            since: now,
            backoff: FIRST_BACKOFF,
            poisoned: 0,
        }
    }

    pub(super) fn after(&mut self, failure: &SequenceError, now: Instant) -> Next {
        if matches!(failure, SequenceError::Store(StoreError::Conflict(_))) {
            return Next::Replan;
        }
        let stalled_for = if transient(failure) {
            Some(now.saturating_duration_since(self.since)).filter(|d| *d >= STALL_ALERT_AFTER)
        } else {
            self.poisoned += 1;
            if self.poisoned >= POISON_ATTEMPTS {
                return Next::GiveUp;
            }
            None
        };
        let backoff = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        Next::Wait {
            backoff,
            stalled_for,
        }
    }
}

/// Failures that go away by themselves. Anything else (corrupt data, an
/// answer the store cannot give) fails the same way every time.
fn transient(e: &SequenceError) -> bool {
    matches!(
        e,
        SequenceError::Store(StoreError::Unavailable(_)) | SequenceError::Ids(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unavailable() -> SequenceError {
        SequenceError::Store(StoreError::Unavailable("down".into()))
    }
    fn corrupt() -> SequenceError {
        SequenceError::Store(StoreError::Corrupt("bad row".into()))
    }
    fn conflict() -> SequenceError {
        SequenceError::Store(StoreError::Conflict("seq moved".into()))
    }
    fn wait(ms: u64) -> Next {
        Next::Wait {
            backoff: Duration::from_millis(ms),
            stalled_for: None,
        }
    }

    /// Feeds failures at the given seconds after the first try.
    fn run(failures: Vec<(u64, SequenceError)>) -> Vec<Next> {
        let t0 = Instant::now();
        let mut retry = Retry::new(t0);
        failures
            .into_iter()
            .map(|(secs, e)| retry.after(&e, t0 + Duration::from_secs(secs)))
            .collect()
    }

    #[test]
    fn only_an_unavailable_store_or_id_source_is_waited_out() {
        assert!(transient(&unavailable()));
        assert!(!transient(&corrupt()));
        let too_large = SequenceError::Store(StoreError::AnswerTooLarge { bytes: 2, max: 1 });
        assert!(!transient(&too_large));
    }

    #[test]
    fn retries_back_off_and_give_up_only_on_what_waiting_cannot_fix() {
        type Case = (&'static str, Vec<(u64, SequenceError)>, Vec<Next>);
        let table: Vec<Case> = vec![
            (
                "unavailable: doubling waits up to 2 s, never given up",
                (0..9).map(|_| (0, unavailable())).collect(),
                vec![
                    wait(20),
                    wait(40),
                    wait(80),
                    wait(160),
                    wait(320),
                    wait(640),
                    wait(1280),
                    wait(2000),
                    wait(2000),
                ],
            ),
            (
                "unavailable past the alert threshold: an alert",
                vec![(29, unavailable()), (31, unavailable())],
                vec![
                    wait(20),
                    Next::Wait {
                        backoff: Duration::from_millis(40),
                        stalled_for: Some(Duration::from_secs(31)),
                    },
                ],
            ),
            (
                "a refused commit is planned again at once, as often as it comes",
                vec![
                    (0, conflict()),
                    (0, conflict()),
                    (0, conflict()),
                    (0, conflict()),
                ],
                vec![Next::Replan, Next::Replan, Next::Replan, Next::Replan],
            ),
            (
                "corrupt data: given up on at the third attempt",
                vec![(0, corrupt()), (0, corrupt()), (0, corrupt())],
                vec![wait(20), wait(40), Next::GiveUp],
            ),
            (
                "refusals and outages do not count towards giving up",
                vec![
                    (0, corrupt()),
                    (0, conflict()),
                    (0, unavailable()),
                    (0, corrupt()),
                    (0, corrupt()),
                ],
                vec![wait(20), Next::Replan, wait(40), wait(80), Next::GiveUp],
            ),
        ];
        for (case, failures, expected) in table {
            assert_eq!(run(failures), expected, "{case}");
        }
    }
}
