//! A search replica: its settings, and the loop that keeps its index
//! current (rebuilt from the store when needed, then following the feed)
//! while its queries are answered.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use switchboard_store::Store;
use tokio::sync::Mutex;

use crate::admission::QueryLimits;
use crate::error::SearchError;
use crate::feed::{self, Shard};
use crate::index::{SearchIndex, open};
use crate::{rebuild, service};

/// A search replica's settings.
#[derive(Debug, Clone)]
pub struct SearchConfig {
    /// Where its index lives (its own: replicas share nothing).
    pub dir: PathBuf,
    pub shard: Shard,
    /// At most this long between a change arriving and its commit (what
    /// a query sees): under load, commits come this often.
    pub commit_every: Duration,
    /// The index writer's memory.
    pub memory_bytes: usize,
    /// Queries at once and their time.
    pub queries: QueryLimits,
}

impl SearchConfig {
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            shard: Shard { index: 0, count: 1 },
            commit_every: Duration::from_millis(500),
            memory_bytes: 64 << 20,
            queries: QueryLimits::default(),
        }
    }
}

/// Runs a search replica until `shutdown` resolves: its index current,
/// its queries answered.
pub async fn run(
    config: SearchConfig,
    client: async_nats::Client,
    store: Arc<dyn Store>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), SearchError> {
    let js = async_nats::jetstream::new(client.clone());
    let dir = config.dir.clone();
    let memory = config.memory_bytes;
    let (index, fresh) = tokio::task::spawn_blocking(move || open(&dir, memory))
        .await
        .map_err(|e| SearchError::Dir(std::io::Error::other(e)))??;
    let searching = index.searching();
    let index = Arc::new(Mutex::new(index));
    let service = tokio::spawn(service::serve(
        client.clone(),
        searching,
        config.shard.index,
        config.queries.clone(),
    ));
    let keep = async {
        let mut rebuild = fresh;
        loop {
            match keep_current(&js, &store, &index, &config, rebuild).await {
                Ok(()) => rebuild = false,
                Err(e) => {
                    tracing::warn!(error = %e, "the search index stopped following; starting again");
                    // What was applied since the last commit goes: the
                    // next start is from the committed position.
                    if let Err(e) = index.lock().await.rollback() {
                        tracing::warn!(error = %e, "rolling the index back failed");
                    }
                    // A failed rebuild is made again; a failed feed goes
                    // on from the index's position.
                    rebuild = rebuild && index.lock().await.applied().position == 0;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    tokio::select! {
        () = keep => {}
        () = shutdown => {}
    }
    service.abort();
    // What was applied and not committed is applied again at the next
    // start (from the committed position).
    Ok(())
}

/// Rebuilds the index from the store when asked, or when the feed no
/// longer holds what comes after its position; then follows the feed
/// until it ends.
async fn keep_current(
    js: &async_nats::jetstream::Context,
    store: &Arc<dyn Store>,
    index: &Mutex<SearchIndex>,
    config: &SearchConfig,
    rebuild: bool,
) -> Result<(), SearchError> {
    let position = index.lock().await.applied().position;
    let from = if rebuild {
        None
    } else {
        feed::resumable(js, position).await?
    };
    let from = match from {
        Some(from) => from,
        None => {
            let start = feed::last_sequence(js).await?;
            tracing::info!(position, "rebuilding the search index from the store");
            let n = rebuild::from_store(store, index, config.shard, start).await?;
            tracing::info!(messages = n, "search index rebuilt");
            start + 1
        }
    };
    feed::follow(js, index, config.shard, from, config.commit_every).await
}
