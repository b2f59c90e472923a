//! The limits every plugin call runs under (I5). Configurable per process
//! (`[plugins]` in the configuration file); the defaults suit hooks that
//! take microseconds.

use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginLimits {
    /// Wall-clock budget of one call, enforced by epoch interruption
    /// (`deadline_ms`).
    #[serde(rename = "deadline_ms", with = "millis")]
    pub deadline: Duration,
    /// WebAssembly instructions (roughly) one call may execute.
    pub fuel: u64,
    /// Linear memory of one instance, in bytes.
    pub memory_bytes: usize,
    /// Elements of one table.
    pub table_elements: usize,
    /// WebAssembly stack of one call, in bytes.
    pub stack_bytes: usize,
    /// Instances that may run at once in this process; calls beyond it wait.
    pub pool_size: u32,
    /// Largest component accepted for upload, in bytes.
    pub max_component_bytes: usize,
    /// Largest precompiled artifact (a component's compiled code,
    /// `precompiled.rs`) read from `sb_plugin_compiled` or written there;
    /// a larger one is compiled here instead. A JavaScript engine's is
    /// about 55 MB. 0: never load or store artifacts.
    pub max_precompiled_bytes: usize,
    /// Compiled components this process keeps for reuse (per digest and
    /// hook); past it, the least recently used is forgotten (versions in
    /// use keep theirs; it is compiled again if deployed again).
    pub compiled_cache_entries: usize,
    /// Bytes of compiled code those entries may take together; past it
    /// the least recently used are forgotten too (the newest stays,
    /// whatever its size). A compiled JavaScript engine takes tens of MiB.
    pub compiled_cache_bytes: usize,
    /// Versions of one tenant's hook kept in storage: the active one and
    /// those a rollback can return to, newest first. Older components are
    /// deleted from the code store (their records stay listed). At least 1.
    pub max_versions_per_hook: usize,
    /// Bytes of components one tenant keeps stored, the kept versions of
    /// every hook together; a deploy past it is refused.
    pub max_bytes_per_tenant: u64,
    /// Compilations that may run at once in this process; more wait. At
    /// least 1.
    pub compile_concurrency: usize,
    /// Longest one compilation may take (`compile_timeout_ms`); a deploy
    /// also waits at most this long for a free compiler.
    #[serde(rename = "compile_timeout_ms", with = "millis")]
    pub compile_timeout: Duration,
    /// A component stored this recently is never deleted as unkept
    /// (`prune_grace_ms`): it may belong to a deploy whose version record
    /// is not written yet.
    #[serde(rename = "prune_grace_ms", with = "millis")]
    pub prune_grace: Duration,
    /// Deploys this process's deploy service carries out at once, queued
    /// for a compiler or compiling, of all tenants together and of one
    /// tenant; past either a deploy is refused (503 `unavailable`, 429
    /// `rate_limited`). At least 1.
    pub deploy_queue: usize,
    pub deploy_queue_per_tenant: usize,
    /// Finished deploys whose report (`GET .../deploys/{id}`) this process
    /// keeps, at most, and for how long (`deploy_report_ms`).
    pub deploy_reports: usize,
    #[serde(rename = "deploy_report_ms", with = "millis")]
    pub deploy_report: Duration,
    /// Log lines one call may write; the rest are dropped.
    pub max_log_lines: u32,
    /// Bytes of one log line, after its control characters are escaped;
    /// the rest is cut.
    pub max_log_line_bytes: usize,
    /// Failures (and slow calls) among a version's last
    /// `quarantine_window` calls that quarantine it: it is not called for
    /// `quarantine` (`quarantine_ms`) and its hook's failure policy
    /// answers instead (`quarantine.rs`). At least 1, at most the window.
    pub quarantine_after: u32,
    /// Calls the failure window holds: 1 to [`MAX_QUARANTINE_WINDOW`].
    pub quarantine_window: u32,
    #[serde(rename = "quarantine_ms", with = "millis")]
    pub quarantine: Duration,
    /// A call that succeeds but takes at least this share of its deadline,
    /// in percent, counts toward `quarantine_after` like a failure (its
    /// answer is still used): a plugin that always finishes just in time
    /// costs every message nearly the whole deadline.
    pub slow_call_percent: u32,
    /// Threads that run shadow calls in this process. A tenant's shadow
    /// calls run one at a time, tenants in turn, so one tenant's shadows
    /// take at most one of them.
    pub shadow_threads: usize,
    /// Shadow calls waiting in this process, all tenants together, and
    /// those of one tenant; past either, a comparison is skipped (and
    /// counted as such).
    pub shadow_queue: usize,
    pub shadow_queue_per_tenant: usize,
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            deadline: Duration::from_millis(20),
            fuel: 50_000_000,
            memory_bytes: 16 << 20,
            table_elements: 20_000,
            stack_bytes: 512 << 10,
            pool_size: 64,
            max_component_bytes: 16 << 20,
            max_precompiled_bytes: 256 << 20,
            compiled_cache_entries: 64,
            compiled_cache_bytes: 1 << 30,
            max_versions_per_hook: 10,
            max_bytes_per_tenant: 128 << 20,
            compile_concurrency: 2,
            compile_timeout: Duration::from_secs(30),
            prune_grace: Duration::from_secs(60),
            deploy_queue: 16,
            deploy_queue_per_tenant: 2,
            deploy_reports: 256,
            deploy_report: Duration::from_secs(15 * 60),
            max_log_lines: 16,
            max_log_line_bytes: 1024,
            quarantine_after: 5,
            quarantine_window: 20,
            quarantine: Duration::from_secs(10),
            slow_call_percent: 50,
            shadow_threads: 2,
            shadow_queue: 1024,
            shadow_queue_per_tenant: 128,
        }
    }
}

