//! What the dispatcher's lanes share: the backbone, the tenants' book,
//! the HTTP clients, the settings, and the bounds on calls at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::jetstream;
use switchboard_nats::records::tenants::TenantBook;
use switchboard_protocol::TenantId;
use tokio::sync::Semaphore;

use crate::providers::Clients;

/// How webhook deliveries retry and share the machine.
#[derive(Debug, Clone)]
pub struct HooksConfig {
    /// Attempts of one event at one endpoint before it is dead-lettered.
    pub max_attempts: u32,
    pub first_retry: Duration,
    pub max_retry: Duration,
    /// Webhook calls in progress at once, in all and per tenant.
    pub concurrency: usize,
    pub tenant_concurrency: usize,
    /// Events of one endpoint given up on in a row after which its next
    /// ones are dead-lettered at once, without a call, for `cool_down`.
    pub give_up_after: u32,
    pub cool_down: Duration,
}

impl Default for HooksConfig {
    fn default() -> Self {
        Self {
            max_attempts: 8,
            first_retry: Duration::from_secs(1),
            max_retry: Duration::from_secs(60),
            concurrency: 64,
            tenant_concurrency: 8,
            give_up_after: 3,
            cool_down: Duration::from_secs(300),
        }
    }
}

/// What every lane shares.
pub(crate) struct Shared {
    pub(super) js: jetstream::Context,
    pub(super) tenants: TenantBook,
    pub(super) clients: Clients,
    pub(super) config: HooksConfig,
    pub(super) calls: Arc<Semaphore>,
    pub(super) per_tenant: Mutex<HashMap<TenantId, Arc<Semaphore>>>,
    pub(super) breakers: super::breaker::Breakers,
}

impl Shared {
    pub(super) fn tenant_calls(&self, tenant: &TenantId) -> Arc<Semaphore> {
        self.per_tenant
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(tenant.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(self.config.tenant_concurrency.max(1))))
            .clone()
    }
}
