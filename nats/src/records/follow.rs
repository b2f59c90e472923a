//! Buckets every process keeps whole in memory (tenants, tenant bans):
//! loaded at start, then followed for as long as the process runs.

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use futures::StreamExt;

use crate::BackboneError;

/// Gives `apply` every entry of `bucket`, then each change of it in the
/// background, watching again (a second later) whenever the watch ends.
/// Returns once the entries of the moment are applied, so a process
/// never serves with an older view; the background task runs on past
/// the returned handle.
pub async fn follow_bucket<F>(
    js: &jetstream::Context,
    bucket: &'static str,
    apply: F,
) -> Result<tokio::task::JoinHandle<()>, BackboneError>
where
    F: Fn(&kv::Entry) + Send + 'static,
{
    let nats = |what: &str, e: Box<dyn std::error::Error + Send + Sync>| {
        BackboneError::nats(format!("{what} {bucket}"), e)
    };
    let store = js
        .get_key_value(bucket)
        .await
        .map_err(|e| nats("opening", e.into()))?;
    let mut pending = store
        .status()
        .await
        .map_err(|e| nats("reading", e.into()))?
        .values();
    let mut watch = store
        .watch_with_history(">")
        .await
        .map_err(|e| nats("watching", e.into()))?;
    while pending > 0 {
        let entry = watch
            .next()
            .await
            .ok_or_else(|| nats("loading", "the watch ended".into()))?
            .map_err(|e| nats("loading", e.into()))?;
        pending = entry.delta;
        apply(&entry);
    }
    Ok(tokio::spawn(async move {
        loop {
            while let Some(entry) = watch.next().await {
                match entry {
                    Ok(entry) => apply(&entry),
                    Err(e) => tracing::warn!(error = %e, bucket, "watching a bucket"),
                }
            }
            tracing::warn!(bucket, "the watch of a bucket ended; watching again");
            tokio::time::sleep(Duration::from_secs(1)).await;
            match store.watch_with_history(">").await {
                Ok(w) => watch = w,
                Err(e) => tracing::warn!(error = %e, bucket, "watching a bucket again"),
            }
        }
    }))
}