/// Longest failure window (`quarantine_window`), in calls.
pub const MAX_QUARANTINE_WINDOW: u32 = 1000;

/// Most shadow threads (`shadow_threads`) one process may start.
pub const MAX_SHADOW_THREADS: usize = 64;

/// A `[plugins]` value the host cannot work with.
#[derive(Debug, thiserror::Error)]
#[error("[plugins] {name} = {value}: {rule}")]
pub struct LimitsError {
    pub name: &'static str,
    pub value: u64,
    pub rule: &'static str,
}

impl PluginLimits {
    /// Refuses values that would turn a bound off or make it meaningless.
    pub fn check(&self) -> Result<(), LimitsError> {
        let bad = |name, value: u64, rule| LimitsError { name, value, rule };
        if !(1..=MAX_QUARANTINE_WINDOW).contains(&self.quarantine_window) {
            return Err(bad(
                "quarantine_window",
                self.quarantine_window.into(),
                "must be 1 to 1000 calls",
            ));
        }
        if self.quarantine_after == 0 || self.quarantine_after > self.quarantine_window {
            return Err(bad(
                "quarantine_after",
                self.quarantine_after.into(),
                "must be at least 1 and at most quarantine_window (else nothing is ever quarantined)",
            ));
        }
        if !(1..=MAX_SHADOW_THREADS).contains(&self.shadow_threads) {
            return Err(bad(
                "shadow_threads",
                self.shadow_threads as u64,
                "must be 1 to 64",
            ));
        }
        if self.shadow_queue == 0 || self.shadow_queue_per_tenant == 0 {
            return Err(bad(
                "shadow_queue",
                self.shadow_queue.min(self.shadow_queue_per_tenant) as u64,
                "shadow_queue and shadow_queue_per_tenant must be at least 1",
            ));
        }
        if self.deploy_queue == 0 || self.deploy_queue_per_tenant == 0 || self.deploy_reports == 0 {
            return Err(bad(
                "deploy_queue",
                self.deploy_queue
                    .min(self.deploy_queue_per_tenant)
                    .min(self.deploy_reports) as u64,
                "deploy_queue, deploy_queue_per_tenant and deploy_reports must be at least 1",
            ));
        }
        if self.max_log_line_bytes < 16 {
            return Err(bad(
                "max_log_line_bytes",
                self.max_log_line_bytes as u64,
                "must be at least 16",
            ));
        }
        Ok(())
    }
}

/// Durations in the configuration file are milliseconds.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_that_turn_a_bound_off_are_refused_at_their_threshold() {
        let ok = PluginLimits::default();
        assert!(ok.check().is_ok());
        let with = |f: fn(&mut PluginLimits)| {
            let mut l = PluginLimits::default();
            f(&mut l);
            l.check().map_err(|e| e.name)
        };
        assert!(with(|l| l.quarantine_window = MAX_QUARANTINE_WINDOW).is_ok());
        assert_eq!(
            with(|l| l.quarantine_window = MAX_QUARANTINE_WINDOW + 1),
            Err("quarantine_window")
        );
        assert_eq!(with(|l| l.quarantine_window = 0), Err("quarantine_window"));
        assert!(with(|l| l.quarantine_after = l.quarantine_window).is_ok());
        assert_eq!(
            with(|l| l.quarantine_after = l.quarantine_window + 1),
            Err("quarantine_after")
        );
        assert_eq!(with(|l| l.quarantine_after = 0), Err("quarantine_after"));
        assert!(with(|l| l.shadow_threads = MAX_SHADOW_THREADS).is_ok());
        assert_eq!(
            with(|l| l.shadow_threads = MAX_SHADOW_THREADS + 1),
            Err("shadow_threads")
        );
        assert_eq!(with(|l| l.shadow_threads = 0), Err("shadow_threads"));
        assert_eq!(with(|l| l.shadow_queue_per_tenant = 0), Err("shadow_queue"));
        assert!(with(|l| l.deploy_queue_per_tenant = 1).is_ok());
        assert_eq!(with(|l| l.deploy_queue_per_tenant = 0), Err("deploy_queue"));
        assert_eq!(with(|l| l.deploy_queue = 0), Err("deploy_queue"));
        assert_eq!(with(|l| l.deploy_reports = 0), Err("deploy_queue"));
        assert!(with(|l| l.max_log_line_bytes = 16).is_ok());
        assert_eq!(
            with(|l| l.max_log_line_bytes = 15),
            Err("max_log_line_bytes")
        );
    }
}
