//! Keeping the index current: `SB_INDEX` read in order from the position
//! the index recorded, with an ordered consumer of this replica's own (no
//! server state to lose or share), committed at least every
//! `commit_every` while changes arrive, so a change is searchable within
//! that (and the feed's own delay) of its commit.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use switchboard_nats::definitions::INDEX_STREAM;
use switchboard_nats::search::{IndexOp, shard_of};
use tokio::sync::Mutex;

use crate::error::SearchError;
use crate::index::SearchIndex;

/// Which tenants this replica keeps.
#[derive(Debug, Clone, Copy)]
pub struct Shard {
    pub index: u16,
    pub count: u16,
}

impl Shard {
    pub(crate) fn keeps(&self, op: &IndexOp) -> bool {
        self.count <= 1 || shard_of(op.tenant(), self.count) == self.index
    }
}

/// The first stream sequence a replica at `position` still needs, if the
/// stream still has it; `None`: the messages after it are gone (aged
/// out), so the index must be rebuilt from the store.
pub async fn resumable(js: &jetstream::Context, position: u64) -> Result<Option<u64>, SearchError> {
    let mut stream = js
        .get_stream(INDEX_STREAM)
        .await
        .map_err(|e| SearchError::nats("stream SB_INDEX", e))?;
    let state = stream
        .info()
        .await
        .map_err(|e| SearchError::nats("stream SB_INDEX", e))?
        .state
        .clone();
    let next = position + 1;
    // An empty stream that never had messages starts at 1; one whose
    // messages all aged out starts past its last.
    let kept_from = state.first_sequence.max(1);
    Ok((next >= kept_from || state.messages == 0 && next > state.last_sequence).then_some(next))
}

/// The feed's last sequence now: where a rebuild from the store starts
/// to apply the feed.
pub async fn last_sequence(js: &jetstream::Context) -> Result<u64, SearchError> {
    let mut stream = js
        .get_stream(INDEX_STREAM)
        .await
        .map_err(|e| SearchError::nats("stream SB_INDEX", e))?;
    Ok(stream
        .info()
        .await
        .map_err(|e| SearchError::nats("stream SB_INDEX", e))?
        .state
        .last_sequence)
}

/// Applies the feed from `from` on until the feed ends (an error to start
/// over from the index's position).
pub async fn follow(
    js: &jetstream::Context,
    index: &Mutex<SearchIndex>,
    shard: Shard,
    from: u64,
    commit_every: Duration,
) -> Result<(), SearchError> {
    let stream = js
        .get_stream(INDEX_STREAM)
        .await
        .map_err(|e| SearchError::nats("stream SB_INDEX", e))?;
    let consumer = stream
        .create_consumer(consumer::pull::OrderedConfig {
            deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                start_sequence: from,
            },
            ..Default::default()
        })
        .await
        .map_err(|e| SearchError::nats("an ordered consumer of SB_INDEX", e))?;
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| SearchError::nats("reading SB_INDEX", e))?;
    let mut position = from.saturating_sub(1);
    let mut since_commit = Instant::now() - commit_every;
    loop {
        match tokio::time::timeout(commit_every, messages.next()).await {
            Ok(Some(Ok(message))) => {
                let info = message
                    .info()
                    .ok()
                    .map(|i| (i.stream_sequence, i.published));
                let seq = info.map_or(position + 1, |(seq, _)| seq);
                // Messages went from under the feed (aged out, or an
                // erasure's purge) before this replica applied them: the
                // index must be rebuilt, not patched.
                if seq != position + 1 {
                    return Err(SearchError::Gap {
                        expected: position + 1,
                        got: seq,
                    });
                }
                let mut index = index.lock().await;
                for line in message
                    .payload
                    .split(|b| *b == b'\n')
                    .filter(|l| !l.is_empty())
                {
                    match serde_json::from_slice::<IndexOp>(line) {
                        Ok(op) if shard.keeps(&op) => index.apply(&op)?,
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, seq, "an index change does not decode; skipped")
                        }
                    }
                }
                position = seq;
                if let Some((_, published)) = info {
                    crate::metrics::lag(published);
                }
            }
            Ok(Some(Err(e))) => return Err(SearchError::nats("reading SB_INDEX", e)),
            Ok(None) => return Ok(()),
            // Quiet for `commit_every`.
            Err(_) => {}
        }
        // At most one commit per `commit_every`; the first change after a
        // quiet spell is committed at once.
        let mut index = index.lock().await;
        if index.applied().position < position && since_commit.elapsed() >= commit_every {
            index.commit(position)?;
            crate::metrics::committed(position, index.documents());
            since_commit = Instant::now();
        }
    }
}
