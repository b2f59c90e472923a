//! What the admin API does with plugins (F22): validate an upload, store
//! it by digest in `sb_plugin_code`, activate it in `sb_plugins`, roll
//! back through that key's history, list the versions. Every process
//! follows `sb_plugins` ([`crate::registry`]), so activating here is
//! deploying everywhere.
//!
//! Storage is bounded per tenant. Each hook keeps its newest
//! `max_versions_per_hook` versions of the rollback history ([`kept`]);
//! a component no kept version of any of the tenant's hooks uses is
//! deleted after each change ([`Deployer::prune`]), and a deploy that
//! would keep more than `max_bytes_per_tenant` is refused before anything
//! is stored. The version records stay in the bucket's history (64 per
//! key, a few hundred bytes each) and in the listing.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_nats::jetstream::{self, kv, object_store};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use switchboard_backbone::definitions::{PLUGIN_CODE_STORE, PLUGINS_BUCKET};
use switchboard_protocol::{TenantId, Timestamp, UserId};

use crate::compiler::{CompilerError, Wait};
use crate::hook::Hook;
use crate::host::{self, CompileError, Compiled, Counts};
use crate::registry::{
    Activation, OnFailure, Plugins, ProcessStatus, STATUS_SUBJECT_PREFIX, Slot, VersionRecord,
    digest_of_object, kv_key, object_name, shadow_kv_key,
};
use crate::shadow::Agreement;

/// A version as an admin uploads it, before it is checked.
pub struct Upload {
    pub component: Vec<u8>,
    /// The values the plugin reads through the `config` import.
    pub config: BTreeMap<String, String>,
    pub on_failure: OnFailure,
}

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error(transparent)]
    Invalid(#[from] CompileError),
    /// No compiler was free in time, or compiling took too long.
    #[error(transparent)]
    Compiler(#[from] CompilerError),
    #[error(
        "the tenant's kept plugin versions would take {bytes} bytes, over its {cap} (max_bytes_per_tenant); remove a hook's plugin or deploy a smaller component"
    )]
    OverQuota { bytes: u64, cap: u64 },
    #[error("no earlier version to roll back to")]
    NothingToRollBack,
    #[error(
        "the version before ({digest}) is no longer stored (max_versions_per_hook); deploy it again instead"
    )]
    Pruned { digest: String },
    #[error("the version list changed meanwhile; try again")]
    Conflict,
    #[error("no plugin is deployed for this hook")]
    NotDeployed,
    #[error("no shadow version is deployed for this hook")]
    NoShadow,
    #[error("no version {0} of this hook; the listing names the revisions")]
    NoSuchVersion(u64),
    /// The plugins bucket or the code store failed, or a record did not
    /// encode: the client's or serde's error, kept whole.
    #[error("the backbone: {0}")]
    Backbone(#[source] switchboard_backbone::Cause),
    /// The upload a deploy names is not in `sb_plugin_uploads` (expired,
    /// taken already, or another tenant's).
    #[error("the uploaded component is gone; upload it again")]
    NoSuchUpload,
    /// The uploaded component could not be read within its bound.
    #[error("the uploaded component: {0}")]
    Upload(#[source] crate::objects::ReadError),
    /// The deploy service refused the change (its answer, as it gave it).
    #[error("{}", .0.message)]
    Refused(Refusal),
}

/// A refusal as it crosses the backbone from the deploy service: its
/// kind, which says how the admin API answers, and its message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
}

impl Refusal {
    pub fn new(kind: RefusalKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// What kind of refusal a [`DeployError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// The component is larger than allowed.
    TooLarge,
    /// The component or the request is not acceptable as it is.
    Invalid,
    /// Over the tenant's plugin storage.
    OverQuota,
    /// The version list is not where the change needs it.
    Conflict,
    /// No such version, shadow or deployment.
    NotFound,
    /// Try again later: no compiler free, the backbone unwell.
    Unavailable,
    /// A bug.
    Internal,
}

impl DeployError {
    pub fn kind(&self) -> RefusalKind {
        match self {
            DeployError::Invalid(CompileError::TooLarge { .. })
            | DeployError::Upload(crate::objects::ReadError::TooLarge { .. }) => {
                RefusalKind::TooLarge
            }
            DeployError::Invalid(_) | DeployError::Compiler(CompilerError::TimedOut(_)) => {
                RefusalKind::Invalid
            }
            DeployError::Compiler(CompilerError::Busy(_))
            | DeployError::Backbone(_)
            | DeployError::Upload(_) => RefusalKind::Unavailable,
            DeployError::Compiler(CompilerError::Join(_)) => RefusalKind::Internal,
            DeployError::OverQuota { .. } => RefusalKind::OverQuota,
            DeployError::NothingToRollBack | DeployError::Pruned { .. } | DeployError::Conflict => {
                RefusalKind::Conflict
            }
            DeployError::NotDeployed
            | DeployError::NoShadow
            | DeployError::NoSuchVersion(_)
            | DeployError::NoSuchUpload => RefusalKind::NotFound,
            DeployError::Refused(r) => r.kind,
        }
    }

