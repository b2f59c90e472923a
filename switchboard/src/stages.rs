//! The outbound stages beside a worker (every worker process runs them,
//! on consumers they share): pushes and webhooks (F15, v1.2), and link
//! previews (v1.3).

use std::path::Path;
use std::sync::Arc;

use async_nats::jetstream;
use switchboard_nats::records::tenants::TenantBook;
use switchboard_plugin_host::Plugins;
use switchboard_store::Store;

use crate::config::FileConfig;

/// Starts the outbound deliveries beside a worker: both steps of the push
/// stage (F15), on the consumers every worker shares, this process's
/// webhook dispatcher (v1.2), which dispatches while it holds the lease,
/// and the link previews stage (v1.3; `plugins` moderate its cards)
/// unless `[previews] enabled = false`.
pub async fn push_stage(
    client: &async_nats::Client,
    store: Arc<dyn Store>,
    tenants: &TenantBook,
    file: &FileConfig,
    data_dir: &Path,
    partitions: u16,
    plugins: Arc<Plugins>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let (push, webhooks) = crate::push_settings::outbound_config(file)?;
    let js = jetstream::new(client.clone());
    let mut tasks = crate::run::settled("starting the push stage", || async {
        let (js, store, tenants) = (js.clone(), store.clone(), tenants.clone());
        Ok(switchboard_push::start(js, store, tenants, push.clone()).await?)
    })
    .await?;
    tasks.push(switchboard_webhooks::start(
        js.clone(),
        tenants.clone(),
        webhooks,
    )?);
    if crate::previews_settings::enabled(file) {
        let config = crate::previews_settings::previews_config(file, partitions)?;
        let blobs = crate::blobs::blob_store(data_dir, file)?;
        // In the background: a worker's writers never wait for the
        // previews stage (a courtesy) while JetStream settles, as after a
        // NATS node and this worker were lost together.
        tasks.push(tokio::spawn(async move {
            loop {
                match switchboard_previews::start(
                    js.clone(),
                    blobs.clone(),
                    plugins.clone(),
                    config.clone(),
                ).await {
                    Ok(stage) => {
                        let _ = stage.await;
                        return;
                    }
                    Err(e) => {
                        tracing::info!(error = %e, "waiting for JetStream to start the link previews stage");
                        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                    }
                }
            }
        }));
    }
    Ok(tasks)
}
