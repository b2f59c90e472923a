//! Admission of requests to a service on the backbone (the store service,
//! the session registry's sync, the plugin services): how many may be in
//! flight at once, in all and per caller.
//!
//! NATS does not tell a responder who asked. What it does give is the
//! reply subject, and a client's replies share its inbox prefix
//! (`_INBOX.<client id>.…`), so the caller is taken to be the reply
//! subject without its last token. A hostile process can vary its reply
//! subjects and so pose as many callers; the bound in all is what holds
//! then: memory stays bounded, and the process that floods is, at worst,
//! as slow as everyone else.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// How many requests a service takes at once (`[services]` in the
/// configuration file; each service a process answers has its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdmissionLimits {
    /// Requests in flight in all.
    pub max_inflight: usize,
    /// Requests in flight from one caller (one reply inbox).
    pub max_inflight_per_caller: usize,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        Self {
            max_inflight: 512,
            max_inflight_per_caller: 128,
        }
    }
}

/// Why a request was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the service has {0} requests in flight, its limit; retry")]
    Full(usize),
    #[error("this caller has {0} requests in flight, its limit; retry")]
    CallerFull(usize),
}

/// The requests in flight of one service.
#[derive(Clone)]
pub struct Admission {
    limits: AdmissionLimits,
    inner: Arc<Mutex<Counts>>,
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_caller: HashMap<String, usize>,
}

/// A request taken: its place is given back when this is dropped.
#[must_use = "the request's place is given back when this is dropped"]
pub struct Admitted {
    caller: String,
    inner: Arc<Mutex<Counts>>,
}

impl Admission {
    pub fn new(limits: AdmissionLimits) -> Self {
        Self {
            limits: AdmissionLimits {
                max_inflight: limits.max_inflight.max(1),
                max_inflight_per_caller: limits.max_inflight_per_caller.max(1),
            },
            inner: Arc::default(),
        }
    }

    /// Takes the request answered on `reply`, if there is room for it.
    pub fn admit(&self, reply: &str) -> Result<Admitted, Refused> {
        let caller = caller_of(reply);
        let mut counts = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if counts.total >= self.limits.max_inflight {
            return Err(Refused::Full(self.limits.max_inflight));
        }
        let mine = counts.per_caller.get(caller).copied().unwrap_or(0);
        if mine >= self.limits.max_inflight_per_caller {
            return Err(Refused::CallerFull(self.limits.max_inflight_per_caller));
        }
        counts.total += 1;
        counts.per_caller.insert(caller.to_owned(), mine + 1);
        Ok(Admitted {
            caller: caller.to_owned(),
            inner: self.inner.clone(),
        })
    }

    /// Requests in flight now.
    pub fn inflight(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut counts = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.per_caller.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.per_caller.remove(&self.caller);
            }
        }
    }
}

/// The caller a reply subject stands for: the subject without its last
/// token (a client's inbox prefix), or the whole subject if it has one
/// token only.
fn caller_of(reply: &str) -> &str {
    reply.rsplit_once('.').map_or(reply, |(prefix, _)| prefix)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn limits(all: usize, each: usize) -> Admission {
        Admission::new(AdmissionLimits {
            max_inflight: all,
            max_inflight_per_caller: each,
        })
    }

    #[test]
    fn a_caller_gets_its_share_and_no_more() {
        let admission = limits(10, 2);
        let a1 = admission.admit("_INBOX.a.1").unwrap();
        let _a2 = admission.admit("_INBOX.a.2").unwrap();
        assert_eq!(
            admission.admit("_INBOX.a.3").err(),
            Some(Refused::CallerFull(2))
        );
        // Another caller still has room.
        let _b1 = admission.admit("_INBOX.b.1").unwrap();
        drop(a1);
        assert!(admission.admit("_INBOX.a.4").is_ok());
    }

    #[test]
    fn the_bound_in_all_holds_against_callers_that_vary() {
        let admission = limits(3, 3);
        let taken: Vec<_> = (0..3)
            .map(|i| admission.admit(&format!("_INBOX.x{i}.1")).unwrap())
            .collect();
        assert_eq!(admission.admit("_INBOX.y.1").err(), Some(Refused::Full(3)));
        assert_eq!(admission.inflight(), 3);
        drop(taken);
        assert_eq!(admission.inflight(), 0);
        assert!(admission.inner.lock().unwrap().per_caller.is_empty());
    }

    #[test]
    fn the_caller_is_the_inbox_prefix() {
        assert_eq!(caller_of("_INBOX.abc.17"), "_INBOX.abc");
        assert_eq!(caller_of("_INBOX.abc.def.9"), "_INBOX.abc.def");
        assert_eq!(caller_of("bare"), "bare");
    }
}
