//! When a plugin version stops being called: the failures of its last
//! calls, judged over a sliding window, and the quarantine that follows.
//!
//! A version is quarantined once `quarantine_after` of its last
//! `quarantine_window` calls failed (or were slow). Counting within a
//! window, rather than in a row, is what an alternating plugin cannot
//! evade: one that fails every other call used to reset a "failures in a
//! row" count with each success and was never stopped. Now no
//! `quarantine_window` consecutive calls of a version hold more than
//! `quarantine_after - 1` strikes unless it is quarantined; a version that
//! fails rarely (fewer than that share) runs on.
//!
//! [`FailureWindow`] is the rule on plain data, with no clock and no
//! atomics; [`Health`] is one version's window and quarantine, shared by
//! the threads that call it.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crate::limits::PluginLimits;

/// How a call went, as the quarantine counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Quick,
    /// It failed, or succeeded but took most of its deadline.
    Strike,
}

/// The rule's three numbers, from [`PluginLimits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policy {
    /// Calls the window holds.
    pub window: usize,
    /// Strikes within the window that quarantine the version.
    pub after: usize,
    pub duration: Duration,
}

impl Policy {
    pub(crate) fn of(limits: &PluginLimits) -> Self {
        Self {
            window: limits.quarantine_window as usize,
            after: limits.quarantine_after as usize,
            duration: limits.quarantine,
        }
    }
}

/// The outcomes of a version's last calls, oldest first, and how many
/// of them are strikes.
#[derive(Debug, Default)]
pub(crate) struct FailureWindow {
    outcomes: VecDeque<Outcome>,
    strikes: usize,
}

impl FailureWindow {
    /// Adds a call's outcome; `true` when it quarantines the version. The
    /// window then starts over: after its quarantine a version must strike
    /// `after` times again, so it costs at most `after` strikes per
    /// quarantine.
    pub(crate) fn record(&mut self, outcome: Outcome, policy: &Policy) -> bool {
        self.outcomes.push_back(outcome);
        if outcome == Outcome::Strike {
            self.strikes += 1;
        }
        while self.outcomes.len() > policy.window.max(1) {
            if self.outcomes.pop_front() == Some(Outcome::Strike) {
                self.strikes -= 1;
            }
        }
        if self.strikes >= policy.after.max(1) {
            self.outcomes.clear();
            self.strikes = 0;
            return true;
        }
        false
    }

    /// Strikes among the calls the window holds.
    pub(crate) fn strikes(&self) -> usize {
        self.strikes
    }
}

/// One installed version's failure window and quarantine.
#[derive(Debug, Default)]
pub(crate) struct Health {
    window: Mutex<FailureWindow>,
    /// Unix ms until which the version is not called.
    until_ms: AtomicI64,
    /// Times it was quarantined.
    quarantines: AtomicU64,
}

impl Health {
    pub(crate) fn quarantined(&self, now_ms: i64) -> bool {
        self.until_ms.load(Ordering::Relaxed) > now_ms
    }

    /// Records a call's outcome; returns the strikes now in the window,
    /// and whether this call quarantined the version (from `now_ms` for
    /// the policy's duration).
    pub(crate) fn record(&self, outcome: Outcome, policy: &Policy, now_ms: i64) -> (usize, bool) {
        let mut window = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let strikes_before = window.strikes() + usize::from(outcome == Outcome::Strike);
        if !window.record(outcome, policy) {
            return (window.strikes(), false);
        }
        drop(window);
        let until = now_ms.saturating_add(policy.duration.as_millis().min(i64::MAX as u128) as i64);
        self.until_ms.store(until, Ordering::Relaxed);
        self.quarantines.fetch_add(1, Ordering::Relaxed);
        (strikes_before, true)
    }

