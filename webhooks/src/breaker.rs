//! Endpoints given up on for a while. Each endpoint's last attempts are
//! kept (a window of `window` outcomes); once at least half the window has
//! been tried and the failed share reaches `ratio`, the endpoint is given
//! up on for `cool_down`: its events go to the dead letters at once,
//! without a call, and so do the retries of events already under way.
//! Counting attempts, not events given up on, matters: an endpoint that
//! accepts each event on its last attempt fails seven calls in eight, and
//! must trip as surely as one that never answers. After the cool-down the
//! window starts empty and the endpoint is tried again.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use switchboard_protocol::TenantId;

/// When an endpoint is given up on (`WebhooksConfig`).
#[derive(Debug, Clone, Copy)]
pub struct TripRule {
    /// Attempts remembered per endpoint.
    pub window: u32,
    /// The failed share of the window that gives the endpoint up.
    pub ratio: f64,
    pub cool_down: Duration,
}

#[derive(Default)]
struct State {
    /// The last attempts, `true` for a failure, oldest first.
    attempts: VecDeque<bool>,
    open_until: Option<Instant>,
}

pub(crate) struct Breakers {
    rule: TripRule,
    endpoints: Mutex<HashMap<(TenantId, String), State>>,
}

impl Breakers {
    pub(crate) fn new(rule: TripRule) -> Self {
        Self {
            rule: TripRule {
                window: rule.window.max(2),
                ratio: rule.ratio.clamp(0.01, 1.0),
                cool_down: rule.cool_down,
            },
            endpoints: Mutex::default(),
        }
    }

    /// Whether the endpoint is given up on now.
    pub(crate) fn is_open(&self, tenant: &TenantId, url: &str, now: Instant) -> bool {
        let mut endpoints = self
            .endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let key = (tenant.clone(), url.to_owned());
        let Some(state) = endpoints.get_mut(&key) else {
            return false;
        };
        match state.open_until {
            Some(until) if now < until => true,
            Some(_) => {
                // Cooled down: tried again from an empty window.
                endpoints.remove(&key);
                false
            }
            None => false,
        }
    }

    /// Counts one attempt; whether it gave the endpoint up just now.
    pub(crate) fn attempted(
        &self,
        tenant: &TenantId,
        url: &str,
        failed: bool,
        now: Instant,
    ) -> bool {
        let mut endpoints = self
            .endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let state = endpoints
            .entry((tenant.clone(), url.to_owned()))
            .or_default();
        if state.open_until.is_some() {
            return false;
        }
        state.attempts.push_back(failed);
        let window = self.rule.window as usize;
        while state.attempts.len() > window {
            state.attempts.pop_front();
        }
        let tried = state.attempts.len();
        let failures = state.attempts.iter().filter(|f| **f).count();
        if tried * 2 >= window && failures as f64 >= self.rule.ratio * tried as f64 {
            state.open_until = Some(now + self.rule.cool_down);
            state.attempts.clear();
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn breakers() -> Breakers {
        Breakers::new(TripRule {
            window: 10,
            ratio: 0.5,
            cool_down: Duration::from_secs(60),
        })
    }

    #[test]
    fn an_endpoint_failing_its_share_of_attempts_is_given_up_on_then_tried_again() {
        let b = breakers();
        let t = TenantId::new("t").unwrap();
        let now = Instant::now();
        // Fewer than half the window: not judged yet.
        for _ in 0..4 {
            assert!(!b.attempted(&t, "u", true, now));
        }
        assert!(!b.is_open(&t, "u", now));
        assert!(b.attempted(&t, "u", true, now), "5 of 5 failed");
        assert!(b.is_open(&t, "u", now));
        assert!(!b.is_open(&t, "other", now), "per endpoint");
        let t2 = TenantId::new("t2").unwrap();
        assert!(!b.is_open(&t2, "u", now), "per tenant");
        let later = now + Duration::from_secs(61);
        assert!(
            !b.is_open(&t, "u", later),
            "tried again after the cool-down"
        );
        assert!(!b.attempted(&t, "u", true, later), "from an empty window");
    }

    #[test]
    fn an_endpoint_that_accepts_on_the_last_attempt_still_trips() {
        let b = breakers();
        let t = TenantId::new("t").unwrap();
        let now = Instant::now();
        // Seven failures, then a success, per event.
        let tripped = (0..8).any(|i| b.attempted(&t, "u", i != 7, now));
        assert!(tripped);
        assert!(b.is_open(&t, "u", now));
    }

    #[test]
    fn an_endpoint_failing_less_than_the_share_stays() {
        let b = breakers();
        let t = TenantId::new("t").unwrap();
        let now = Instant::now();
        // One call in three fails, for ever.
        for i in 0..300 {
            assert!(!b.attempted(&t, "u", i % 3 == 0, now), "attempt {i}");
        }
        assert!(!b.is_open(&t, "u", now));
    }
}
