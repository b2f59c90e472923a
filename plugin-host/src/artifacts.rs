//! Precompiled artifacts shared through the `sb_plugin_compiled` object
//! store, so that a version is compiled once, by the worker that deploys
//! it, and every other process loads its code instead of compiling.
//!
//! Object `<tenant>.sha256:<hex>@<fingerprint>` holds the artifact
//! (`precompiled.rs`) of the tenant's component for engines of that
//! fingerprint; a process only ever asks for its own fingerprint's, so a
//! changed configuration or wasmtime never loads stale code. Everything
//! here is best effort: an artifact that is missing, too large,
//! unreadable or refused means compiling, as before there were any.
//! Reads never take more than `max_precompiled_bytes`, whatever the
//! object's description claims. Only processes that serve deploys (the
//! workers) write; gateways may only read the bucket.

use std::sync::{Arc, Mutex, Weak};

use async_nats::jetstream::{self, object_store};
use switchboard_nats::definitions::PLUGIN_COMPILED_STORE;
use switchboard_protocol::TenantId;

use crate::host::Compiled;
use crate::objects::ReadError;
use crate::precompiled::Precompiler;

/// Chunks of an artifact put into the store: larger than the client's
/// default (128 KiB), so that a JavaScript engine's 55 MB take about a
/// hundred acknowledged publishes, well under NATS's 1 MiB payload.
const CHUNK_BYTES: usize = 512 << 10;

/// Components an activation compiled before this process wrote artifacts
/// (at start-up, before its deploy service started), stored once it
/// does; past it the oldest are left to be compiled again elsewhere.
const PENDING: usize = 64;

/// The object of the tenant's component's artifact for `fingerprint`.
pub fn artifact_name(tenant: &TenantId, digest: &str, fingerprint: &str) -> String {
    format!("{}.{digest}@{fingerprint}", tenant.as_str())
}

/// This process's access to `sb_plugin_compiled`.
pub(crate) struct SharedArtifacts {
    js: jetstream::Context,
    /// Opened on first use (a worker may define the bucket after this
    /// process started).
    bucket: tokio::sync::OnceCell<object_store::ObjectStore>,
    precompiler: Precompiler,
    max_bytes: usize,
    /// Whether this process writes artifacts (it serves deploys), and
    /// what it compiled before it did.
    writing: Mutex<Writing>,
}

#[derive(Default)]
struct Writing {
    on: bool,
    pending: Vec<(TenantId, Weak<Compiled>)>,
}