    pub(crate) fn quarantines(&self) -> u64 {
        self.quarantines.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Policy = Policy {
        window: 20,
        after: 5,
        duration: Duration::from_secs(10),
    };

    /// Runs `pattern` (`x` a strike, `.` a quick call) through a fresh
    /// window, repeated to `calls` calls; the 1-based calls that
    /// quarantined the version.
    fn check(pattern: &str, calls: usize, policy: &Policy) -> Vec<usize> {
        let outcomes: Vec<Outcome> = pattern
            .chars()
            .map(|c| match c {
                'x' => Outcome::Strike,
                _ => Outcome::Quick,
            })
            .collect();
        let mut window = FailureWindow::default();
        (0..calls)
            .filter(|&i| window.record(outcomes[i % outcomes.len()], policy))
            .map(|i| i + 1)
            .collect()
    }

    #[test]
    fn patterns_that_fail_often_are_quarantined_whatever_their_order() {
        // (pattern, the calls that quarantine it within 40 calls)
        let cases: &[(&str, &[usize])] = &[
            // Alternating: the fifth failure, at call 10, quarantines it.
            (".x", &[10, 20, 30, 40]),
            ("x.", &[9, 19, 29, 39]),
            // One in three.
            ("..x", &[15, 30]),
            // Five in a row, as before.
            ("xxxxx...............", &[5, 25]),
            // Bursts of three: the second burst's second failure; then
            // (the window started over) the fourth burst's first.
            ("xxx.......", &[12, 31]),
            // Every call.
            ("x", &[5, 10, 15, 20, 25, 30, 35, 40]),
        ];
        for (pattern, quarantined_at) in cases {
            assert_eq!(
                check(pattern, 40, &POLICY),
                *quarantined_at,
                "pattern {pattern:?}"
            );
        }
    }

    #[test]
    fn a_version_that_fails_rarely_is_never_quarantined() {
        // Below the threshold: at most four strikes in any 20 calls.
        for pattern in [
            "....x",                // one in five: four per window
            "...................x", // one in twenty
            "xxxx................", // a burst of four, then quiet
            "x.x.x...............................",
            ".",
        ] {
            assert!(
                check(pattern, 10_000, &POLICY).is_empty(),
                "pattern {pattern:?} must run on"
            );
        }
    }

    #[test]
    fn the_threshold_counts_exactly_within_the_window() {
        // Five strikes spread over exactly 20 calls: quarantined at the
        // fifth; spread over 21 calls the first has left the window.
        let at_20 = "x....x....x....x...x";
        assert_eq!(at_20.len(), 20);
        assert_eq!(check(at_20, 20, &POLICY), [20]);
        let at_21 = "x.....x....x....x...x";
        assert_eq!(at_21.len(), 21);
        assert!(check(at_21, 21, &POLICY).is_empty());
        // Four strikes quarantine with `after = 4`, not with 5.
        let four = "x.x.x.x.";
        assert!(check(four, 8, &POLICY).is_empty());
        let policy = Policy { after: 4, ..POLICY };
        assert_eq!(check(four, 8, &policy), [7]);
        // `after = 1`: the first strike.
        let policy = Policy { after: 1, ..POLICY };
        assert_eq!(check("...x", 4, &policy), [4]);
    }

    #[test]
    fn health_quarantines_for_the_policys_duration() {
        let health = Health::default();
        let policy = Policy { after: 2, ..POLICY };
        assert_eq!(health.record(Outcome::Strike, &policy, 1_000), (1, false));
        assert_eq!(health.record(Outcome::Quick, &policy, 1_001), (1, false));
        assert!(!health.quarantined(1_001));
        assert_eq!(health.record(Outcome::Strike, &policy, 1_002), (2, true));
        assert!(health.quarantined(1_002));
        assert!(health.quarantined(11_001));
        assert!(!health.quarantined(11_002), "over after quarantine_ms");
        assert_eq!(health.quarantines(), 1);
        // The window started over.
        assert_eq!(health.record(Outcome::Strike, &policy, 11_003), (1, false));
    }
}
