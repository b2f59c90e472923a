//! A bucket's rows replaced by its archive object, in one Scylla commit.

use super::*;

impl Tx<'_> {
    /// One partition tombstone each for the bucket's messages and versions
    /// instead of a tombstone per row; the newest message is written back
    /// after them, so with later timestamps.
    pub(super) async fn replace_by_archive(
        &mut self,
        b: &BucketKey,
        span: &BucketSpan,
        newest: u64,
        object: &str,
    ) -> StoreResult<()> {
        let k = ck(&b.conversation());
        let day = b.day;
        // The rows the archive replaces, for their idempotency keys.
        let rows = self.store.bucket_messages(&k.0, &k.1, day).await?;
        let mut kept = None;
        for m in rows {
            if m.seq == newest {
                let versions = self.versions_of(&k, day, m.seq).await?;
                kept = Some((m, versions));
                continue;
            }
            let ts = self.ts();
            self.push_as(
                &self.store.st.delete_sent,
                (
                    ts,
                    k.0.clone(),
                    k.1.clone(),
                    m.sender_id.as_str().to_owned(),
                    m.client_msg_id.as_str().to_owned(),
                ),
                Phase::After,
            );
        }
        let ts = self.ts();
        self.push(
            &self.store.st.delete_bucket_messages,
            (ts, k.0.clone(), k.1.clone(), day_db(day)),
        );
        let ts = self.ts();
        self.push(
            &self.store.st.delete_bucket_versions,
            (ts, k.0.clone(), k.1.clone(), day_db(day)),
        );
        if let Some((m, versions)) = kept {
            self.insert_message(&k, day, &m)?;
            for v in &versions {
                self.insert_version(&k, day, m.seq, v)?;
            }
        }
        let ts = self.ts();
        self.push(
            &self.store.st.archive_bucket,
            (
                ts,
                seq_db(span.last),
                object.to_owned(),
                k.0.clone(),
                k.1.clone(),
                day_db(day),
            ),
        );
        if let Some(bucket) = self
            .buckets(&k)
            .await?
            .iter_mut()
            .find(|bucket| bucket.day == day)
        {
            bucket.archived = Some((span.last, object.to_owned()));
        }
        self.archived.insert(k);
        Ok(())
    }
}
