//! Which version of which plugin each tenant runs, kept current by
//! watching the `sb_plugins` bucket, and the hook calls the gateway and
//! the worker make, with each hook's failure policy.
//!
//! A version is installed by replacing one map entry, so a swap is
//! atomic: a call resolves its version once and runs to the end on it,
//! whatever is installed meanwhile. Nothing is lost or handled twice.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::fanout::{FanOut, FanOutPolicy};
use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use switchboard_backbone::definitions::{PLUGIN_CODE_STORE, PLUGINS_BUCKET};
use switchboard_backbone::kv_key;
use switchboard_protocol::content::ContentLimits;
use switchboard_protocol::{ConversationKind, TenantId, Timestamp};

use crate::compiler::{Compiler, CompilerError, Wait};
use crate::hook::{EditRequest, Hook, Moderation, ModerationInput};
use crate::host::{self, CallError, CompileError, Compiled, Counts, PluginHost, Verdict};
use crate::shadow::{self, Agreement, Decision, ShadowRunner, ShadowStats};

/// What moderation does when its plugin fails. The other hooks always
/// fall back to the built-in default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Refuse the message (`unavailable`): nothing unmoderated is stored.
    #[default]
    Closed,
    /// Store the message as sent.
    Open,
}

/// How a version became active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    Deploy,
    Rollback,
}

/// The value of `sb_plugins` key `<tenant>.<hook>`: one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VersionRecord {
    /// `sha256:<hex>` of the component; the object `<tenant>.<digest>`.
    pub digest: String,
    pub size: u64,
    /// The values the plugin reads through the `config` import.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    #[serde(default)]
    pub on_failure: OnFailure,
    pub activation: Activation,
    pub activated_at: Timestamp,
    pub activated_by: String,
}

pub fn kv_key(tenant: &TenantId, hook: Hook) -> String {
    format!("{}.{}", kv_key::part(tenant.as_str()), hook.as_str())
}

/// Where a version is installed: the active one decides; a shadow runs
/// beside it on the same input, without effect (`shadow.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Active,
    Shadow,
}

/// The key of the tenant's shadow version for the hook.
pub fn shadow_kv_key(tenant: &TenantId, hook: Hook) -> String {
    format!("{}.shadow", kv_key(tenant, hook))
}

/// Where processes answer how they run a tenant's hook: every gateway
/// and worker replies to a request on `sb.plugins.status.<key>`, the key
/// as in `sb_plugins`.
pub const STATUS_SUBJECT_PREFIX: &str = "sb.plugins.status";

pub fn object_name(tenant: &TenantId, digest: &str) -> String {
    format!("{}.{}", tenant.as_str(), digest)
}

/// The digest of `name` if it is one of `tenant`'s objects. Tenant ids
/// may hold dots and digests never do, so `acme.x.sha256:...` is tenant
/// `acme.x`'s, never `acme`'s.
pub fn digest_of_object<'a>(tenant: &TenantId, name: &'a str) -> Option<&'a str> {
    name.strip_prefix(tenant.as_str())?
        .strip_prefix('.')
        .filter(|digest| digest.starts_with("sha256:") && !digest.contains('.'))
}

/// The tenant, hook and slot an `sb_plugins` key names, if it names them.
pub fn parse_key(key: &str) -> Option<(TenantId, Hook, Slot)> {
    let (tenant, rest) = key.split_once('.')?;
    let (hook, slot) = match rest.strip_suffix(".shadow") {
        Some(hook) => (hook, Slot::Shadow),
        None => (rest, Slot::Active),
    };
    Some((
        TenantId::new(kv_key::id(tenant)?).ok()?,
        Hook::parse(hook)?,
        slot,
    ))
}

/// The component a version record names, from its object: read within
/// `max` whatever the record's `size` claims, and checked against its
/// digest.
pub async fn read_component(
    object: impl tokio::io::AsyncRead + Unpin,
    record: &VersionRecord,
    max: usize,
) -> Result<Vec<u8>, LoadError> {
    let bytes = crate::objects::read_bounded(object, record.size, max)
        .await
        .map_err(LoadError::Read)?;
    if host::digest(&bytes) != record.digest {
        return Err(LoadError::DigestMismatch);
    }
    Ok(bytes)
}