impl SharedArtifacts {
    pub(crate) fn new(js: jetstream::Context, precompiler: Precompiler, max_bytes: usize) -> Self {
        Self {
            js,
            bucket: tokio::sync::OnceCell::new(),
            precompiler,
            max_bytes,
            writing: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Writing> {
        self.writing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// From now on this process stores what it compiles, starting with
    /// what its activations compiled before.
    pub(crate) fn start_writing(self: &Arc<Self>) {
        let pending = {
            let mut writing = self.lock();
            writing.on = true;
            std::mem::take(&mut writing.pending)
        };
        for (tenant, compiled) in pending {
            if let Some(compiled) = compiled.upgrade() {
                self.share(&tenant, &compiled);
            }
        }
    }

    fn writes(&self) -> bool {
        self.lock().on
    }

    /// An activation compiled `compiled`: its artifact is stored in the
    /// background, now if this process writes artifacts, else once it
    /// does.
    pub(crate) fn share(self: &Arc<Self>, tenant: &TenantId, compiled: &Arc<Compiled>) {
        {
            let mut writing = self.lock();
            if !writing.on {
                if writing.pending.len() >= PENDING {
                    writing.pending.remove(0);
                }
                writing
                    .pending
                    .push((tenant.clone(), Arc::downgrade(compiled)));
                return;
            }
        }
        let (me, tenant, compiled) = (self.clone(), tenant.clone(), compiled.clone());
        tokio::spawn(async move { me.store(&tenant, &compiled).await });
    }

    /// Stores the artifact of `compiled` for the tenant, unless this
    /// process does not write artifacts or it is stored already.
    pub(crate) async fn store(&self, tenant: &TenantId, compiled: &Arc<Compiled>) {
        if self.max_bytes == 0 || !self.writes() || self.stored(tenant, &compiled.digest).await {
            return;
        }
        let (precompiler, c) = (self.precompiler.clone(), compiled.clone());
        let sealed =
            tokio::task::spawn_blocking(move || precompiler.seal(&c.component, &c.digest)).await;
        match sealed {
            Ok(Ok(artifact)) => self.write(tenant, &compiled.digest, &artifact).await,
            Ok(Err(e)) => {
                crate::metrics::precompiled("store_failed");
                tracing::warn!(tenant = %tenant, digest = %compiled.digest, error = %e, "a component's code was not written out; other processes compile it");
            }
            Err(e) => {
                crate::metrics::precompiled("store_failed");
                tracing::warn!(tenant = %tenant, digest = %compiled.digest, error = %e, "writing out a component's code failed");
            }
        }
    }

    async fn bucket(&self) -> Option<&object_store::ObjectStore> {
        if self.max_bytes == 0 {
            return None;
        }
        let opened = self
            .bucket
            .get_or_try_init(|| self.js.get_object_store(PLUGIN_COMPILED_STORE))
            .await;
        match opened {
            Ok(store) => Some(store),
            Err(e) => {
                tracing::debug!(error = %e, "no {PLUGIN_COMPILED_STORE} store (yet): compiling instead");
                None
            }
        }
    }

    fn name(&self, tenant: &TenantId, digest: &str) -> String {
        artifact_name(tenant, digest, self.precompiler.fingerprint().as_str())
    }

    /// This engine's artifact of the tenant's component, if one is stored
    /// and can be read within `max_precompiled_bytes`.
    pub(crate) async fn read(&self, tenant: &TenantId, digest: &str) -> Option<Vec<u8>> {
        let store = self.bucket().await?;
        let name = self.name(tenant, digest);
        let object = match store.get(&name).await {
            Ok(object) => object,
            Err(e) => {
                if e.kind() != object_store::GetErrorKind::NotFound {
                    tracing::warn!(tenant = %tenant, digest, error = %e, "reading a precompiled artifact failed; compiling instead");
                }
                crate::metrics::precompiled("missing");
                return None;
            }
        };
        let claimed = object.info().size as u64;
        match crate::objects::read_bounded(object, claimed, self.max_bytes).await {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                let outcome = match e {
                    ReadError::TooLarge { .. } => "rejected",
                    ReadError::Io(_) => "missing",
                };
                crate::metrics::precompiled(outcome);
                tracing::warn!(tenant = %tenant, digest, error = %e, "a precompiled artifact was not read; compiling instead");
                None
            }
        }
    }

    /// Whether this engine's artifact of the component is stored.
    pub(crate) async fn stored(&self, tenant: &TenantId, digest: &str) -> bool {
        let Some(store) = self.bucket().await else {
            return false;
        };
        store
            .info(&self.name(tenant, digest))
            .await
            .is_ok_and(|info| !info.deleted)
    }

    /// Stores `artifact` for the tenant's component when it is within
    /// `max_precompiled_bytes`. A failure is logged and counted: other
    /// processes compile instead.
    async fn write(&self, tenant: &TenantId, digest: &str, artifact: &[u8]) {
        if artifact.len() > self.max_bytes {
            tracing::warn!(tenant = %tenant, digest, bytes = artifact.len(), max = self.max_bytes, "a precompiled artifact is over max_precompiled_bytes; not shared");
            crate::metrics::precompiled("store_failed");
            return;
        }
        let Some(store) = self.bucket().await else {
            crate::metrics::precompiled("store_failed");
            return;
        };
        let meta = object_store::ObjectMetadata {
            name: self.name(tenant, digest),
            chunk_size: Some(CHUNK_BYTES),
            ..Default::default()
        };
        match store.put(meta, &mut &artifact[..]).await {
            Ok(_) => crate::metrics::precompiled("stored"),
            Err(e) => {
                crate::metrics::precompiled("store_failed");
                tracing::warn!(tenant = %tenant, digest, error = %e, "storing a precompiled artifact failed; other processes compile instead");
            }
        }
    }

    /// Deletes this engine's artifact of the tenant's component (its
    /// component was pruned); others' expire with the bucket's age.
    pub(crate) async fn delete(&self, tenant: &TenantId, digest: &str) {
        if !self.writes() {
            return;
        }
        let Some(store) = self.bucket().await else {
            return;
        };
        let name = self.name(tenant, digest);
        if let Err(e) = store.delete(&name).await
            && e.kind() != object_store::DeleteErrorKind::NotFound
        {
            tracing::debug!(tenant = %tenant, digest, error = %e, "a precompiled artifact was not deleted; it expires");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_artifacts_name_keys_tenant_component_and_engine() {
        let acme = TenantId::new("acme").unwrap();
        let name = artifact_name(&acme, "sha256:00ff", "wt48_0_8-0123");
        assert_eq!(name, "acme.sha256:00ff@wt48_0_8-0123");
        // Another engine, another tenant, another component: another object.
        assert_ne!(name, artifact_name(&acme, "sha256:00ff", "wt48_0_8-4567"));
        let dotted = TenantId::new("acme.x").unwrap();
        assert_ne!(name, artifact_name(&dotted, "sha256:00ff", "wt48_0_8-0123"));
        assert_ne!(name, artifact_name(&acme, "sha256:00fe", "wt48_0_8-0123"));
    }
}
