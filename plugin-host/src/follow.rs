//! How a process keeps its plugin versions current: it watches the
//! `sb_plugins` bucket and activates each entry (fetch the component,
//! check its digest, load its precompiled code from `sb_plugin_compiled`
//! or else compile it, install it in the registry).
//!
//! Activations of different tenants' hooks run at once, so one tenant's
//! slow compilation never holds up another tenant's activation; at most
//! `compile_concurrency` fetch and compile at a time. The entries of one
//! tenant's hook (its active and shadow keys) are applied one at a time in
//! the order they came, and while one is applied only the latest entry of
//! each key waits behind it: a newer version makes an older one moot.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_nats::jetstream::{self, kv, object_store::ObjectStore};
use futures::StreamExt;
use switchboard_nats::definitions::{PLUGIN_CODE_STORE, PLUGINS_BUCKET};
use switchboard_protocol::TenantId;
use tokio::sync::Semaphore;

use crate::artifacts::SharedArtifacts;
use crate::compiler::Wait;
use crate::hook::Hook;
use crate::host::{Compiled, Origin};
use crate::record::{Slot, VersionRecord, object_name, parse_key};
use crate::registry::{Plugins, RegistryError};
use crate::version::{LoadError, Loaded, Role};

/// Entries waiting per group (a tenant's hook), applied one at a time in
/// order; a group with an entry being applied is present, with what
/// waits behind it.
#[derive(Debug)]
struct Lanes<E> {
    waiting: HashMap<String, VecDeque<(String, E)>>,
}

impl<E> Default for Lanes<E> {
    fn default() -> Self {
        Self {
            waiting: HashMap::new(),
        }
    }
}

impl<E> Lanes<E> {
    /// An entry of `key` in `group` came: `Some` to apply it now (the
    /// group was idle), else it waits, replacing a waiting entry of the
    /// same key in its place.
    fn arrive(&mut self, group: &str, key: &str, entry: E) -> Option<E> {
        let Some(waiting) = self.waiting.get_mut(group) else {
            self.waiting.insert(group.to_owned(), VecDeque::new());
            return Some(entry);
        };
        match waiting.iter_mut().find(|(k, _)| k == key) {
            Some(older) => older.1 = entry,
            None => waiting.push_back((key.to_owned(), entry)),
        }
        None
    }

    /// The group's entry was applied: its next one, or `None` (the group
    /// is idle again).
    fn applied(&mut self, group: &str) -> Option<E> {
        let waiting = self.waiting.get_mut(group)?;
        match waiting.pop_front() {
            Some((_, next)) => Some(next),
            None => {
                self.waiting.remove(group);
                None
            }
        }
    }
}

/// Applies the bucket's entries to the registry.
struct Activations {
    plugins: Arc<Plugins>,
    code: ObjectStore,
    artifacts: Arc<SharedArtifacts>,
    lanes: Mutex<Lanes<kv::Entry>>,
    /// Fetches and compilations at once: `compile_concurrency`.
    loading: Semaphore,
}

impl Activations {
    /// Applies `entry` now, on a task of its own, unless its group is busy
    /// (then it waits its turn). Returns the task when one was started.
    fn arrive(self: &Arc<Self>, entry: kv::Entry) -> Option<tokio::task::JoinHandle<()>> {
        let (group, key) = (group_of(&entry.key), entry.key.clone());
        let entry = self
            .lanes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .arrive(&group, &key, entry)?;
        let me = self.clone();
        Some(tokio::spawn(async move {
            let mut next = Some(entry);
            while let Some(entry) = next {
                me.apply(entry).await;
                next = me
                    .lanes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .applied(&group);
            }
        }))
    }

