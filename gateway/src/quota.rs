//! Tenant quotas (F21) that are counts, as one gateway enforces them:
//! open connections per user and per tenant, and the message size. The
//! quotas come from `sb_tenants` and apply from the moment a change
//! arrives. Counts are this gateway's own: with N gateways a tenant may
//! hold up to N times a connection quota; members per conversation are
//! checked by the conversation's writer, exactly. Rates (per second,
//! minute, hour) are `rates.rs`'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use switchboard_nats::records::tenants::{TenantBook, TenantQuotas};
use switchboard_protocol::{ErrorCode, TenantId, UserId};

use crate::auth::Identity;
use crate::error::ApiError;

#[derive(Default)]
struct Open {
    total: u32,
    per_user: HashMap<UserId, u32>,
}

#[derive(Default)]
pub(crate) struct Quotas {
    pub(crate) book: TenantBook,
    open: Arc<Mutex<HashMap<TenantId, Open>>>,
}

/// An admitted connection; dropping it gives the place back.
pub(crate) struct Admission {
    open: Arc<Mutex<HashMap<TenantId, Open>>>,
    tenant: TenantId,
    user: UserId,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Ok(mut open) = self.open.lock()
            && let Some(o) = open.get_mut(&self.tenant)
        {
            o.total = o.total.saturating_sub(1);
            if let Some(n) = o.per_user.get_mut(&self.user) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    o.per_user.remove(&self.user);
                }
            }
            if o.total == 0 {
                open.remove(&self.tenant);
            }
        }
    }
}

fn exceeded(what: String) -> ApiError {
    ApiError::new(ErrorCode::QuotaExceeded, what)
}

impl Quotas {
    pub(crate) fn new(book: TenantBook) -> Self {
        Self {
            book,
            ..Self::default()
        }
    }

    pub(crate) fn of(&self, tenant: &TenantId) -> TenantQuotas {
        self.book.quotas(tenant)
    }

    /// Admits one more connection of `id`, or says which quota it would
    /// pass. `default_per_user` applies when the tenant sets no
    /// `max_connections_per_user`.
    pub(crate) fn admit(
        &self,
        id: &Identity,
        default_per_user: u32,
    ) -> Result<Admission, ApiError> {
        let mut q = self.of(&id.tenant);
        q.max_connections_per_user = q.max_connections_per_user.or(Some(default_per_user));
        let mut open = self
            .open
            .lock()
            .map_err(|_| ApiError::new(ErrorCode::Internal, "connection count poisoned"))?;
        let o = open.entry(id.tenant.clone()).or_default();
        let mine = o.per_user.get(&id.user).copied().unwrap_or(0);
        if let Some(max) = q.max_connections_per_user
            && mine >= max
        {
            return Err(exceeded(format!(
                "the user has {mine} connections open here, the tenant's quota is {max} per user"
            )));
        }
        if let Some(max) = q.max_connections
            && o.total >= max
        {
            return Err(exceeded(format!(
                "the tenant has {} connections open here, its quota is {max}",
                o.total
            )));
        }
        o.total += 1;
        *o.per_user.entry(id.user.clone()).or_default() += 1;
        Ok(Admission {
            open: self.open.clone(),
            tenant: id.tenant.clone(),
            user: id.user.clone(),
        })
    }
}
