//! What the admin API does with plugins (F22): validate an upload, store
//! it by digest in `sb_plugin_code`, activate it in `sb_plugins`, roll
//! back through that key's history, list the versions. Every process
//! follows `sb_plugins` ([`crate::registry`]), so activating here is
//! deploying everywhere.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_nats::jetstream::{self, kv, object_store};
use futures::StreamExt;
use serde::Serialize;
use switchboard_backbone::definitions::{PLUGIN_CODE_STORE, PLUGINS_BUCKET};
use switchboard_protocol::{TenantId, Timestamp, UserId};

use crate::hook::Hook;
use crate::host::{self, CompileError, Counts};
use crate::registry::{Activation, OnFailure, Plugins, VersionRecord, kv_key, object_name};

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error(transparent)]
    Invalid(#[from] CompileError),
    #[error("no earlier version to roll back to")]
    NothingToRollBack,
    #[error("the version list changed meanwhile; try again")]
    Conflict,
    #[error("no plugin is deployed for this hook")]
    NotDeployed,
    /// The plugins bucket or the code store failed, or a record did not
    /// encode: the client's or serde's error, kept whole.
    #[error("the backbone: {0}")]
    Backbone(#[source] switchboard_backbone::Cause),
}

fn backbone(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> DeployError {
    DeployError::Backbone(switchboard_backbone::cause(e))
}

/// One entry of a hook's version list, newest first.
#[derive(Debug, Clone, Serialize)]
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

pub struct Deployer {
    plugins: Arc<Plugins>,
    bucket: kv::Store,
    code: object_store::ObjectStore,
}

impl Deployer {
    pub async fn open(js: &jetstream::Context, plugins: Arc<Plugins>) -> Result<Self, DeployError> {
        Ok(Self {
            plugins,
            bucket: js.get_key_value(PLUGINS_BUCKET).await.map_err(backbone)?,
            code: js
                .get_object_store(PLUGIN_CODE_STORE)
                .await
                .map_err(backbone)?,
        })
    }

    /// Validates the component (it compiles, fits the hook's world and
    /// passes a trial call), stores it and makes it the active version.
    pub async fn deploy(
        &self,
        tenant: &TenantId,
        hook: Hook,
        component: Vec<u8>,
        config: BTreeMap<String, String>,
        on_failure: OnFailure,
        by: &UserId,
    ) -> Result<VersionEntry, DeployError> {
        let plugins = self.plugins.clone();
        let (component, config, compiled) = tokio::task::spawn_blocking(move || {
            let compiled = plugins.host().validate(hook, &component, &config);
            (component, config, compiled)
        })
        .await
        .map_err(backbone)?;
        let digest = compiled?.digest.to_string();
        let name = object_name(tenant, &digest);
        if self.code.info(&name).await.is_err() {
            let mut reader = component.as_slice();
            self.code
                .put(name.as_str(), &mut reader)
                .await
                .map_err(backbone)?;
        }
        let record = VersionRecord {
            digest,
            size: component.len() as u64,
            config,
            on_failure,
            activation: Activation::Deploy,
            activated_at: Timestamp::now(),
            activated_by: by.as_str().to_owned(),
        };
        let revision = self.put(tenant, hook, &record).await?;
        tracing::info!(tenant = %tenant, %hook, digest = %record.digest, revision, by = %by, "plugin deployed");
        Ok(VersionEntry {
            revision,
            record: Some(record),
        })
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
        let mut stack = deploy_stack(&history);
        if stack.pop().is_none() {
            return Err(DeployError::NotDeployed);
        }
        let Some(previous) = stack.pop() else {
            return Err(DeployError::NothingToRollBack);
        };
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
        let entry = self
            .bucket
            .entry(kv_key(tenant, hook))
            .await
            .map_err(backbone)?;
        Ok(entry
            .filter(|e| e.operation == kv::Operation::Put)
            .and_then(|e| serde_json::from_slice(&e.value).ok()))
    }

    async fn put(
        &self,
        tenant: &TenantId,
        hook: Hook,
        record: &VersionRecord,
    ) -> Result<u64, DeployError> {
        let value = serde_json::to_vec(record).map_err(backbone)?;
        self.bucket
            .put(kv_key(tenant, hook), value.into())
            .await
            .map_err(backbone)
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
}
