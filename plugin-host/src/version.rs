//! A version installed in this process ([`Loaded`]), and the guard every
//! call of it goes through, whatever runs it: the live hook call, a
//! shadow comparison or a replay over history. The guard counts the call,
//! answers at once while the version is quarantined, and judges each
//! outcome over the version's failure window (`quarantine.rs`), so a
//! version is stopped the same way in every role.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_nats::jetstream;
use switchboard_protocol::{ConversationKind, TenantId, Timestamp};

use crate::agreement::ShadowStats;
use crate::compiler::CompilerError;
use crate::fanout::FanOut;
use crate::hook::Hook;
use crate::host::{CallError, CompileError, Compiled, Counts, PluginHost};
use crate::quarantine::{Health, Outcome, Policy};
use crate::record::VersionRecord;

/// What a version is run for: its calls are guarded alike, and reported
/// where that role's are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The version that decides the tenant's hook.
    Active,
    /// Run beside the active one without effect (`shadow.rs`).
    Shadow,
    /// Run over stored history by the admin API, a version installed in
    /// neither slot.
    Replay,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Active => "active",
            Role::Shadow => "shadow",
            Role::Replay => "replay",
        }
    }
}

/// Why this process could not load a version. Kept with the version: its
/// text is shown in the hook's listing and carried by every call's
/// `NotLoaded`, the error itself stays for the log.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("fetching the component: {0}")]
    Fetch(#[source] jetstream::object_store::GetError),
    #[error("reading the component: {0}")]
    Read(#[source] std::io::Error),
    /// The stored object is larger than any component this process
    /// accepts: it is not read past the limit.
    #[error("the stored component is over {max} bytes (max_component_bytes)")]
    TooLarge { max: usize },
    #[error("the stored component does not match its digest")]
    DigestMismatch,
    /// No compiler was free, the compilation ran out of time, or it
    /// panicked.
    #[error(transparent)]
    Compiler(#[from] CompilerError),
    #[error(transparent)]
    Compile(#[from] CompileError),
}

/// A version installed in this process.
pub struct Loaded {
    pub tenant: TenantId,
    pub revision: u64,
    pub hook: Hook,
    pub record: VersionRecord,
    pub role: Role,
    /// `Err` when this process could not load the version (the object is
    /// missing or corrupt, or over this process's limits): every call
    /// fails, so the hook's failure policy answers, as for any failure.
    compiled: Result<Arc<Compiled>, LoadError>,
    config: Arc<BTreeMap<String, String>>,
    /// Calls of this version here, and those its failure policy answered.
    calls: AtomicU64,
    failures: AtomicU64,
    /// Calls that succeeded but took most of their deadline.
    slow: AtomicU64,
    health: Health,
    /// Fan-out decisions already made by this version: its inputs are the
    /// conversation's kind and size only, so a connect that checks every
    /// membership (and every message) asks once per distinct size. A
    /// shadow keeps the sizes it was compared on here.
    fan_out_memo: Mutex<HashMap<(ConversationKind, usize), FanOut>>,
    /// As a shadow: how it compares with the live decisions.
    shadow_stats: ShadowStats,
}

/// Distinct (kind, size) decisions remembered per fan-out version; past
/// it the memo starts over.
const FAN_OUT_MEMO_ENTRIES: usize = 4096;

impl Loaded {
    pub(crate) fn new(
        tenant: TenantId,
        revision: u64,
        hook: Hook,
        record: VersionRecord,
        role: Role,
        compiled: Result<Arc<Compiled>, LoadError>,
    ) -> Self {
        Self {
            tenant,
            revision,
            hook,
            config: Arc::new(record.config.clone()),
            record,
            role,
            compiled,
            calls: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            slow: AtomicU64::new(0),
            health: Health::default(),
            fan_out_memo: Mutex::new(HashMap::new()),
            shadow_stats: ShadowStats::default(),
        }
    }

    /// Calls of this version in this process, how many failed (its
    /// hook's failure policy answered), and how often it was quarantined.
    pub fn counts(&self) -> Counts {
        Counts {
            calls: self.calls.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            slow: self.slow.load(Ordering::Relaxed),
            quarantines: self.health.quarantines(),
        }
    }

    /// Whether the version is quarantined now: its calls are answered
    /// without running it.
    pub fn quarantined(&self) -> bool {
        self.health.quarantined(Timestamp::now().unix_ms())
    }

    pub(crate) fn compiled(&self) -> Result<&Arc<Compiled>, &LoadError> {
        self.compiled.as_ref()
    }

    pub fn shadow_stats(&self) -> &ShadowStats {
        &self.shadow_stats
    }

    /// Why this process cannot run the version, if it cannot.
    pub fn load_error(&self) -> Option<String> {
        self.compiled.as_ref().err().map(ToString::to_string)
    }

    /// The decision remembered for (kind, size), if any.
    pub(crate) fn remembered(&self, kind: ConversationKind, members: usize) -> Option<FanOut> {
        let memo = self.fan_out_memo.lock().ok()?;
        memo.get(&(kind, members)).copied()
    }

    /// Remembers a decision for (kind, size); whether it was new.
    pub(crate) fn remember(&self, kind: ConversationKind, members: usize, mode: FanOut) -> bool {
        self.fan_out_memo.lock().is_ok_and(|mut memo| {
            if memo.len() >= FAN_OUT_MEMO_ENTRIES {
                memo.clear();
            }
            memo.insert((kind, members), mode).is_none()
        })
    }

    /// Calls the version unless it is quarantined; counts and logs
    /// failures and slow calls, and quarantines it when its failure
    /// window says so.
    pub(crate) fn call<R>(
        &self,
        host: &PluginHost,
        call: impl FnOnce(
            &PluginHost,
            &Compiled,
            &Arc<BTreeMap<String, String>>,
        ) -> Result<R, CallError>,
    ) -> Result<R, CallError> {
        let now = Timestamp::now().unix_ms();
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.health.quarantined(now) {
            self.failures.fetch_add(1, Ordering::Relaxed);
            self.called("quarantined", None);
            return Err(CallError::Quarantined);
        }
        let compiled = match &self.compiled {
            Ok(c) => c,
            // Logged once, when it was installed.
            Err(why) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                self.called("not_loaded", None);
                return Err(CallError::NotLoaded(why.to_string()));
            }
        };
        let started = std::time::Instant::now();
        let result = call(host, compiled, &self.config);
        let took = started.elapsed();
        let limits = host.limits();
        let policy = Policy::of(limits);
        let strike = match &result {
            Ok(_) => {
                let (deadline, ..) = host.call_limits(&self.tenant);
                let slow = took.as_micros() * 100
                    >= deadline.as_micros() * u128::from(limits.slow_call_percent);
                if !slow {
                    self.called("ok", Some(took));
                    self.health.record(Outcome::Quick, &policy, now);
                    return result;
                }
                self.called("slow", Some(took));
                self.slow.fetch_add(1, Ordering::Relaxed);
                format!("took {took:?} of its {deadline:?} deadline")
            }
            Err(e) => {
                self.called("failed", Some(took));
                self.failures.fetch_add(1, Ordering::Relaxed);
                e.to_string()
            }
        };
        let (strikes, quarantined) = self.health.record(Outcome::Strike, &policy, now);
        let (tenant, hook, digest, role) = (
            &self.tenant,
            self.hook,
            &self.record.digest,
            self.role.as_str(),
        );
        tracing::warn!(
            tenant = %tenant, hook = %hook, digest = %digest, role,
            strikes, of_last = policy.window, problem = %strike,
            "plugin call failed or was slow"
        );
        if quarantined {
            crate::metrics::quarantined(hook, tenant);
            tracing::error!(
                tenant = %tenant, hook = %hook, digest = %digest, role,
                strikes, of_last = policy.window,
                for_ms = policy.duration.as_millis() as u64,
                "plugin quarantined: its failure policy answers until it is over"
            );
        }
        result
    }

    /// A call in the live calls' metrics: the active version's only
    /// (shadows count their comparisons, replays report themselves).
    fn called(&self, outcome: &'static str, took: Option<std::time::Duration>) {
        if self.role == Role::Active {
            crate::metrics::called(self.hook, &self.tenant, outcome, took);
        }
    }
}
