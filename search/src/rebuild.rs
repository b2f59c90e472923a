//! Building the index from the store: every live day bucket of every
//! conversation, read a page at a time (the archiver's scan). Messages
//! already moved to the archive are not read back: they stay findable in
//! an index that indexed them when they were sent, not in a rebuilt one.

use std::sync::Arc;

use switchboard_nats::search::IndexOp;
use switchboard_store::Store;
use tokio::sync::Mutex;

use crate::error::SearchError;
use crate::feed::Shard;
use crate::index::SearchIndex;

/// Buckets looked at per scan step, messages read per page.
const SCAN_STEP: usize = 500;
const PAGE: usize = 1000;

/// Indexes what the store holds now, then commits at `position` (the
/// feed's last sequence before the scan began: the feed is applied from
/// after it, and every change is idempotent). Returns the messages
/// indexed.
pub async fn from_store(
    store: &Arc<dyn Store>,
    index: &Mutex<SearchIndex>,
    shard: Shard,
    position: u64,
) -> Result<u64, SearchError> {
    index.lock().await.clear()?;
    let mut cursor = None;
    let mut indexed = 0u64;
    loop {
        let scan = store
            .archive_candidates(u32::MAX, cursor, SCAN_STEP)
            .await?;
        for bucket in scan.buckets {
            let mut after = 0;
            loop {
                let contents = match store.bucket_contents(&bucket, after, PAGE).await {
                    Ok(c) => c,
                    // Archived or gone since the scan saw it.
                    Err(
                        switchboard_store::StoreError::NotFound
                        | switchboard_store::StoreError::Conflict(_),
                    ) => break,
                    Err(e) => return Err(e.into()),
                };
                let Some(last) = contents.messages.last().map(|m| m.seq) else {
                    break;
                };
                let mut index = index.lock().await;
                for message in &contents.messages {
                    if let Some(op) = IndexOp::put_of(&bucket.tenant, message)
                        && shard.keeps(&op)
                    {
                        index.apply(&op)?;
                        indexed += 1;
                    }
                }
                drop(index);
                if contents.messages.len() < PAGE {
                    break;
                }
                after = last;
            }
        }
        match scan.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    index.lock().await.commit(position)?;
    Ok(indexed)
}
