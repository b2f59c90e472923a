//! A commit through [`Tiered`]: a change of the archive alone (moving,
//! erasing, expiring a bucket), or live mutations, with the archived
//! message each edit, delete, reaction or vote of an archived message needs
//! restored first.

use super::Tiered;
use crate::{Mutation, StoreError, StoreResult, WriterClaim};

impl Tiered {
    /// A commit, by the writer holding `claim` when there is one. The
    /// archive's own changes (moving, erasing, expiring a bucket) are the
    /// leader's and writer's maintenance, never fenced: each is a repeat
    /// of itself whoever runs it.
    pub(super) async fn commit_to(
        &self,
        claim: Option<WriterClaim>,
        mutations: Vec<Mutation>,
    ) -> StoreResult<()> {
        if let [Mutation::MoveToArchive { bucket }] = mutations.as_slice() {
            return super::archive_bucket(self.inner.as_ref(), self.objects.as_ref(), bucket)
                .await
                .map(|_| ());
        }
        if let [
            Mutation::EraseArchived {
                bucket,
                user,
                pseudonym,
                at,
            },
        ] = mutations.as_slice()
        {
            return self.erase_archived(bucket, user, pseudonym, *at).await;
        }
        if let [
            Mutation::ExpireArchived {
                bucket,
                seqs,
                cutoff,
                at,
            },
        ] = mutations.as_slice()
        {
            return self.expire_archived(bucket, seqs, *cutoff, *at).await;
        }
        if mutations.iter().any(|m| {
            matches!(
                m,
                Mutation::MoveToArchive { .. }
                    | Mutation::EraseArchived { .. }
                    | Mutation::ExpireArchived { .. }
            )
        }) {
            return Err(StoreError::Conflict(
                "a change of the archive must be alone in its commit".into(),
            ));
        }
        let mut out = Vec::with_capacity(mutations.len());
        for m in mutations {
            if let Mutation::Edit { key, seq, .. }
            | Mutation::Delete { key, seq, .. }
            | Mutation::React { key, seq, .. }
            | Mutation::Vote { key, seq, .. }
            | Mutation::ClosePoll { key, seq, .. } = &m
                && let Some((message, versions)) = self.archived_message(key, *seq).await?
            {
                out.push(Mutation::Restore {
                    key: key.clone(),
                    message: Box::new(message),
                    versions,
                });
            }
            out.push(m);
        }
        match claim {
            Some(claim) => self.inner.commit_as(claim, out).await,
            None => self.inner.commit(out).await,
        }
    }
}
