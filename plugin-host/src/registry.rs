//! Which version of which plugin each tenant runs in this process, and
//! the hook calls the gateway and the worker make, with each hook's
//! failure policy. `follow.rs` keeps the versions current from the
//! `sb_plugins` bucket.
//!
//! A version is installed by replacing one map entry, so a swap is
//! atomic: a call resolves its version once and runs to the end on it,
//! whatever is installed meanwhile. Nothing is lost or handled twice.
//! Every call, live, shadow or replay, goes through its version's guard
//! (`version.rs`): counted, and quarantined when it fails too often.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use switchboard_protocol::content::ContentLimits;
use switchboard_protocol::previews::LinkPreview;
use switchboard_protocol::{ConversationKind, TenantId};

use crate::agreement::{Agreement, Compared, Decision};
use crate::artifacts::SharedArtifacts;
use crate::compiler::Compiler;
use crate::deploy_jobs::{DeployJobs, DeployProgress};
use crate::fanout::{FanOut, FanOutPolicy};
use crate::hook::{EditRequest, Hook, Moderation, ModerationInput, PreviewInput, ReactionInput};
use crate::host::{CallError, Compiled, PluginHost, Verdict};
use crate::preview::PreviewVerdict;
use crate::shadow::{self, ShadowRunner};

pub use crate::record::parse_key;
pub use crate::record::{
    Activation, OnFailure, STATUS_SUBJECT_PREFIX, Slot, VersionRecord, digest_of_object, kv_key,
    object_name, shadow_kv_key,
};
pub use crate::version::{LoadError, Loaded, Role};

/// Versions run by replays that are installed in neither slot, kept so
/// that running one again finds its failures and quarantine; past it the
/// least recently replayed is forgotten.
const REPLAYED_VERSIONS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The plugins bucket or the code store could not be read.
    #[error("plugin registry: {0}")]
    Backbone(#[source] switchboard_nats::Cause),
    /// The watch that loads the active versions ended before they were all
    /// read.
    #[error("plugin registry: the watch of sb_plugins ended")]
    WatchEnded,
}

/// The configuration key a moderation version sets to `true` to be
/// consulted on reports (v1.2): `review_reports`.
pub const REVIEW_REPORTS: &str = "review_reports";

pub struct Plugins {
    host: Arc<PluginHost>,
    compiler: Compiler,
    shadows: ShadowRunner,
    /// Replayed versions installed in neither slot, most recently
    /// replayed last (at most [`REPLAYED_VERSIONS`]).
    replayed: Mutex<VecDeque<Arc<Loaded>>>,
    /// Every install and removal, for those who act on a change (a
    /// gateway re-deciding which conversations it listens to).
    changes: tokio::sync::broadcast::Sender<(TenantId, Hook)>,
    /// By tenant id, then by slot and hook ([`slot_index`]): looked up on
    /// every message, so without building a key.
    installed: RwLock<HashMap<String, [Option<Arc<Loaded>>; 6]>>,
    /// Where compiled code is shared (`sb_plugin_compiled`), once this
    /// process reached the backbone.
    artifacts: std::sync::OnceLock<Arc<SharedArtifacts>>,
    /// The deploys this process's deploy service carries out.
    pub(crate) deploys: DeployJobs,
    /// This process's name, as it answers status requests.
    process: std::sync::OnceLock<String>,
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
    /// Why it cannot run its active or shadow revision, if it cannot (the
    /// hook's failure policy answers there meanwhile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_load_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow_load_error: Option<String>,
    /// The deploys of the hook this process carries out or finished
    /// lately (a worker's deploy service), newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deploys: Vec<DeployProgress>,
}

impl Plugins {
    pub fn new(host: PluginHost) -> Arc<Self> {
        let limits = host.limits();
        let compiler = Compiler::new(limits.compile_concurrency, limits.compile_timeout);
        let host = Arc::new(host);
        Arc::new(Self {
            compiler,
            deploys: DeployJobs::new(host.limits()),
            artifacts: std::sync::OnceLock::new(),
            process: std::sync::OnceLock::new(),
            shadows: ShadowRunner::start(host.clone()),
            host,
            changes: tokio::sync::broadcast::channel(256).0,
            installed: RwLock::new(HashMap::new()),
            replayed: Mutex::new(VecDeque::new()),
        })
    }

