//! Endpoints given up on for a while: one whose events keep failing for
//! good gets its next ones dead-lettered at once, without a call, until a
//! cool-down passes (then one event tries it again). A dead endpoint then
//! holds each of its conversations' events for no time, not for all its
//! retries: the consumer's events in progress, which every tenant shares,
//! never fill up behind it.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use switchboard_protocol::TenantId;

#[derive(Default)]
struct State {
    /// Events given up on in a row.
    failed: u32,
    open_until: Option<Instant>,
}

pub(crate) struct Breakers {
    after: u32,
    cool_down: Duration,
    endpoints: Mutex<HashMap<(TenantId, String), State>>,
}

impl Breakers {
    pub(crate) fn new(after: u32, cool_down: Duration) -> Self {
        Self {
            after: after.max(1),
            cool_down,
            endpoints: Mutex::default(),
        }
    }

    /// Whether the endpoint is given up on now.
    pub(crate) fn is_open(&self, tenant: &TenantId, url: &str, now: Instant) -> bool {
        let endpoints = self
            .endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        endpoints
            .get(&(tenant.clone(), url.to_owned()))
            .and_then(|s| s.open_until)
            .is_some_and(|until| now < until)
    }

    /// An event reached it: it is trusted again.
    pub(crate) fn succeeded(&self, tenant: &TenantId, url: &str) {
        self.endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(tenant.clone(), url.to_owned()));
    }

    /// An event was given up on; whether the endpoint is given up on now.
    pub(crate) fn failed(&self, tenant: &TenantId, url: &str, now: Instant) -> bool {
        let mut endpoints = self
            .endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let state = endpoints
            .entry((tenant.clone(), url.to_owned()))
            .or_default();
        state.failed += 1;
        if state.failed >= self.after {
            state.open_until = Some(now + self.cool_down);
            state.failed = 0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn an_endpoint_is_given_up_on_after_failures_in_a_row_then_tried_again() {
        let b = Breakers::new(3, Duration::from_secs(60));
        let t = TenantId::new("t").unwrap();
        let now = Instant::now();
        assert!(!b.failed(&t, "u", now));
        assert!(!b.failed(&t, "u", now));
        // A success in between starts the count over.
        b.succeeded(&t, "u");
        assert!(!b.failed(&t, "u", now));
        assert!(!b.failed(&t, "u", now));
        assert!(!b.is_open(&t, "u", now));
        assert!(b.failed(&t, "u", now));
        assert!(b.is_open(&t, "u", now));
        assert!(!b.is_open(&t, "other", now), "per endpoint");
        assert!(
            !b.is_open(&TenantId::new("t2").unwrap(), "u", now),
            "per tenant"
        );
        assert!(
            !b.is_open(&t, "u", now + Duration::from_secs(61)),
            "tried again"
        );
    }
}
