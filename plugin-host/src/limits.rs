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
    /// Log lines one call may write; the rest are dropped.
    pub max_log_lines: u32,
    /// Consecutive failures after which a version is not called for
    /// `quarantine` (`quarantine_ms`): its hook's failure policy answers
    /// instead.
    pub quarantine_after: u32,
    #[serde(rename = "quarantine_ms", with = "millis")]
    pub quarantine: Duration,
    /// A call that succeeds but takes at least this share of its deadline,
    /// in percent, counts toward `quarantine_after` like a failure (its
    /// answer is still used): a plugin that always finishes just in time
    /// costs every message nearly the whole deadline.
    pub slow_call_percent: u32,
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
            compiled_cache_entries: 64,
            compiled_cache_bytes: 1 << 30,
            max_versions_per_hook: 10,
            max_bytes_per_tenant: 128 << 20,
            compile_concurrency: 2,
            compile_timeout: Duration::from_secs(30),
            prune_grace: Duration::from_secs(60),
            max_log_lines: 16,
            quarantine_after: 5,
            quarantine: Duration::from_secs(10),
            slow_call_percent: 50,
        }
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
