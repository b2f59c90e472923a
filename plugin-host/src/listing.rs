//! What the admin API reads about a tenant's plugins, beside the changes
//! `deploy.rs` makes: a hook's version listing, its shadow and how it
//! compares on every process, its deploys and how far each has got, and a
//! version compiled for a replay.

use std::sync::Arc;

use crate::objects::ReadError;
use futures::StreamExt;
use switchboard_protocol::TenantId;

use crate::agreement::Agreement;
use crate::compiler::Wait;
use crate::deploy::{DeployError, Deployer, Listing, ShadowListing, VersionEntry, backbone};
use crate::deploy_jobs::{DeployProgress, DeployState, Running};
use crate::hook::Hook;
use crate::host::{CompileError, Compiled};
use crate::record::{STATUS_SUBJECT_PREFIX, kv_key, object_name, shadow_kv_key};
use crate::registry::ProcessStatus;

/// How long the admin API collects processes' answers about a hook.
const STATUS_WAIT: std::time::Duration = std::time::Duration::from_millis(300);

impl Deployer {
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
        // No more than a component may be, whatever its record says.
        let max = self.limits().max_component_bytes;
        let object = self.code.get(&name).await.map_err(backbone)?;
        let bytes = crate::objects::read_bounded(object, record.size, max)
            .await
            .map_err(|e| match e {
                ReadError::TooLarge { claimed, .. } => CompileError::TooLarge {
                    size: usize::try_from(claimed).unwrap_or(usize::MAX),
                    max,
                }
                .into(),
                ReadError::Io(e) => backbone(e),
            })?;
        let artifact = match self.plugins.host().is_compiled(&record.digest, hook) {
            true => None,
            false => self.artifacts.read(tenant, &record.digest).await,
        };
        let plugins = self.plugins.clone();
        let (compiled, _) = self
            .plugins
            .compiler()
            .run(Wait::Bounded, move || {
                plugins
                    .host()
                    .compile_with(hook, &bytes, artifact.as_deref())
            })
            .await??;
        Ok((entry, compiled))
    }

    /// The deploys of the tenant's hook the workers report (under way, or
    /// finished within `deploy_report_ms`), newest first. A stored one is
    /// `active` once every process that answered within a moment runs its
    /// version, and lists each process.
    pub async fn deploys(
        &self,
        tenant: &TenantId,
        hook: Hook,
    ) -> Result<Vec<DeployProgress>, DeployError> {
        let statuses = self.statuses(tenant, hook).await?;
        let mut deploys: Vec<DeployProgress> = Vec::new();
        for d in statuses.iter().flat_map(|s| &s.deploys) {
            if !deploys.iter().any(|known| known.id == d.id) {
                deploys.push(d.clone());
            }
        }
        for d in &mut deploys {
            let Some(revision) = d.version.as_ref().map(|v| v.revision) else {
                continue;
            };
            d.processes = statuses
                .iter()
                .map(|s| {
                    let (runs, error) = match d.shadow {
                        false => (s.active_revision, &s.active_load_error),
                        true => (s.shadow_revision, &s.shadow_load_error),
                    };
                    // Exactly its version and unable to run it, or it or a
                    // later one.
                    let load_error = error.clone().filter(|_| runs == Some(revision));
                    Running {
                        process: s.process.clone(),
                        running: runs.is_some_and(|r| r >= revision) && load_error.is_none(),
                        load_error,
                    }
                })
                .collect();
            if d.state == DeployState::Stored
                && !d.processes.is_empty()
                && d.processes.iter().all(|p| p.running)
            {
                d.state = DeployState::Active;
            }
        }
        deploys.sort_by_key(|d| std::cmp::Reverse(d.started_at));
        Ok(deploys)
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
}