    /// The refusal as the deploy service answers it.
    pub fn refusal(&self) -> Refusal {
        Refusal::new(self.kind(), self.to_string())
    }
}

pub(crate) fn backbone(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> DeployError {
    DeployError::Backbone(switchboard_backbone::cause(e))
}

/// One entry of a hook's version list, newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VersionEntry {
    pub revision: u64,
    /// `null` for a removal (the built-in default from then on).
    #[serde(flatten)]
    pub record: Option<VersionRecord>,
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

/// How long the admin API collects processes' answers about a hook.
const STATUS_WAIT: std::time::Duration = std::time::Duration::from_millis(300);

pub struct Deployer {
    client: async_nats::Client,
    plugins: Arc<Plugins>,
    bucket: kv::Store,
    code: object_store::ObjectStore,
}

impl Deployer {
    pub async fn open(js: &jetstream::Context, plugins: Arc<Plugins>) -> Result<Self, DeployError> {
        Ok(Self {
            client: js.client(),
            plugins,
            bucket: js.get_key_value(PLUGINS_BUCKET).await.map_err(backbone)?,
            code: js
                .get_object_store(PLUGIN_CODE_STORE)
                .await
                .map_err(backbone)?,
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
        let Upload {
            component,
            config,
            on_failure,
        } = upload;
        let plugins = self.plugins.clone();
        let (component, config, compiled) = self
            .plugins
            .compiler()
            .run(Wait::Bounded, move || {
                let compiled = plugins.host().validate(hook, &component, &config);
                (component, config, compiled)
            })
            .await?;
        let digest = compiled?.digest.to_string();
        let record = VersionRecord {
            digest,
            size: component.len() as u64,
            config,
            on_failure,
            activation: Activation::Deploy,
            activated_at: Timestamp::now(),
            activated_by: by.as_str().to_owned(),
        };
        let cap = self.limits().max_bytes_per_tenant;
        let bytes: u64 = self
            .kept(tenant, Some((hook, slot, &record)))
            .await?
            .values()
            .sum();
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
        let key = match slot {
            Slot::Active => kv_key(tenant, hook),
            Slot::Shadow => shadow_kv_key(tenant, hook),
        };
        let revision = self.put(&key, &record).await?;
        tracing::info!(tenant = %tenant, %hook, digest = %record.digest, revision, by = %by, shadow = slot == Slot::Shadow, "plugin deployed");
        self.prune(tenant).await;
        Ok(VersionEntry {
            revision,
            record: Some(record),
        })
    }

    /// Whether the code store holds the object (a deleted one leaves its
    /// description behind, marked deleted).
    async fn stored(&self, name: &str) -> bool {
        self.code.info(name).await.is_ok_and(|info| !info.deleted)
    }

    fn limits(&self) -> &crate::PluginLimits {
        self.plugins.host().limits()
    }

    pub fn max_component_bytes(&self) -> usize {
        self.limits().max_component_bytes
    }

    pub fn compile_timeout(&self) -> std::time::Duration {
        self.limits().compile_timeout
    }

    /// The components the tenant keeps, by digest with their sizes: the
    /// kept versions of each hook ([`kept_versions`]) and its shadow, with
    /// `adding` on top of its hook's versions or as its shadow.
    async fn kept(
        &self,
        tenant: &TenantId,
        adding: Option<(Hook, Slot, &VersionRecord)>,
    ) -> Result<BTreeMap<String, u64>, DeployError> {
        let mut kept = BTreeMap::new();
        for hook in Hook::ALL {
            let mut stack = deploy_stack(&self.history(tenant, hook).await?);
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
                kept.insert(r.digest.clone(), r.size);
            }
        }
        Ok(kept)
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

    /// The hook's shadow, and how it compares on every process that
    /// answers within [`STATUS_WAIT`].
    pub async fn shadow_listing(
        &self,
        tenant: &TenantId,
        hook: Hook,
    ) -> Result<ShadowListing, DeployError> {
        let shadow = self
            .entry_at(&shadow_kv_key(tenant, hook))
            .await?
            .filter(|e| e.record.is_some());
        let active = self
            .entry_at(&kv_key(tenant, hook))
            .await?
            .filter(|e| e.record.is_some());
        let processes = self.statuses(tenant, hook).await?;
        let mut totals = Agreement::default();
        for p in &processes {
            // Counts of the shadow now deployed only.
            if let (Some(counts), Some(s)) = (&p.shadow, &shadow)
                && p.shadow_revision == Some(s.revision)
            {
                totals.add(counts);
            }
        }
        let compared = totals.agree + totals.disagree;
        Ok(ShadowListing {
            hook,
            shadow,
            active,
            agreement: (compared > 0).then(|| totals.agree as f64 / compared as f64),
            totals,
            processes,
        })
    }

    /// A version of the hook, compiled here to be run on other input than
    /// live traffic (a replay over history): revision `revision` of the
    /// hook's key or its shadow's, or without one the shadow if there is
    /// one, else the active version. Only stored versions can be run.
    pub async fn compiled_version(
        &self,
        tenant: &TenantId,
        hook: Hook,
        revision: Option<u64>,
    ) -> Result<(VersionEntry, Arc<Compiled>), DeployError> {
        let shadow = self
            .entry_at(&shadow_kv_key(tenant, hook))
            .await?
            .filter(|e| e.record.is_some());
        let entry = match revision {
            Some(r) => match shadow.filter(|s| s.revision == r) {
                Some(s) => s,
                None => self
                    .history(tenant, hook)
                    .await?
                    .into_iter()
                    .find(|e| e.revision == r && e.record.is_some())
                    .ok_or(DeployError::NoSuchVersion(r))?,
            },
            None => match shadow {
                Some(s) => s,
                None => self
                    .entry_at(&kv_key(tenant, hook))
                    .await?
                    .filter(|e| e.record.is_some())
                    .ok_or(DeployError::NotDeployed)?,
            },
        };
        let Some(record) = &entry.record else {
            return Err(DeployError::NotDeployed);
        };
        let name = object_name(tenant, &record.digest);
        if !self.stored(&name).await {
            return Err(DeployError::Pruned {
                digest: record.digest.clone(),
            });
        }
        let object = self.code.get(&name).await.map_err(backbone)?;
        let max = self.limits().max_component_bytes;
        let bytes = crate::objects::read_bounded(object, record.size, max)
            .await
            .map_err(backbone)?;
        let plugins = self.plugins.clone();
        let compiled = self
            .plugins
            .compiler()
            .run(Wait::Bounded, move || plugins.host().compile(hook, &bytes))
            .await??;
        Ok((entry, compiled))
    }

    /// Asks every gateway and worker how it runs the tenant's hook.
    pub async fn statuses(
        &self,
        tenant: &TenantId,
        hook: Hook,
    ) -> Result<Vec<ProcessStatus>, DeployError> {
        let inbox = self.client.new_inbox();
        let mut replies = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(backbone)?;
        let subject = format!("{STATUS_SUBJECT_PREFIX}.{}", kv_key(tenant, hook));
        self.client
            .publish_with_reply(subject, inbox, bytes::Bytes::new())
            .await
            .map_err(backbone)?;
        let until = tokio::time::Instant::now() + STATUS_WAIT;
        let mut statuses = Vec::new();
        while let Ok(Some(reply)) = tokio::time::timeout_at(until, replies.next()).await {
            match serde_json::from_slice::<ProcessStatus>(&reply.payload) {
                Ok(status) => statuses.push(status),
                Err(e) => tracing::debug!(error = %e, "ignoring a plugin status reply"),
            }
        }
        statuses.sort_by(|a, b| a.process.cmp(&b.process));
        Ok(statuses)
    }

    /// Deletes the tenant's components that no kept version uses and that
    /// were stored more than `prune_grace` ago (younger ones may belong to
    /// a deploy whose record is not written yet). Runs after every change;
    /// a failure is logged and left for the next one.
    pub async fn prune(&self, tenant: &TenantId) -> usize {
        match self.try_prune(tenant).await {
            Ok(pruned) => pruned,
            Err(e) => {
                tracing::warn!(tenant = %tenant, error = %e, "cannot prune the tenant's plugin components; the next change tries again");
                0
            }
        }
    }

    async fn try_prune(&self, tenant: &TenantId) -> Result<usize, DeployError> {
        let kept = self.kept(tenant, None).await?;
        let grace = self.limits().prune_grace;
        let now = time::OffsetDateTime::now_utc();
        let mut unkept = Vec::new();
        let mut objects = self.code.list().await.map_err(backbone)?;
        while let Some(info) = objects.next().await {
            let info = info.map_err(backbone)?;
            let Some(digest) = digest_of_object(tenant, &info.name) else {
                continue;
            };
            let old_enough = info
                .modified
                .is_none_or(|at| (now - at).unsigned_abs() >= grace);
            if !info.deleted && old_enough && !kept.contains_key(digest) {
                unkept.push(info.name);
            }
        }
        for name in &unkept {
            self.code.delete(name).await.map_err(backbone)?;
        }
        if !unkept.is_empty() {
            tracing::info!(tenant = %tenant, components = unkept.len(), "pruned plugin components no kept version uses");
            crate::metrics::pruned(unkept.len());
        }
        Ok(unkept.len())
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
        let mut stack =
            kept_versions(&deploy_stack(&history), self.limits().max_versions_per_hook).to_vec();
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

    pub async fn list(&self, tenant: &TenantId, hook: Hook) -> Result<Listing, DeployError> {
        let mut versions = self.history(tenant, hook).await?;
        versions.reverse();
        let active = versions.first().filter(|v| v.record.is_some()).cloned();
        let running = self.plugins.active(tenant, hook);
        Ok(Listing {
            hook,
            active,
            running_here: running.as_ref().map(|l| l.revision),
            load_error_here: running.as_deref().and_then(|l| l.load_error()),
            counts_here: running.as_deref().map(|l| l.counts()),
            versions,
        })
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
    async fn entry_at(&self, key: &str) -> Result<Option<VersionEntry>, DeployError> {
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
    async fn history(
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

/// The versions a rollback can return to, oldest first: each deploy
/// pushes, each rollback pops, a removal starts over.
fn deploy_stack(history: &[VersionEntry]) -> Vec<VersionRecord> {
    let mut stack = Vec::new();
    for entry in history {
        match &entry.record {
            Some(r) if r.activation == Activation::Deploy => stack.push(r.clone()),
            Some(_) => {
                stack.pop();
            }
            None => stack.clear(),
        }
    }
    stack
}

/// The versions of a rollback stack that are kept: the newest `max` (at
/// least the active one).
fn kept_versions(stack: &[VersionRecord], max: usize) -> &[VersionRecord] {
    &stack[stack.len().saturating_sub(max.max(1))..]
}

/// The digest of a component, as the API and the bucket name it.
pub fn digest(component: &[u8]) -> String {
    host::digest(component)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(revision: u64, digest: &str, activation: Activation) -> VersionEntry {
        VersionEntry {
            revision,
            record: Some(VersionRecord {
                digest: digest.into(),
                size: 1,
                config: BTreeMap::new(),
                on_failure: OnFailure::Closed,
                activation,
                activated_at: Timestamp::from_unix_ms(0),
                activated_by: "admin".into(),
            }),
        }
    }

    fn digests(stack: &[VersionRecord]) -> Vec<&str> {
        stack.iter().map(|r| r.digest.as_str()).collect()
    }

    #[test]
    fn rollbacks_undo_deploys_one_by_one() {
        use Activation::*;
        let mut h = vec![
            entry(1, "a", Deploy),
            entry(2, "b", Deploy),
            entry(3, "c", Deploy),
        ];
        assert_eq!(digests(&deploy_stack(&h)), ["a", "b", "c"]);
        h.push(entry(4, "b", Rollback));
        assert_eq!(digests(&deploy_stack(&h)), ["a", "b"]);
        h.push(entry(5, "a", Rollback));
        assert_eq!(digests(&deploy_stack(&h)), ["a"]);
        h.push(entry(6, "d", Deploy));
        assert_eq!(digests(&deploy_stack(&h)), ["a", "d"]);
        h.push(VersionEntry {
            revision: 7,
            record: None,
        });
        assert!(deploy_stack(&h).is_empty(), "a removal starts over");
    }

    #[test]
    fn only_the_newest_versions_are_kept() {
        use Activation::*;
        let h: Vec<VersionEntry> = ["a", "b", "c", "d"]
            .iter()
            .zip(1..)
            .map(|(d, r)| entry(r, d, Deploy))
            .collect();
        let stack = deploy_stack(&h);
        assert_eq!(digests(kept_versions(&stack, 2)), ["c", "d"]);
        assert_eq!(digests(kept_versions(&stack, 4)), ["a", "b", "c", "d"]);
        assert_eq!(digests(kept_versions(&stack, 9)), ["a", "b", "c", "d"]);
        assert_eq!(
            digests(kept_versions(&stack, 0)),
            ["d"],
            "the active one always"
        );
        assert!(kept_versions(&[], 3).is_empty());
    }

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
