//! A partition writer's side of the store: its claim, and its commits
//! decided by the writer fence (`fence.rs`) before they are written.

use switchboard_store::{Mutation, StoreResult, WriterClaim, rules};

use crate::client::ScyllaStore;
use crate::commit::Tx;
use crate::fence;

impl ScyllaStore {
    /// `Store::claim_writer`.
    pub(crate) async fn claim(&self, partition: u16) -> StoreResult<WriterClaim> {
        let (claim, last_ts) = fence::claim(&self.session, &self.fence, partition).await?;
        // Every write of the new writer wins over every decided one, also
        // when this host's clock is behind the last writer's.
        self.clock.observe(last_ts);
        tracing::info!(
            partition,
            epoch = claim.epoch,
            "claimed the partition's writer fence"
        );
        Ok(claim)
    }

    /// `Store::commit`, and `Store::commit_as` with a claim.
    pub(crate) async fn commit_fenced(
        &self,
        claim: Option<WriterClaim>,
        mutations: Vec<Mutation>,
    ) -> StoreResult<()> {
        let started = std::time::Instant::now();
        let mut tx = Tx::for_commit(self);
        for m in &mutations {
            rules::apply(&mut tx, m).await?;
        }
        tx.finish_as(claim).await?;
        switchboard_store::metrics::group_committed(1, started.elapsed());
        Ok(())
    }
}