    /// Installs (or removes) the version an entry names.
    async fn apply(&self, entry: kv::Entry) {
        let plugins = &self.plugins;
        let Some((tenant, hook, slot)) = parse_key(&entry.key) else {
            tracing::warn!(key = %entry.key, "ignoring an sb_plugins key that names no tenant and hook");
            return;
        };
        if entry.operation != kv::Operation::Put {
            plugins.install(&tenant, hook, slot, None);
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
        if plugins
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
        let shadow_compiled = plugins
            .shadow(&tenant, hook)
            .filter(|s| slot == Slot::Active && s.record.digest == record.digest)
            .and_then(|s| s.compiled().ok().cloned());
        let compiled = match shadow_compiled {
            Some(compiled) => Ok(compiled),
            None => self.load(&tenant, hook, &record).await,
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
        let role = match slot {
            Slot::Active => Role::Active,
            Slot::Shadow => Role::Shadow,
        };
        let loaded = Loaded::new(tenant.clone(), entry.revision, hook, record, role, compiled);
        plugins.install(&tenant, hook, slot, Some(Arc::new(loaded)));
    }

    /// Fetches and checks the version's component, reading no more of it
    /// than a component may be, and loads its precompiled code, or
    /// compiles it (and shares what it compiled, on a worker).
    async fn load(
        &self,
        tenant: &TenantId,
        hook: Hook,
        record: &VersionRecord,
    ) -> Result<Arc<Compiled>, LoadError> {
        // The semaphore is never closed.
        let _loading = self.loading.acquire().await;
        let max = self.plugins.host().limits().max_component_bytes;
        let object = self
            .code
            .get(object_name(tenant, &record.digest))
            .await
            .map_err(LoadError::Fetch)?;
        let bytes = crate::objects::read_component(object, record, max).await?;
        let artifact = match self.plugins.host().is_compiled(&record.digest, hook) {
            true => None,
            false => self.artifacts.read(tenant, &record.digest).await,
        };
        let plugins = self.plugins.clone();
        // However many are queued, the version must load.
        let (compiled, origin) = self
            .plugins
            .compiler()
            .run(Wait::Patient, move || {
                plugins
                    .host()
                    .compile_with(hook, &bytes, artifact.as_deref())
            })
            .await??;
        if origin == Origin::Compiled {
            self.artifacts.share(tenant, &compiled);
        }
        tracing::debug!(tenant = %tenant, hook = %hook, digest = %record.digest, code = origin.as_str(), "plugin version loaded");
        Ok(compiled)
    }
}

/// The group an entry is applied in: its tenant's hook, both slots.
fn group_of(key: &str) -> String {
    key.strip_suffix(".shadow").unwrap_or(key).to_owned()
}

impl Plugins {
    /// Loads every active version, then keeps following `sb_plugins` in
    /// the background. Returns once the versions active at the call are
    /// installed, so a process never serves a tenant without its plugins.
    pub async fn follow(
        self: &Arc<Self>,
        js: &jetstream::Context,
    ) -> Result<tokio::task::JoinHandle<()>, RegistryError> {
        let err = |e: Box<dyn std::error::Error + Send + Sync>| {
            RegistryError::Backbone(switchboard_nats::cause(e))
        };
        let bucket = js
            .get_key_value(PLUGINS_BUCKET)
            .await
            .map_err(|e| err(e.into()))?;
        let code = js
            .get_object_store(PLUGIN_CODE_STORE)
            .await
            .map_err(|e| err(e.into()))?;
        let activations = Arc::new(Activations {
            plugins: self.clone(),
            code,
            artifacts: self.artifacts_on(js),
            lanes: Mutex::new(Lanes::default()),
            loading: Semaphore::new(self.host().limits().compile_concurrency.max(1)),
        });
        let mut pending = bucket.status().await.map_err(|e| err(e.into()))?.values();
        let mut watch = bucket
            .watch_with_history(">")
            .await
            .map_err(|e| err(e.into()))?;
        // Until `pending` reaches zero this replays the latest entry of
        // every key; then it is live. The versions load side by side and
        // all are installed before this returns.
        let mut loading = Vec::new();
        while pending > 0 {
            let Some(entry) = watch.next().await else {
                return Err(RegistryError::WatchEnded);
            };
            let entry = entry.map_err(|e| err(e.into()))?;
            pending = entry.delta;
            loading.extend(activations.arrive(entry));
        }
        for task in loading {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "a plugin activation task failed");
            }
        }
        Ok(tokio::spawn(async move {
            loop {
                while let Some(entry) = watch.next().await {
                    match entry {
                        Ok(entry) => drop(activations.arrive(entry)),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_groups_entries_apply_in_order_and_only_the_latest_of_a_key_waits() {
        let mut lanes = Lanes::default();
        // Two tenants: each applies at once, neither waits for the other.
        assert_eq!(
            lanes.arrive("acme.moderation", "acme.moderation", 1),
            Some(1)
        );
        assert_eq!(
            lanes.arrive("globex.moderation", "globex.moderation", 2),
            Some(2)
        );
        // acme's next entries wait behind its first; a newer one of the
        // same key replaces the older in its place.
        assert_eq!(lanes.arrive("acme.moderation", "acme.moderation", 3), None);
        assert_eq!(
            lanes.arrive("acme.moderation", "acme.moderation.shadow", 4),
            None
        );
        assert_eq!(lanes.arrive("acme.moderation", "acme.moderation", 5), None);
        assert_eq!(lanes.applied("acme.moderation"), Some(5));
        assert_eq!(lanes.applied("acme.moderation"), Some(4));
        assert_eq!(lanes.applied("acme.moderation"), None, "idle again");
        assert_eq!(
            lanes.arrive("acme.moderation", "acme.moderation", 6),
            Some(6)
        );
        assert_eq!(lanes.applied("globex.moderation"), None);
        assert_eq!(lanes.applied("acme.moderation"), None);
        assert!(lanes.waiting.is_empty(), "nothing kept for idle groups");
    }

    #[test]
    fn a_hooks_shadow_key_is_in_its_group() {
        assert_eq!(group_of("acme.moderation.shadow"), "acme.moderation");
        assert_eq!(group_of("acme.moderation"), "acme.moderation");
        assert_ne!(group_of("acme.fan_out"), group_of("acme.moderation"));
    }
}
