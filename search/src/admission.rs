//! Which queries compute now. Each takes a place of its user and of its
//! tenant, refused at once past their bounds (one user's or one
//! tenant's burst of queries is told to come back, not queued where it
//! would hold others up), then waits for one of the replica's places,
//! which every tenant shares, until its deadline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use switchboard_protocol::{TenantId, UserId};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::deadline::Deadline;

/// How many queries compute at once, and for how long.
#[derive(Debug, Clone)]
pub struct QueryLimits {
    /// Queries computing at once on this replica, of every tenant.
    pub concurrent: usize,
    /// Of those, one tenant's, and one user's.
    pub per_tenant: usize,
    pub per_user: usize,
    /// A query's time from its arrival, its wait for a place included:
    /// past it, it stops. Below the gateways' wait (5 s).
    pub timeout: Duration,
}

impl Default for QueryLimits {
    fn default() -> Self {
        Self {
            concurrent: std::thread::available_parallelism().map_or(2, usize::from),
            per_tenant: 4,
            per_user: 2,
            timeout: Duration::from_secs(4),
        }
    }
}

pub(crate) enum Refusal {
    /// The user or the tenant has its bound of queries running.
    Busy(String),
    /// No place came free before the deadline.
    TimedOut,
}

pub(crate) struct Admission {
    limits: QueryLimits,
    places: Arc<Semaphore>,
    running: Arc<Mutex<HashMap<Key, usize>>>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Tenant(TenantId),
    User(TenantId, UserId),
}

/// A query's place; given back when dropped.
pub(crate) struct Turn {
    running: Arc<Mutex<HashMap<Key, usize>>>,
    keys: Vec<Key>,
    _place: Option<OwnedSemaphorePermit>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        for key in &self.keys {
            if let Some(n) = running.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    running.remove(key);
                }
            }
        }
    }
}

impl Admission {
    pub(crate) fn new(limits: QueryLimits) -> Self {
        Self {
            places: Arc::new(Semaphore::new(limits.concurrent.max(1))),
            limits,
            running: Arc::default(),
        }
    }

    pub(crate) fn limits(&self) -> &QueryLimits {
        &self.limits
    }

    pub(crate) async fn enter(
        &self,
        tenant: &TenantId,
        user: Option<&UserId>,
        deadline: &Deadline,
    ) -> Result<Turn, Refusal> {
        let mut turn = self.take(tenant, user)?;
        let wait = deadline.remaining();
        match tokio::time::timeout(wait, self.places.clone().acquire_owned()).await {
            Ok(Ok(place)) => {
                turn._place = Some(place);
                Ok(turn)
            }
            _ => Err(Refusal::TimedOut),
        }
    }

    /// The user's and the tenant's places, or why not.
    fn take(&self, tenant: &TenantId, user: Option<&UserId>) -> Result<Turn, Refusal> {
        let mut keys = vec![Key::Tenant(tenant.clone())];
        if let Some(user) = user {
            keys.push(Key::User(tenant.clone(), user.clone()));
        }
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        for key in &keys {
            let (bound, whose) = match key {
                Key::Tenant(_) => (self.limits.per_tenant, "the tenant's"),
                Key::User(..) => (self.limits.per_user, "your"),
            };
            if running.get(key).copied().unwrap_or(0) >= bound.max(1) {
                return Err(Refusal::Busy(format!(
                    "{bound} of {whose} searches are running already; retry in a moment"
                )));
            }
        }
        for key in &keys {
            *running.entry(key.clone()).or_default() += 1;
        }
        Ok(Turn {
            running: self.running.clone(),
            keys,
            _place: None,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::time::Instant;

    fn admission(concurrent: usize) -> Admission {
        Admission::new(QueryLimits {
            concurrent,
            per_tenant: 3,
            per_user: 2,
            timeout: Duration::from_millis(100),
        })
    }

    fn soon() -> Deadline {
        Deadline::new(Instant::now() + Duration::from_millis(100))
    }

    #[tokio::test]
    async fn a_user_and_a_tenant_get_their_bound_and_no_more() {
        let a = admission(10);
        let t = TenantId::new("t").unwrap();
        let (ann, bob, cy) = (
            UserId::new("ann").unwrap(),
            UserId::new("bob").unwrap(),
            UserId::new("cy").unwrap(),
        );
        let first = a.enter(&t, Some(&ann), &soon()).await.ok().unwrap();
        let _second = a.enter(&t, Some(&ann), &soon()).await.ok().unwrap();
        assert!(matches!(
            a.enter(&t, Some(&ann), &soon()).await,
            Err(Refusal::Busy(_))
        ));
        let _bobs = a.enter(&t, Some(&bob), &soon()).await.ok().unwrap();
        assert!(
            matches!(a.enter(&t, Some(&cy), &soon()).await, Err(Refusal::Busy(_))),
            "the tenant's three are running"
        );
        let other = TenantId::new("other").unwrap();
        assert!(
            a.enter(&other, Some(&ann), &soon()).await.is_ok(),
            "per tenant"
        );
        drop(first);
        assert!(a.enter(&t, Some(&ann), &soon()).await.is_ok(), "given back");
    }

    #[tokio::test]
    async fn a_query_waits_for_a_place_until_its_deadline() {
        let a = admission(1);
        let t = TenantId::new("t").unwrap();
        let u = TenantId::new("u").unwrap();
        let held = a.enter(&t, None, &soon()).await.ok().unwrap();
        let started = Instant::now();
        assert!(matches!(
            a.enter(&u, None, &soon()).await,
            Err(Refusal::TimedOut)
        ));
        assert!(started.elapsed() >= Duration::from_millis(90));
        // A refused query gives its tenant's place back.
        drop(held);
        assert!(a.enter(&u, None, &soon()).await.is_ok());
    }
}
