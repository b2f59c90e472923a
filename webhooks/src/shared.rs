//! What the dispatcher's readers and lanes share: the backbone, the
//! tenants' book, the HTTP clients, the settings, and the bounds on calls
//! at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::jetstream;
use switchboard_nats::records::tenants::TenantBook;
use switchboard_protocol::TenantId;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::breaker::{Breakers, TripRule};
use switchboard_outbound::{CallConfig, Clients};

/// How webhook deliveries retry and share the machine.
#[derive(Debug, Clone)]
pub struct WebhooksConfig {
    /// How a call is bounded, which CA it trusts besides the public ones,
    /// and whether endpoints may be private addresses (`[push]`, shared
    /// with the push providers).
    pub calls: CallConfig,
    /// Attempts of one event at one endpoint before it is dead-lettered.
    pub max_attempts: u32,
    pub first_retry: Duration,
    pub max_retry: Duration,
    /// Webhook calls in progress at once, in all and per tenant.
    pub concurrency: usize,
    pub tenant_concurrency: usize,
    /// Events of one tenant handed to the dispatcher and not yet done
    /// (its consumer's `max_ack_pending`): its share of the work in
    /// progress, which no other tenant's events wait behind.
    pub tenant_in_flight: i64,
    /// When an endpoint is given up on for a while.
    pub trip: TripRule,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            calls: CallConfig::default(),
            max_attempts: 8,
            first_retry: Duration::from_secs(1),
            max_retry: Duration::from_secs(60),
            concurrency: 64,
            tenant_concurrency: 8,
            tenant_in_flight: 500,
            trip: TripRule {
                window: 20,
                ratio: 0.75,
                cool_down: Duration::from_secs(300),
            },
        }
    }
}

/// What every reader and lane shares.
pub(crate) struct Shared {
    pub(super) js: jetstream::Context,
    pub(super) tenants: TenantBook,
    pub(super) clients: Clients,
    pub(super) config: WebhooksConfig,
    calls_at_once: Arc<Semaphore>,
    per_tenant: Mutex<HashMap<TenantId, Arc<Semaphore>>>,
    pub(super) breakers: Breakers,
}

impl Shared {
    pub(super) fn new(
        js: jetstream::Context,
        tenants: TenantBook,
        clients: Clients,
        config: WebhooksConfig,
    ) -> Self {
        Self {
            calls_at_once: Arc::new(Semaphore::new(config.concurrency.max(1))),
            per_tenant: Mutex::default(),
            breakers: Breakers::new(config.trip),
            js,
            tenants,
            clients,
            config,
        }
    }

    /// Leave to make one call for `tenant`: first the tenant's own share,
    /// then one of all. In that order, so a tenant whose calls are all
    /// taken waits without holding any of the shared ones.
    pub(super) async fn call_permits(
        &self,
        tenant: &TenantId,
    ) -> (Option<OwnedSemaphorePermit>, Option<OwnedSemaphorePermit>) {
        let own = self
            .per_tenant
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(tenant.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(self.config.tenant_concurrency.max(1))))
            .clone();
        let own = own.acquire_owned().await.ok();
        let all = self.calls_at_once.clone().acquire_owned().await.ok();
        (own, all)
    }
}