/// A version installed in this process.
pub struct Loaded {
    pub tenant: TenantId,
    pub revision: u64,
    pub hook: Hook,
    pub record: VersionRecord,
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
    /// Failures and slow calls since the last quick success.
    failures_in_a_row: AtomicU32,
    /// Unix ms until which the version is not called.
    quarantined_until: AtomicI64,
    /// Fan-out decisions already made by this version: its inputs are the
    /// conversation's kind and size only, so a connect that checks every
    /// membership (and every message) asks once per distinct size. A
    /// shadow keeps the sizes it was compared on here.
    fan_out_memo: std::sync::Mutex<HashMap<(ConversationKind, usize), FanOut>>,
    /// As a shadow: how it compares with the live decisions.
    shadow_stats: ShadowStats,
}

/// Distinct (kind, size) decisions remembered per fan-out version; past
/// it the memo starts over.
const FAN_OUT_MEMO_ENTRIES: usize = 4096;

impl Loaded {
    /// Calls of this version in this process, and how many failed (its
    /// hook's failure policy answered).
    pub fn counts(&self) -> Counts {
        Counts {
            calls: self.calls.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            slow: self.slow.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn compiled(&self) -> Result<&Arc<Compiled>, &LoadError> {
        self.compiled.as_ref()
    }

    pub(crate) fn config(&self) -> &Arc<BTreeMap<String, String>> {
        &self.config
    }

    pub fn shadow_stats(&self) -> &ShadowStats {
        &self.shadow_stats
    }

    /// Why this process cannot run the version, if it cannot.
    pub fn load_error(&self) -> Option<String> {
        self.compiled.as_ref().err().map(ToString::to_string)
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
    Read(#[source] crate::objects::ReadError),
    #[error("the stored component does not match its digest")]
    DigestMismatch,
    /// No compiler was free, the compilation ran out of time, or it
    /// panicked.
    #[error(transparent)]
    Compiler(#[from] CompilerError),
    #[error(transparent)]
    Compile(#[from] CompileError),
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The plugins bucket or the code store could not be read.
    #[error("plugin registry: {0}")]
    Backbone(#[source] switchboard_backbone::Cause),
    /// The watch that loads the active versions ended before they were all
    /// read.
    #[error("plugin registry: the watch of sb_plugins ended")]
    WatchEnded,
}

pub struct Plugins {
    host: Arc<PluginHost>,
    compiler: Compiler,
    shadows: ShadowRunner,
    /// Every install and removal, for those who act on a change (a
    /// gateway re-deciding which conversations it listens to).
    changes: tokio::sync::broadcast::Sender<(TenantId, Hook)>,
    /// By tenant id, then by slot and hook ([`slot_index`]): looked up on
    /// every message, so without building a key.
    installed: RwLock<HashMap<String, [Option<Arc<Loaded>>; 6]>>,
}

/// Where a hook's version in a slot is in a tenant's array.
fn slot_index(hook: Hook, slot: Slot) -> usize {
    hook as usize
        + match slot {
            Slot::Active => 0,
            Slot::Shadow => 3,
        }
}

/// How this process runs a tenant's hook, as it answers on
/// [`STATUS_SUBJECT_PREFIX`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProcessStatus {
    /// The process (`gateway-...`, `worker-...`).
    pub process: String,
    /// The revisions it runs.
    pub active_revision: Option<u64>,
    pub shadow_revision: Option<u64>,
    /// How its shadow compares here, when it runs one.
    pub shadow: Option<Agreement>,
}

impl Plugins {
    pub fn new(host: PluginHost) -> Arc<Self> {
        let limits = host.limits();
        let compiler = Compiler::new(limits.compile_concurrency, limits.compile_timeout);
        let host = Arc::new(host);
        Arc::new(Self {
            compiler,
            shadows: ShadowRunner::start(host.clone()),
            host,
            changes: tokio::sync::broadcast::channel(256).0,
            installed: RwLock::new(HashMap::new()),
        })
    }

    pub fn host(&self) -> &PluginHost {
        &self.host
    }

    /// Where this process's compilations run.
    pub fn compiler(&self) -> &Compiler {
        &self.compiler
    }

    /// The version this process runs for the tenant's hook.
    pub fn active(&self, tenant: &TenantId, hook: Hook) -> Option<Arc<Loaded>> {
        self.installed(tenant, hook, Slot::Active)
    }

    /// The tenant's shadow version for the hook, if it has one.
    pub fn shadow(&self, tenant: &TenantId, hook: Hook) -> Option<Arc<Loaded>> {
        self.installed(tenant, hook, Slot::Shadow)
    }

    /// The active and the shadow version of the tenant's hook, in one
    /// lookup (every hook call asks for both).
    fn versions(
        &self,
        tenant: &TenantId,
        hook: Hook,
    ) -> (Option<Arc<Loaded>>, Option<Arc<Loaded>>) {
        let installed = self.installed.read().unwrap_or_else(|p| p.into_inner());
        match installed.get(tenant.as_str()) {
            Some(versions) => (
                versions[slot_index(hook, Slot::Active)].clone(),
                versions[slot_index(hook, Slot::Shadow)].clone(),
            ),
            None => (None, None),
        }
    }

    fn installed(&self, tenant: &TenantId, hook: Hook, slot: Slot) -> Option<Arc<Loaded>> {
        let installed = self.installed.read().unwrap_or_else(|p| p.into_inner());
        installed.get(tenant.as_str())?[slot_index(hook, slot)].clone()
    }

    /// Whether the tenant's hook has a version here, active or shadow:
    /// whether its input must be gathered at all.
    pub fn wants(&self, tenant: &TenantId, hook: Hook) -> bool {
        let installed = self.installed.read().unwrap_or_else(|p| p.into_inner());
        installed.get(tenant.as_str()).is_some_and(|versions| {
            versions[slot_index(hook, Slot::Active)].is_some()
                || versions[slot_index(hook, Slot::Shadow)].is_some()
        })
    }

    /// How this process runs the tenant's hook.
    pub fn status(&self, tenant: &TenantId, hook: Hook, process: &str) -> ProcessStatus {
        let shadow = self.shadow(tenant, hook);
        ProcessStatus {
            process: process.to_owned(),
            active_revision: self.active(tenant, hook).map(|l| l.revision),
            shadow_revision: shadow.as_ref().map(|l| l.revision),
            shadow: shadow.map(|l| l.shadow_stats.report()),
        }
    }

    /// Answers [`STATUS_SUBJECT_PREFIX`] requests for as long as the
    /// process runs: how it runs the tenant's hook named in the subject.
    pub async fn answer_status(
        self: &Arc<Self>,
        client: async_nats::Client,
        process: String,
    ) -> Result<tokio::task::JoinHandle<()>, RegistryError> {
        let mut requests = client
            .subscribe(format!("{STATUS_SUBJECT_PREFIX}.>"))
            .await
            .map_err(|e| RegistryError::Backbone(switchboard_backbone::cause(e)))?;
        let plugins = self.clone();
        Ok(tokio::spawn(async move {
            while let Some(request) = requests.next().await {
                let key = request
                    .subject
                    .strip_prefix(STATUS_SUBJECT_PREFIX)
                    .and_then(|k| k.strip_prefix('.'));
                let (Some(reply), Some((tenant, hook, Slot::Active))) =
                    (request.reply, key.and_then(parse_key))
                else {
                    continue;
                };
                let status = plugins.status(&tenant, hook, &process);
                let Ok(body) = serde_json::to_vec(&status) else {
                    continue;
                };
                if let Err(e) = client.publish(reply, body.into()).await {
                    tracing::debug!(error = %e, "cannot answer a plugin status request");
                }
            }
        }))
    }

    /// Tells of every version installed or removed from now on.
    pub fn changes(&self) -> tokio::sync::broadcast::Receiver<(TenantId, Hook)> {
        self.changes.subscribe()
    }

    /// Installs `loaded` as the tenant's version for `hook` in `slot`, or
    /// removes it.
    fn install(&self, tenant: &TenantId, hook: Hook, slot: Slot, loaded: Option<Arc<Loaded>>) {
        self.swap(tenant, hook, slot, loaded);
        // Nobody listening is fine.
        let _ = self.changes.send((tenant.clone(), hook));
    }

    fn swap(&self, tenant: &TenantId, hook: Hook, slot: Slot, loaded: Option<Arc<Loaded>>) {
        let mut installed = self.installed.write().unwrap_or_else(|p| p.into_inner());
        let at = slot_index(hook, slot);
        match loaded {
            Some(l) => installed.entry(tenant.as_str().to_owned()).or_default()[at] = Some(l),
            None => {
                if let Some(versions) = installed.get_mut(tenant.as_str()) {
                    versions[at] = None;
                    if versions.iter().all(Option::is_none) {
                        installed.remove(tenant.as_str());
                    }
                }
            }
        }
    }

    /// Moderates a message before it is committed. Without a plugin, or
    /// for content plugins never see, everything is allowed.
    pub fn moderate(&self, input: &ModerationInput<'_>, limits: &ContentLimits) -> Moderation {
        let (active, shadow) = self.versions(input.tenant, Hook::Moderation);
        let Some(loaded) = active else {
            if let Some(shadow) = shadow {
                let input = shadow::Input::moderation(input, limits);
                self.shadows.compare(shadow, input, Decision::Allow);
            }
            return Moderation::Allow;
        };
        let result = self.guarded(&loaded, |h, c, cfg| h.moderate(c, cfg, input, limits));
        if let Some(shadow) = shadow {
            match &result {
                Ok(verdict) => {
                    let live = Decision::of_verdict(verdict);
                    let input = shadow::Input::moderation(input, limits);
                    self.shadows.compare(shadow, input, live);
                }
                Err(_) => shadow.shadow_stats.skip(),
            }
        }
        match result {
            Ok(None) | Ok(Some(Verdict::Allow)) => Moderation::Allow,
            Ok(Some(Verdict::Reject(reason))) => Moderation::Reject(reason),
            Ok(Some(Verdict::Rewrite(content))) => Moderation::Rewrite(content),
            Err(_) if loaded.record.on_failure == OnFailure::Open => Moderation::Allow,
            Err(e) => Moderation::Failed(format!(
                "the moderation plugin failed ({e}); try again later"
            )),
        }
    }

    /// The tenant's edit policy's decision, or `builtin`'s when there is
    /// no plugin or it failed. `Err` holds the reason for a denial.
    pub fn edit_policy(
        &self,
        request: &EditRequest<'_>,
        builtin: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        let (active, shadow) = self.versions(request.tenant, Hook::EditPolicy);
        let decided = active.and_then(|loaded| {
            self.guarded(&loaded, |h, c, cfg| h.edit(c, cfg, request))
                .ok()
        });
        let decision = decided.unwrap_or_else(builtin);
        if let Some(shadow) = shadow {
            let input = shadow::Input::edit(request);
            self.shadows
                .compare(shadow, input, Decision::of_edit(&decision));
        }
        decision
    }

    /// The tenant's fan-out policy's choice, or `None` when the built-in
    /// threshold decides. Direct conversations always fan out on write.
    pub fn fan_out(
        &self,
        tenant: &TenantId,
        kind: ConversationKind,
        members: usize,
    ) -> Option<FanOut> {
        if kind == ConversationKind::Direct {
            return None;
        }
        let loaded = self.active(tenant, Hook::FanOut)?;
        self.active_fan_out(&loaded, tenant, kind, members)
    }

    /// The active fan-out version's choice, remembered per size.
    fn active_fan_out(
        &self,
        loaded: &Loaded,
        tenant: &TenantId,
        kind: ConversationKind,
        members: usize,
    ) -> Option<FanOut> {
        if let Ok(memo) = loaded.fan_out_memo.lock()
            && let Some(mode) = memo.get(&(kind, members))
        {
            return Some(*mode);
        }
        let mode = self
            .guarded(loaded, |h, c, cfg| h.fan_out(c, cfg, tenant, kind, members))
            .ok()?;
        if let Ok(mut memo) = loaded.fan_out_memo.lock() {
            if memo.len() >= FAN_OUT_MEMO_ENTRIES {
                memo.clear();
            }
            memo.insert((kind, members), mode);
        }
        Some(mode)
    }

    /// How the conversation fans out: the tenant's plugin, else `default`.
    pub fn fan_out_mode(
        &self,
        tenant: &TenantId,
        kind: ConversationKind,
        members: usize,
        default: &FanOutPolicy,
    ) -> FanOut {
        // Direct conversations always fan out on write; no plugin is asked.
        if kind == ConversationKind::Direct {
            return default.mode(kind, members);
        }
        let (active, shadow) = self.versions(tenant, Hook::FanOut);
        let mode = active
            .and_then(|loaded| self.active_fan_out(&loaded, tenant, kind, members))
            .unwrap_or_else(|| default.mode(kind, members));
        if let Some(shadow) = shadow {
            // Once per distinct size, as the active version is asked.
            let first = shadow.fan_out_memo.lock().is_ok_and(|mut seen| {
                if seen.len() >= FAN_OUT_MEMO_ENTRIES {
                    seen.clear();
                }
                seen.insert((kind, members), mode).is_none()
            });
            if first {
                let input = shadow::Input::FanOut {
                    kind,
                    member_count: members,
                };
                self.shadows
                    .compare(shadow, input, Decision::of_fan_out(mode));
            }
        }
        mode
    }

    /// Calls a version unless it is quarantined; counts and logs failures,
    /// and quarantines a version that keeps failing.
    fn guarded<R>(
        &self,
        loaded: &Loaded,
        call: impl FnOnce(
            &PluginHost,
            &Compiled,
            &Arc<BTreeMap<String, String>>,
        ) -> Result<R, CallError>,
    ) -> Result<R, CallError> {
        let now = Timestamp::now().unix_ms();
        let hook = loaded.hook;
        loaded.calls.fetch_add(1, Ordering::Relaxed);
        if loaded.quarantined_until.load(Ordering::Relaxed) > now {
            loaded.failures.fetch_add(1, Ordering::Relaxed);
            crate::metrics::called(hook, &loaded.tenant, "quarantined", None);
            return Err(CallError::Quarantined);
        }
        let compiled = match &loaded.compiled {
            Ok(c) => c,
            // Logged once, when it was installed.
            Err(why) => {
                loaded.failures.fetch_add(1, Ordering::Relaxed);
                crate::metrics::called(hook, &loaded.tenant, "not_loaded", None);
                return Err(CallError::NotLoaded(why.to_string()));
            }
        };
        let started = std::time::Instant::now();
        let result = call(&self.host, compiled, &loaded.config);
        let limits = self.host.limits();
        let took = started.elapsed();
        let strike = match &result {
            Ok(_) => {
                let (deadline, ..) = self.host.call_limits(&loaded.tenant);
                let slow = took.as_micros() * 100
                    >= deadline.as_micros() * u128::from(limits.slow_call_percent);
                if !slow {
                    crate::metrics::called(hook, &loaded.tenant, "ok", Some(took));
                    loaded.failures_in_a_row.store(0, Ordering::Relaxed);
                    return result;
                }
                crate::metrics::called(hook, &loaded.tenant, "slow", Some(took));
                loaded.slow.fetch_add(1, Ordering::Relaxed);
                format!("took {took:?} of its {deadline:?} deadline")
            }
            Err(e) => {
                crate::metrics::called(hook, &loaded.tenant, "failed", Some(took));
                loaded.failures.fetch_add(1, Ordering::Relaxed);
                e.to_string()
            }
        };
        let in_a_row = loaded.failures_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::warn!(
            tenant = %loaded.tenant, hook = %hook, digest = %loaded.record.digest,
            in_a_row, problem = %strike, "plugin call failed or was slow"
        );
        if in_a_row >= limits.quarantine_after {
            let until = now + limits.quarantine.as_millis() as i64;
            loaded.quarantined_until.store(until, Ordering::Relaxed);
            loaded.failures_in_a_row.store(0, Ordering::Relaxed);
            crate::metrics::quarantined(hook, &loaded.tenant);
            tracing::error!(
                tenant = %loaded.tenant, hook = %hook, digest = %loaded.record.digest,
                for_ms = limits.quarantine.as_millis() as u64,
                "plugin quarantined: its failure policy answers until it is over"
            );
        }
        result
    }

    /// Loads every active version, then keeps following `sb_plugins` in
    /// the background. Returns once the versions active at the call are
    /// installed, so a process never serves a tenant without its plugins.
    pub async fn follow(
        self: &Arc<Self>,
        js: &jetstream::Context,
    ) -> Result<tokio::task::JoinHandle<()>, RegistryError> {
        let err = |e: Box<dyn std::error::Error + Send + Sync>| {
            RegistryError::Backbone(switchboard_backbone::cause(e))
        };
        let bucket = js
            .get_key_value(PLUGINS_BUCKET)
            .await
            .map_err(|e| err(e.into()))?;
        let code = js
            .get_object_store(PLUGIN_CODE_STORE)
            .await
            .map_err(|e| err(e.into()))?;
        let mut pending = bucket.status().await.map_err(|e| err(e.into()))?.values();
        let mut watch = bucket
            .watch_with_history(">")
            .await
            .map_err(|e| err(e.into()))?;
        // Until `pending` reaches zero this replays the latest entry of
        // every key; then it is live.
        while pending > 0 {
            let Some(entry) = watch.next().await else {
                return Err(RegistryError::WatchEnded);
            };
            let entry = entry.map_err(|e| err(e.into()))?;
            pending = entry.delta;
            self.apply(&code, entry).await;
        }
        let plugins = self.clone();
        Ok(tokio::spawn(async move {
            loop {
                while let Some(entry) = watch.next().await {
                    match entry {
                        Ok(entry) => plugins.apply(&code, entry).await,
                        Err(e) => tracing::warn!(error = %e, "watching sb_plugins"),
                    }
                }
                // Watch again from every key's latest entry: what is
                // installed already is skipped by its revision.
                tracing::warn!("the watch of sb_plugins ended; watching again");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                match bucket.watch_with_history(">").await {
                    Ok(w) => watch = w,
                    Err(e) => tracing::warn!(error = %e, "watching sb_plugins again"),
                }
            }
        }))
    }

    /// Installs (or removes) the version an entry names.
    async fn apply(
        self: &Arc<Self>,
        code: &jetstream::object_store::ObjectStore,
        entry: kv::Entry,
    ) {
        let Some((tenant, hook, slot)) = parse_key(&entry.key) else {
            tracing::warn!(key = %entry.key, "ignoring an sb_plugins key that names no tenant and hook");
            return;
        };
        if entry.operation != kv::Operation::Put {
            self.install(&tenant, hook, slot, None);
            match slot {
                Slot::Active => {
                    tracing::info!(tenant = %tenant, hook = %hook, "plugin removed: the built-in default applies")
                }
                Slot::Shadow => {
                    tracing::info!(tenant = %tenant, hook = %hook, "shadow plugin removed")
                }
            }
            return;
        }
        if self
            .installed(&tenant, hook, slot)
            .is_some_and(|l| l.revision >= entry.revision)
        {
            return;
        }
        let record: VersionRecord = match serde_json::from_slice(&entry.value) {
            Ok(r) => r,
            Err(e) => {
                // Not a version: a hand-made mistake. Nothing to install.
                tracing::error!(
                    tenant = %tenant, hook = %hook, revision = entry.revision, error = %e,
                    "sb_plugins holds a value that is not a version record; ignored"
                );
                return;
            }
        };
        // A shadow being promoted is compiled already: the switch is
        // instant.
        let shadow_compiled = self
            .shadow(&tenant, hook)
            .filter(|s| slot == Slot::Active && s.record.digest == record.digest)
            .and_then(|s| s.compiled.as_ref().ok().cloned());
        let compiled = match shadow_compiled {
            Some(compiled) => Ok(compiled),
            None => self.load(code, &tenant, hook, &record).await,
        };
        match &compiled {
            Ok(_) => tracing::info!(
                tenant = %tenant, hook = %hook, digest = %record.digest, shadow = slot == Slot::Shadow,
                revision = entry.revision, "plugin version installed"
            ),
            Err(e) => tracing::error!(
                tenant = %tenant, hook = %hook, digest = %record.digest,
                revision = entry.revision, error = %e,
                "cannot load a plugin version: its hook's failure policy applies"
            ),
        }
        let loaded = Loaded {
            tenant: tenant.clone(),
            revision: entry.revision,
            hook,
            config: Arc::new(record.config.clone()),
            record,
            compiled,
            calls: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            slow: AtomicU64::new(0),
            fan_out_memo: std::sync::Mutex::new(HashMap::new()),
            failures_in_a_row: AtomicU32::new(0),
            quarantined_until: AtomicI64::new(0),
            shadow_stats: ShadowStats::default(),
        };
        self.install(&tenant, hook, slot, Some(Arc::new(loaded)));
    }

    /// Fetches, checks and compiles the version's component.
    async fn load(
        self: &Arc<Self>,
        code: &jetstream::object_store::ObjectStore,
        tenant: &TenantId,
        hook: Hook,
        record: &VersionRecord,
    ) -> Result<Arc<Compiled>, LoadError> {
        let object = code
            .get(object_name(tenant, &record.digest))
            .await
            .map_err(LoadError::Fetch)?;
        let max = self.host.limits().max_component_bytes;
        let bytes = read_component(object, record, max).await?;
        self.compile_off_runtime(hook, bytes).await
    }

    /// Compiles through the [`Compiler`], waiting for a free one as long
    /// as it takes: the version must load, however many are queued.
    pub(crate) async fn compile_off_runtime(
        self: &Arc<Self>,
        hook: Hook,
        bytes: Vec<u8>,
    ) -> Result<Arc<Compiled>, LoadError> {
        let plugins = self.clone();
        Ok(self
            .compiler
            .run(Wait::Patient, move || plugins.host.compile(hook, &bytes))
            .await??)
    }
}
