//! Plugin calls as Prometheus metrics; a no-op unless the process
//! installs an exporter.
//!
//! Tenants are a label here, so their number is capped: the first
//! [`TENANT_LABELS`] tenants whose plugins are called get their own, and
//! every later one is counted as `other`. A deployment with more tenants
//! running plugins than that reads the rest from the admin API.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use switchboard_protocol::TenantId;

use crate::Hook;

pub const CALLS: &str = "switchboard_plugin_calls_total";
pub const CALL_SECONDS: &str = "switchboard_plugin_call_seconds";
pub const QUARANTINES: &str = "switchboard_plugin_quarantines_total";
pub const COMPILE_SECONDS: &str = "switchboard_plugin_compile_seconds";
pub const COMPILE_TIMEOUTS: &str = "switchboard_plugin_compile_timeouts_total";
pub const COMPILES: &str = "switchboard_plugin_compiles_total";
pub const PRECOMPILED: &str = "switchboard_plugin_precompiled_total";
pub const COMPILED_CACHED: &str = "switchboard_plugin_compiled_cached";
pub const COMPILED_CACHED_BYTES: &str = "switchboard_plugin_compiled_cached_bytes";
pub const COMPONENTS_PRUNED: &str = "switchboard_plugin_components_pruned_total";
pub const SHADOW_CALLS: &str = "switchboard_plugin_shadow_calls_total";

/// Distinct tenant label values at most.
pub const TENANT_LABELS: usize = 100;

/// Registers the descriptions (`# HELP` lines).
pub fn describe() {
    describe_counter!(
        CALLS,
        "Plugin calls by hook, tenant and outcome: ok, slow (past the slow-call share of its deadline), failed, quarantined (answered by the failure policy), not_loaded."
    );
    describe_histogram!(
        CALL_SECONDS,
        Unit::Seconds,
        "One plugin call, by hook and tenant."
    );
    describe_counter!(
        QUARANTINES,
        "Plugin versions put in quarantine (active, shadow or replayed), by hook and tenant."
    );
    describe_histogram!(
        COMPILE_SECONDS,
        Unit::Seconds,
        "One compilation of a component (deploys and activations), up to compile_timeout_ms."
    );
    describe_counter!(
        COMPILE_TIMEOUTS,
        "Compilations answered as timed out (compile_timeout_ms)."
    );
    describe_counter!(
        COMPILES,
        "Components compiled from WebAssembly by this process (not loaded from a precompiled artifact or its own cache)."
    );
    describe_counter!(
        PRECOMPILED,
        "Precompiled artifacts by outcome: loaded (instead of compiling), missing (none in sb_plugin_compiled for this engine), rejected (another engine's, another component's or damaged: compiled instead), stored (written to sb_plugin_compiled), store_failed."
    );
    describe_gauge!(
        COMPILED_CACHED,
        "Compiled components this process keeps for reuse (at most compiled_cache_entries)."
    );
    describe_gauge!(
        COMPILED_CACHED_BYTES,
        Unit::Bytes,
        "Bytes of compiled code this process keeps for reuse (at most compiled_cache_bytes, beyond which only the newest stays)."
    );
    describe_counter!(
        SHADOW_CALLS,
        "Shadow plugin comparisons by hook, tenant and outcome: agree, disagree (with the live decision), failed (the shadow's call), skipped (the queue or the tenant's share of it full, or the live call failed), quarantined (not run: the shadow is quarantined)."
    );
    describe_counter!(
        COMPONENTS_PRUNED,
        "Stored components deleted because no kept version uses them (max_versions_per_hook)."
    );
}

pub(crate) fn compiled(took: Duration, timed_out: bool) {
    histogram!(COMPILE_SECONDS).record(took.as_secs_f64());
    if timed_out {
        counter!(COMPILE_TIMEOUTS).increment(1);
    }
}

/// A component is being compiled from WebAssembly.
pub(crate) fn compiling() {
    counter!(COMPILES).increment(1);
}

pub(crate) fn precompiled(outcome: &'static str) {
    counter!(PRECOMPILED, "outcome" => outcome).increment(1);
}

pub(crate) fn compiled_cached(entries: usize, bytes: usize) {
    gauge!(COMPILED_CACHED).set(entries as f64);
    gauge!(COMPILED_CACHED_BYTES).set(bytes as f64);
}

pub(crate) fn shadow_compared(hook: Hook, tenant: &TenantId, outcome: &'static str) {
    counter!(SHADOW_CALLS, "hook" => hook.as_str(), "tenant" => tenant_label(tenant), "outcome" => outcome)
        .increment(1);
}

pub(crate) fn pruned(components: usize) {
    counter!(COMPONENTS_PRUNED).increment(components as u64);
}

static TENANTS: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// The tenant's label value: its id, or `other` past the cap.
fn tenant_label(tenant: &TenantId) -> String {
    let Ok(mut seen) = TENANTS.lock() else {
        return "other".into();
    };
    let seen = seen.get_or_insert_with(HashSet::new);
    if seen.contains(tenant.as_str()) {
        return tenant.as_str().to_owned();
    }
    if seen.len() < TENANT_LABELS {
        seen.insert(tenant.as_str().to_owned());
        return tenant.as_str().to_owned();
    }
    "other".into()
}

pub(crate) fn called(hook: Hook, tenant: &TenantId, outcome: &'static str, took: Option<Duration>) {
    let tenant = tenant_label(tenant);
    if let Some(took) = took {
        histogram!(CALL_SECONDS, "hook" => hook.as_str(), "tenant" => tenant.clone())
            .record(took.as_secs_f64());
    }
    counter!(CALLS, "hook" => hook.as_str(), "tenant" => tenant, "outcome" => outcome).increment(1);
}

pub(crate) fn quarantined(hook: Hook, tenant: &TenantId) {
    counter!(QUARANTINES, "hook" => hook.as_str(), "tenant" => tenant_label(tenant)).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_past_the_cap_share_one_label() {
        let t = |i: usize| TenantId::new(format!("cap-test-{i}")).unwrap();
        let labels: Vec<String> = (0..TENANT_LABELS + 5)
            .map(|i| tenant_label(&t(i)))
            .collect();
        // Other tests may have taken some of the labels first.
        assert!(labels.iter().filter(|l| *l == "other").count() >= 5);
        assert_eq!(tenant_label(&t(0)), labels[0]);
    }
}
