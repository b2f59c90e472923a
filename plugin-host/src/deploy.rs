//! What the admin API does with plugins (F22): validate an upload, store
//! it by digest in `sb_plugin_code`, activate it in `sb_plugins`, roll
//! back through that key's history, list the versions. Every process
//! follows `sb_plugins` ([`crate::registry`]), so activating here is
//! deploying everywhere.
//!
//! Storage is bounded per tenant (the rules: `retention.rs`). Each hook
//! keeps its newest `max_versions_per_hook` versions of the rollback
//! history and its shadow; a component no kept version uses is deleted
//! after each change once it is older than `prune_grace`, and a prune is
//! scheduled for when the next such one ages past it, so nothing waits for
//! another change to go ([`Deployer::prune`]). A deploy that would leave
//! more than `max_bytes_per_tenant` stored, counting the components
//! awaiting pruning, is refused before anything is stored; one tenant's
//! deploys take turns in this process, so two cannot both fit the last
//! room. The version records stay in the bucket's history (64 per key, a
//! few hundred bytes each) and in the listing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, kv, object_store};
use futures::StreamExt;
use serde::Serialize;
use switchboard_nats::definitions::{PLUGIN_CODE_STORE, PLUGINS_BUCKET};
use switchboard_protocol::{TenantId, Timestamp, UserId};

use crate::agreement::Agreement;
use crate::artifacts::SharedArtifacts;
use crate::compiler::Wait;
pub(crate) use crate::deploy_error::backbone;
pub use crate::deploy_error::{DeployError, Refusal, RefusalKind};
use crate::deploy_jobs::{DeployState, Job};
use crate::hook::Hook;
use crate::host::{self, Compiled, Counts, Origin};
pub use crate::record::VersionEntry;
use crate::record::{
    Activation, OnFailure, Slot, VersionRecord, digest_of_object, kv_key, object_name,
    shadow_kv_key,
};
use crate::registry::{Plugins, ProcessStatus};
use crate::retention::{self, Stored, deploy_stack, kept_versions};

/// A component compiled and tried, how its code was made, and the
/// component and configuration it was tried with.
type Validated = (Arc<Compiled>, Origin, Vec<u8>, BTreeMap<String, String>);

/// A version as an admin uploads it, before it is checked.
pub struct Upload {
    pub component: Vec<u8>,
    /// The values the plugin reads through the `config` import.
    pub config: BTreeMap<String, String>,
    pub on_failure: OnFailure,
}

/// A hook's deployment as the admin API shows it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Listing {
    pub hook: Hook,
    /// The active version, or `null` when the built-in default applies.
    pub active: Option<VersionEntry>,
    /// The revision this process runs, to see every process converge.
    pub running_here: Option<u64>,
    /// Why this process cannot run that revision, if it cannot (its hook's
    /// failure policy answers meanwhile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_error_here: Option<String>,
    /// Calls of the running version on this gateway since it was
    /// installed, and failures (answered by the hook's failure policy).
    pub counts_here: Option<Counts>,
    /// Every version the bucket's history keeps, newest first.
    pub versions: Vec<VersionEntry>,
}

/// A hook's shadow version and how it compares, as the admin API shows it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ShadowListing {
    pub hook: Hook,
    /// The shadow version, or `null` when none is deployed.
    pub shadow: Option<VersionEntry>,
    /// The active version it is compared with (`null`: the built-in
    /// default).
    pub active: Option<VersionEntry>,
    /// Of the comparisons made, the share where the shadow decided as the
    /// live path did; `null` before the first.
    pub agreement: Option<f64>,
    /// Every process's counts for this shadow summed, with the latest
    /// disagreements.
    pub totals: Agreement,
    /// Each gateway and worker that answered within a moment: the
    /// revisions it runs, and its own counts.
    pub processes: Vec<ProcessStatus>,
}

