//! The leader's count of open reports per tenant (v1.2), for
//! `switchboard_reports_open`: read from the store's index of open
//! reports, which holds only those waiting for an admin, every
//! `EVERY`. Only the leader sets it, so one series per tenant is current.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use switchboard_protocol::TenantId;

use crate::ctx::Ctx;

const EVERY: Duration = Duration::from_secs(5);

pub(crate) async fn run(ctx: Arc<Ctx>) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shown: HashSet<TenantId> = HashSet::new();
    loop {
        tick.tick().await;
        if !ctx.leader.holds() {
            // Another worker counts now: this one's series would go stale.
            for tenant in shown.drain() {
                crate::metrics::open_reports(&tenant, 0);
            }
            continue;
        }
        match ctx.store.open_reports().await {
            Ok(counts) => {
                let now: HashSet<TenantId> = counts.iter().map(|(t, _)| t.clone()).collect();
                for tenant in shown.difference(&now) {
                    crate::metrics::open_reports(tenant, 0);
                }
                for (tenant, n) in &counts {
                    crate::metrics::open_reports(tenant, *n);
                }
                shown = now;
            }
            Err(e) => tracing::warn!(error = %e, "cannot count the open reports"),
        }
    }
}