    pub fn host(&self) -> &PluginHost {
        &self.host
    }

    /// Where this process's compilations run.
    pub fn compiler(&self) -> &Compiler {
        &self.compiler
    }

    /// Where this process shares compiled code, opened on `js` the first
    /// time it is asked for.
    pub(crate) fn artifacts_on(&self, js: &async_nats::jetstream::Context) -> Arc<SharedArtifacts> {
        self.artifacts
            .get_or_init(|| {
                Arc::new(SharedArtifacts::new(
                    js.clone(),
                    self.host.code_state().precompiler.clone(),
                    self.host.limits().max_precompiled_bytes,
                ))
            })
            .clone()
    }

    /// This process's name, once it answers status requests.
    pub(crate) fn process(&self) -> &str {
        self.process.get().map_or("", String::as_str)
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

    pub(crate) fn installed(
        &self,
        tenant: &TenantId,
        hook: Hook,
        slot: Slot,
    ) -> Option<Arc<Loaded>> {
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
        let (active, shadow) = self.versions(tenant, hook);
        ProcessStatus {
            process: process.to_owned(),
            active_revision: active.as_ref().map(|l| l.revision),
            shadow_revision: shadow.as_ref().map(|l| l.revision),
            active_load_error: active.as_ref().and_then(|l| l.load_error()),
            shadow_load_error: shadow.as_ref().and_then(|l| l.load_error()),
            shadow: shadow.map(|l| l.shadow_stats().report()),
            deploys: self.deploys.of(tenant, hook),
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
            .map_err(|e| RegistryError::Backbone(switchboard_nats::cause(e)))?;
        let plugins = self.clone();
        let _ = self.process.set(process.clone());
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
    pub(crate) fn install(
        &self,
        tenant: &TenantId,
        hook: Hook,
        slot: Slot,
        loaded: Option<Arc<Loaded>>,
    ) {
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
        let result = loaded.call(&self.host, |h, c, cfg| h.moderate(c, cfg, input, limits));
        if let Some(shadow) = shadow {
            match &result {
                Ok(verdict) => {
                    let live = Decision::of_verdict(verdict);
                    let input = shadow::Input::moderation(input, limits);
                    self.shadows.compare(shadow, input, live);
                }
                Err(_) => shadow::count(&shadow, Hook::Moderation, Compared::Skipped),
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

    /// Consults the tenant's active moderation version on a reported
    /// message (v1.2), if it asked to be: its configuration sets
    /// [`REVIEW_REPORTS`] to `true`. `None` when nobody asked. The call is
    /// an ordinary moderation call (the same fuel, deadline, memory,
    /// quarantine and failure policy) and no shadow is compared on it.
    pub fn review_report(
        &self,
        input: &ModerationInput<'_>,
        limits: &ContentLimits,
    ) -> Option<Moderation> {
        let (active, _) = self.versions(input.tenant, Hook::Moderation);
        let loaded = active?;
        if loaded.record.config.get(REVIEW_REPORTS).map(String::as_str) != Some("true") {
            return None;
        }
        let result = loaded.call(&self.host, |h, c, cfg| h.moderate(c, cfg, input, limits));
        Some(match result {
            Ok(None) | Ok(Some(Verdict::Allow)) => Moderation::Allow,
            Ok(Some(Verdict::Reject(reason))) => Moderation::Reject(reason),
            Ok(Some(Verdict::Rewrite(content))) => Moderation::Rewrite(content),
            Err(e) => Moderation::Failed(format!("the moderation plugin failed ({e})")),
        })
    }

    /// Moderates a reaction being added: a 0.2.0 moderator may refuse it
    /// (never rewrite it). Without a plugin, or with a 0.1.0 one, it is
    /// allowed.
    pub fn moderate_reaction(&self, input: &ReactionInput<'_>) -> Moderation {
        let (active, shadow) = self.versions(input.tenant, Hook::Moderation);
        let Some(loaded) = active else {
            if let Some(shadow) = shadow {
                self.shadows
                    .compare(shadow, shadow::Input::reaction(input), Decision::Allow);
            }
            return Moderation::Allow;
        };
        let result = loaded.call(&self.host, |h, c, cfg| h.moderate_reaction(c, cfg, input));
        if let Some(shadow) = shadow {
            match &result {
                Ok(verdict) => {
                    let live = Decision::of_reaction(verdict);
                    self.shadows
                        .compare(shadow, shadow::Input::reaction(input), live);
                }
                Err(_) => shadow::count(&shadow, Hook::Moderation, Compared::Skipped),
            }
        }
        match result {
            Ok(None) | Ok(Some(Ok(()))) => Moderation::Allow,
            Ok(Some(Err(reason))) => Moderation::Reject(reason),
            Err(_) if loaded.record.on_failure == OnFailure::Open => Moderation::Allow,
            Err(e) => Moderation::Failed(format!(
                "the moderation plugin failed ({e}); try again later"
            )),
        }
    }

    /// The card a stored message shows for a link (v1.3): as made, as the
    /// tenant's 0.4.0 moderator rewrote it, or `None` when it dropped it.
    /// Without such a moderator every card shows. A failed call follows
    /// the version's failure policy: open shows the card as made, closed
    /// shows none (a preview is never retried: the message is stored).
    /// No shadow is compared on previews.
    pub fn moderate_preview(&self, input: &PreviewInput<'_>) -> Option<LinkPreview> {
        let (active, _) = self.versions(input.tenant, Hook::Moderation);
        let Some(loaded) = active else {
            return Some(input.card.clone());
        };
        match loaded.call(&self.host, |h, c, cfg| h.moderate_preview(c, cfg, input)) {
            Ok(None) | Ok(Some(PreviewVerdict::Allow)) => Some(input.card.clone()),
            Ok(Some(PreviewVerdict::Drop)) => None,
            Ok(Some(PreviewVerdict::Rewrite(card))) => Some(card),
            Err(e) => {
                tracing::warn!(tenant = %input.tenant, message = %input.message_id, error = %e, "the moderation plugin failed on a link preview");
                (loaded.record.on_failure == OnFailure::Open).then(|| input.card.clone())
            }
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
            loaded
                .call(&self.host, |h, c, cfg| h.edit(c, cfg, request))
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
        if let Some(mode) = loaded.remembered(kind, members) {
            return Some(mode);
        }
        let mode = loaded
            .call(&self.host, |h, c, cfg| {
                h.fan_out(c, cfg, tenant, kind, members)
            })
            .ok()?;
        loaded.remember(kind, members, mode);
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
            let first = shadow.remember(kind, members, mode);
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

    /// The version a replay over history runs, revision `revision` of the
    /// tenant's hook: the one installed here when it is the hook's active
    /// or shadow version, so the replay's failures count toward that
    /// version's quarantine and a quarantined one is not run; else one
    /// kept for replays of that revision, which a replay run again finds
    /// with its failures and quarantine.
    pub fn replayed(
        &self,
        tenant: &TenantId,
        hook: Hook,
        revision: u64,
        record: VersionRecord,
        compiled: Arc<Compiled>,
    ) -> Arc<Loaded> {
        let (active, shadow) = self.versions(tenant, hook);
        if let Some(installed) = [active, shadow]
            .into_iter()
            .flatten()
            .find(|l| l.revision == revision && l.load_error().is_none())
        {
            return installed;
        }
        let mut replayed = self.replayed.lock().unwrap_or_else(|p| p.into_inner());
        let same =
            |l: &Arc<Loaded>| l.revision == revision && l.hook == hook && l.tenant == *tenant;
        if let Some(at) = replayed.iter().position(same)
            && let Some(known) = replayed.remove(at)
        {
            replayed.push_back(known.clone());
            return known;
        }
        let loaded = Arc::new(Loaded::new(
            tenant.clone(),
            revision,
            hook,
            record,
            Role::Replay,
            Ok(compiled),
        ));
        if replayed.len() >= REPLAYED_VERSIONS {
            replayed.pop_front();
        }
        replayed.push_back(loaded.clone());
        loaded
    }

    /// One moderation call of `version` through its guard (a replay's):
    /// `Err(CallError::Quarantined)` once it is quarantined.
    pub fn moderate_with(
        &self,
        version: &Loaded,
        input: &ModerationInput<'_>,
        limits: &ContentLimits,
    ) -> Result<Option<Verdict>, CallError> {
        version.call(&self.host, |h, c, cfg| h.moderate(c, cfg, input, limits))
    }
}