/// Time past a component's grace before its scheduled prune, so the
/// store's clock and ours need not agree to the millisecond.
const PRUNE_MARGIN: Duration = Duration::from_millis(250);

type Turns = Arc<Mutex<HashMap<TenantId, Arc<tokio::sync::Mutex<()>>>>>;

/// A tenant's turn to change what it has stored; it ends when dropped.
struct Turn {
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    turns: Turns,
    tenant: TenantId,
}

impl Drop for Turn {
    /// Forgets the tenant's lock when nobody else holds or awaits it.
    fn drop(&mut self) {
        self.guard.take();
        let mut turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        if turns
            .get(&self.tenant)
            .is_some_and(|lock| Arc::strong_count(lock) == 1)
        {
            turns.remove(&self.tenant);
        }
    }
}

/// Cheap to clone: the clones share their state.
#[derive(Clone)]
pub struct Deployer {
    pub(crate) client: async_nats::Client,
    pub(crate) plugins: Arc<Plugins>,
    bucket: kv::Store,
    pub(crate) code: object_store::ObjectStore,
    /// Where the compiled code of what is deployed is shared.
    pub(crate) artifacts: Arc<SharedArtifacts>,
    /// One per tenant with a change under way: a tenant's deploys and
    /// prunes take turns here.
    turns: Turns,
    /// Tenants with a prune scheduled, and whether a change came since it
    /// last looked (it then looks again before it ends).
    scheduled: Arc<Mutex<HashMap<TenantId, bool>>>,
}

impl Deployer {
    pub async fn open(js: &jetstream::Context, plugins: Arc<Plugins>) -> Result<Self, DeployError> {
        Ok(Self {
            client: js.client(),
            artifacts: plugins.artifacts_on(js),
            plugins,
            bucket: js.get_key_value(PLUGINS_BUCKET).await.map_err(backbone)?,
            code: js
                .get_object_store(PLUGIN_CODE_STORE)
                .await
                .map_err(backbone)?,
            turns: Arc::default(),
            scheduled: Arc::default(),
        })
    }

    /// Validates the component (it compiles, fits the hook's world and
    /// passes a trial call), stores it and makes it the hook's version in
    /// `slot`: the active one, or the shadow that runs beside it on the
    /// same input without effect (replacing the shadow before).
    pub async fn deploy(
        &self,
        tenant: &TenantId,
        hook: Hook,
        slot: Slot,
        upload: Upload,
        by: &UserId,
    ) -> Result<VersionEntry, DeployError> {
        self.deploy_reporting(tenant, hook, slot, upload, by, None, Wait::Bounded)
            .await
    }

    /// [`Self::deploy`], reporting its progress to `job`, and waiting for
    /// a compiler as `wait` says: at most `compile_timeout_ms` when an
    /// admin waits for the answer, as long as it takes in the background
    /// (`deploy_queue` bounds how many wait).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn deploy_reporting(
        &self,
        tenant: &TenantId,
        hook: Hook,
        slot: Slot,
        upload: Upload,
        by: &UserId,
        job: Option<Arc<Job>>,
        wait: Wait,
    ) -> Result<VersionEntry, DeployError> {
        let Upload {
            component,
            config,
            on_failure,
        } = upload;
        let (compiled, origin, component, config) = self
            .validate(tenant, hook, component, config, job, wait)
            .await?;
        let record = VersionRecord {
            digest: compiled.digest.to_string(),
            size: component.len() as u64,
            config,
            on_failure,
            activation: Activation::Deploy,
            activated_at: Timestamp::now(),
            activated_by: by.as_str().to_owned(),
        };
        let turn = self.turn(tenant).await;
        let cap = self.limits().max_bytes_per_tenant;
        let kept = self.kept(tenant, Some((hook, slot, &record))).await?;
        let bytes = self
            .storage(tenant, &kept)
            .await?
            .bytes_with(&record.digest, record.size);
        if bytes > cap {
            return Err(DeployError::OverQuota { bytes, cap });
        }
        let name = object_name(tenant, &record.digest);
        if !self.stored(&name).await {
            let mut reader = component.as_slice();
            self.code
                .put(name.as_str(), &mut reader)
                .await
                .map_err(backbone)?;
        }
        // Before the record: every process that activates the version
        // finds its code compiled.
        if origin != Origin::Precompiled {
            self.artifacts.store(tenant, &compiled).await;
        }
        let key = match slot {
            Slot::Active => kv_key(tenant, hook),
            Slot::Shadow => shadow_kv_key(tenant, hook),
        };
        let revision = self.put(&key, &record).await?;
        tracing::info!(tenant = %tenant, %hook, digest = %record.digest, revision, by = %by, shadow = slot == Slot::Shadow, code = origin.as_str(), "plugin deployed");
        self.prune_in_turn(tenant).await;
        drop(turn);
        Ok(VersionEntry {
            revision,
            record: Some(record),
        })
    }

    /// Compiles the component (or loads its precompiled code) and makes
    /// its trial call, telling `job` when that starts and how the code
    /// was made.
    async fn validate(
        &self,
        tenant: &TenantId,
        hook: Hook,
        component: Vec<u8>,
        config: BTreeMap<String, String>,
        job: Option<Arc<Job>>,
        wait: Wait,
    ) -> Result<Validated, DeployError> {
        let host = self.plugins.host();
        host::preflight(&component, self.max_component_bytes())?;
        let digest = host::digest(&component);
        let artifact = match host.is_compiled(&digest, hook) {
            true => None,
            false => self.artifacts.read(tenant, &digest).await,
        };
        if let Some(job) = &job {
            job.update(|p| {
                p.digest = Some(digest.clone());
                p.size = Some(component.len() as u64);
            });
        }
        let plugins = self.plugins.clone();
        let (component, config, validated) = self
            .plugins
            .compiler()
            .run(wait, move || {
                if let Some(job) = &job {
                    job.update(|p| p.state = DeployState::Compiling);
                }
                let validated =
                    plugins
                        .host()
                        .validate_with(hook, &component, &config, artifact.as_deref());
                if let (Some(job), Ok((_, origin))) = (&job, &validated) {
                    job.update(|p| p.code = Some(origin.as_str().to_owned()));
                }
                (component, config, validated)
            })
            .await?;
        let (compiled, origin) = validated?;
        Ok((compiled, origin, component, config))
    }

    /// Whether the code store holds the object (a deleted one leaves its
    /// description behind, marked deleted).
    pub(crate) async fn stored(&self, name: &str) -> bool {
        self.code.info(name).await.is_ok_and(|info| !info.deleted)
    }

    pub fn max_component_bytes(&self) -> usize {
        self.limits().max_component_bytes
    }

    pub fn compile_timeout(&self) -> std::time::Duration {
        self.limits().compile_timeout
    }

    pub(crate) fn limits(&self) -> &crate::PluginLimits {
        self.plugins.host().limits()
    }

    /// Waits for the tenant's turn to change what it has stored.
    async fn turn(&self, tenant: &TenantId) -> Turn {
        let lock = self
            .turns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(tenant.clone())
            .or_default()
            .clone();
        Turn {
            guard: Some(lock.lock_owned().await),
            turns: self.turns.clone(),
            tenant: tenant.clone(),
        }
    }

    /// The digests the tenant keeps: the kept versions of each hook
    /// ([`kept_versions`]) and its shadow, with `adding` on top of its
    /// hook's versions or as its shadow.
    async fn kept(
        &self,
        tenant: &TenantId,
        adding: Option<(Hook, Slot, &VersionRecord)>,
    ) -> Result<BTreeSet<String>, DeployError> {
        let mut kept = BTreeSet::new();
        for hook in Hook::ALL {
            let history = self.history(tenant, hook).await?;
            let mut stack = deploy_stack(history.iter().map(|e| e.record.as_ref()));
            let mut shadow = self
                .entry_at(&shadow_kv_key(tenant, hook))
                .await?
                .and_then(|e| e.record);
            match adding {
                Some((h, Slot::Active, record)) if h == hook => stack.push(record.clone()),
                Some((h, Slot::Shadow, record)) if h == hook => shadow = Some(record.clone()),
                _ => {}
            }
            let versions = kept_versions(&stack, self.limits().max_versions_per_hook);
            for r in versions.iter().chain(shadow.as_ref()) {
                kept.insert(r.digest.clone());
            }
        }
        Ok(kept)
    }

    /// The tenant's objects in the code store, and what they come to when
    /// `kept` are kept.
    async fn storage(
        &self,
        tenant: &TenantId,
        kept: &BTreeSet<String>,
    ) -> Result<retention::Plan, DeployError> {
        let now = time::OffsetDateTime::now_utc();
        let mut objects = self.code.list().await.map_err(backbone)?;
        let mut stored = Vec::new();
        while let Some(info) = objects.next().await {
            let info = info.map_err(backbone)?;
            let Some(digest) = digest_of_object(tenant, &info.name) else {
                continue;
            };
            if info.deleted {
                continue;
            }
            stored.push(Stored {
                digest: digest.to_owned(),
                size: info.size as u64,
                age: info.modified.map(|at| (now - at).unsigned_abs()),
                name: info.name,
            });
        }
        Ok(retention::plan(&stored, kept, self.limits().prune_grace))
    }

    /// Makes the shadow the active version (a deploy: a rollback returns
    /// to the version before), and the hook has no shadow from then on.
    /// Every process has it compiled already, so the switch is instant.
    pub async fn promote(
        &self,
        tenant: &TenantId,
        hook: Hook,
        by: &UserId,
    ) -> Result<VersionEntry, DeployError> {
        let key = shadow_kv_key(tenant, hook);
        let Some(shadow) = self.entry_at(&key).await?.and_then(|e| e.record) else {
            return Err(DeployError::NoShadow);
        };
        let record = VersionRecord {
            activation: Activation::Deploy,
            activated_at: Timestamp::now(),
            activated_by: by.as_str().to_owned(),
            ..shadow
        };
        let revision = self.put(&kv_key(tenant, hook), &record).await?;
        self.bucket.delete(&key).await.map_err(backbone)?;
        tracing::info!(tenant = %tenant, %hook, digest = %record.digest, revision, by = %by, "shadow plugin promoted");
        self.prune(tenant).await;
        Ok(VersionEntry {
            revision,
            record: Some(record),
        })
    }

    /// Stops the hook's shadow.
    pub async fn remove_shadow(
        &self,
        tenant: &TenantId,
        hook: Hook,
        by: &UserId,
    ) -> Result<(), DeployError> {
        let key = shadow_kv_key(tenant, hook);
        if self.entry_at(&key).await?.and_then(|e| e.record).is_none() {
            return Err(DeployError::NoShadow);
        }
        self.bucket.delete(&key).await.map_err(backbone)?;
        tracing::info!(tenant = %tenant, %hook, by = %by, "shadow plugin removed");
        self.prune(tenant).await;
        Ok(())
    }

    /// Deletes the tenant's components that no kept version uses and that
    /// were stored more than `prune_grace` ago (younger ones may belong to
    /// a deploy whose record is not written yet), and schedules a prune for
    /// when the next of the younger ones can go. Runs after every change;
    /// a failure is logged and tried again later.
    pub async fn prune(&self, tenant: &TenantId) -> usize {
        let _turn = self.turn(tenant).await;
        self.prune_in_turn(tenant).await
    }

    /// [`Deployer::prune`], in the tenant's turn.
    async fn prune_in_turn(&self, tenant: &TenantId) -> usize {
        match self.try_prune(tenant).await {
            Ok((pruned, next)) => {
                if let Some(wait) = next {
                    self.prune_later(tenant, wait);
                }
                pruned
            }
            Err(e) => {
                tracing::warn!(tenant = %tenant, error = %e, "cannot prune the tenant's plugin components; trying again later");
                self.prune_later(tenant, self.limits().prune_grace);
                0
            }
        }
    }

    /// Deletes what goes now; says when the next prune can delete more.
    async fn try_prune(&self, tenant: &TenantId) -> Result<(usize, Option<Duration>), DeployError> {
        let kept = self.kept(tenant, None).await?;
        let plan = self.storage(tenant, &kept).await?;
        for name in &plan.prune {
            self.code.delete(name).await.map_err(backbone)?;
            if let Some(digest) = digest_of_object(tenant, name) {
                self.artifacts.delete(tenant, digest).await;
            }
        }
        if !plan.prune.is_empty() {
            tracing::info!(tenant = %tenant, components = plan.prune.len(), "pruned plugin components no kept version uses");
            crate::metrics::pruned(plan.prune.len());
        }
        Ok((plan.prune.len(), plan.next_prune_in))
    }

    /// Prunes the tenant's components again in `wait`, and as long as more
    /// wait for their grace; one such task per tenant.
    fn prune_later(&self, tenant: &TenantId, wait: Duration) {
        {
            let mut scheduled = self.scheduled.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(changed) = scheduled.get_mut(tenant) {
                *changed = true;
                return;
            }
            scheduled.insert(tenant.clone(), false);
        }
        let (me, tenant) = (self.clone(), tenant.clone());
        // A failed prune is tried again after the grace, at least a second.
        let retry = self.limits().prune_grace.max(Duration::from_secs(1));
        tokio::spawn(async move {
            let mut wait = Some(wait);
            loop {
                if let Some(wait) = wait {
                    tokio::time::sleep(wait + PRUNE_MARGIN).await;
                }
                let turn = me.turn(&tenant).await;
                let outcome = me.try_prune(&tenant).await;
                drop(turn);
                wait = match outcome {
                    Ok((_, next)) => next,
                    Err(e) => {
                        tracing::warn!(tenant = %tenant, error = %e, "cannot prune the tenant's plugin components; trying again later");
                        Some(retry)
                    }
                };
                if wait.is_some() {
                    continue;
                }
                // Nothing waits: done, unless a change came meanwhile.
                let mut scheduled = me.scheduled.lock().unwrap_or_else(|p| p.into_inner());
                match scheduled.get_mut(&tenant) {
                    Some(changed) if *changed => *changed = false,
                    _ => {
                        scheduled.remove(&tenant);
                        return;
                    }
                }
            }
        });
    }

    /// Makes the version before the active one active again. Rollbacks
    /// undo deploys one by one, as far back as the history reaches.
    pub async fn rollback(
        &self,
        tenant: &TenantId,
        hook: Hook,
        by: &UserId,
    ) -> Result<VersionEntry, DeployError> {
        let history = self.history(tenant, hook).await?;
        let latest = history.last().map(|e| e.revision);
        // Only as far back as versions are kept.
        let stack = deploy_stack(history.iter().map(|e| e.record.as_ref()));
        let mut stack = kept_versions(&stack, self.limits().max_versions_per_hook).to_vec();
        if stack.pop().is_none() {
            return Err(DeployError::NotDeployed);
        }
        let Some(previous) = stack.pop() else {
            return Err(DeployError::NothingToRollBack);
        };
        // Older versions' components are pruned as rollbacks reach back.
        if !self.stored(&object_name(tenant, &previous.digest)).await {
            return Err(DeployError::Pruned {
                digest: previous.digest,
            });
        }
        let record = VersionRecord {
            activation: Activation::Rollback,
            activated_at: Timestamp::now(),
            activated_by: by.as_str().to_owned(),
            ..previous
        };
        let value = serde_json::to_vec(&record).map_err(backbone)?;
        // Only over the version we looked at: two rollbacks at once must
        // not both go back one step from the same place.
        let revision = self
            .bucket
            .update(kv_key(tenant, hook), value.into(), latest.unwrap_or(0))
            .await
            .map_err(|e| match e.kind() {
                kv::UpdateErrorKind::WrongLastRevision => DeployError::Conflict,
                _ => backbone(e),
            })?;
        tracing::info!(tenant = %tenant, %hook, digest = %record.digest, revision, by = %by, "plugin rolled back");
        self.prune(tenant).await;
        Ok(VersionEntry {
            revision,
            record: Some(record),
        })
    }

    /// Removes the tenant's plugin for the hook: the built-in default
    /// applies from now on. The versions stay listed.
    pub async fn remove(
        &self,
        tenant: &TenantId,
        hook: Hook,
        by: &UserId,
    ) -> Result<(), DeployError> {
        if self.current(tenant, hook).await?.is_none() {
            return Err(DeployError::NotDeployed);
        }
        self.bucket
            .delete(kv_key(tenant, hook))
            .await
            .map_err(backbone)?;
        tracing::info!(tenant = %tenant, %hook, by = %by, "plugin removed");
        self.prune(tenant).await;
        Ok(())
    }

    async fn current(
        &self,
        tenant: &TenantId,
        hook: Hook,
    ) -> Result<Option<VersionRecord>, DeployError> {
        Ok(self
            .entry_at(&kv_key(tenant, hook))
            .await?
            .and_then(|e| e.record))
    }

    /// The latest entry of `key`: its record is `None` when it was
    /// deleted (or does not hold a version).
    pub(crate) async fn entry_at(&self, key: &str) -> Result<Option<VersionEntry>, DeployError> {
        let entry = self.bucket.entry(key).await.map_err(backbone)?;
        Ok(entry.map(|e| VersionEntry {
            revision: e.revision,
            record: (e.operation == kv::Operation::Put)
                .then(|| serde_json::from_slice(&e.value).ok())
                .flatten(),
        }))
    }

    async fn put(&self, key: &str, record: &VersionRecord) -> Result<u64, DeployError> {
        let value = serde_json::to_vec(record).map_err(backbone)?;
        self.bucket.put(key, value.into()).await.map_err(backbone)
    }

    /// The key's history, oldest first.
    pub(crate) async fn history(
        &self,
        tenant: &TenantId,
        hook: Hook,
    ) -> Result<Vec<VersionEntry>, DeployError> {
        let mut history = self
            .bucket
            .history(kv_key(tenant, hook))
            .await
            .map_err(backbone)?;
        let mut entries = Vec::new();
        while let Some(entry) = history.next().await {
            let entry = entry.map_err(backbone)?;
            let record = match entry.operation {
                kv::Operation::Put => serde_json::from_slice(&entry.value).ok(),
                kv::Operation::Delete | kv::Operation::Purge => None,
            };
            entries.push(VersionEntry {
                revision: entry.revision,
                record,
            });
        }
        Ok(entries)
    }
}

/// The digest of a component, as the API and the bucket name it.
pub fn digest(component: &[u8]) -> String {
    host::digest(component)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_objects_are_told_from_a_dotted_tenants() {
        let acme = TenantId::new("acme").unwrap();
        let d = "sha256:0123abcd";
        assert_eq!(digest_of_object(&acme, &object_name(&acme, d)), Some(d));
        let dotted = TenantId::new("acme.x").unwrap();
        assert_eq!(digest_of_object(&acme, &object_name(&dotted, d)), None);
        assert_eq!(digest_of_object(&acme, "acmex.sha256:00"), None);
        assert_eq!(digest_of_object(&acme, "acme.notes"), None);
    }
}
