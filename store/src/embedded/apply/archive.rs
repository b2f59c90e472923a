//! A bucket's rows replaced by its archive object, in a commit group.

use super::*;

impl GroupView<'_> {
    /// Every message row of `span` but `newest` goes with its idempotency
    /// key and versions; the bucket is marked archived in `object`.
    pub(super) fn replace_by_archive(
        &mut self,
        b: &BucketKey,
        span: &BucketSpan,
        newest: u64,
        object: &str,
    ) -> StoreResult<()> {
        let (t, c) = (b.tenant.as_str(), b.conversation_id.as_str());
        let range =
            Key::new().s(t).s(c).n(span.first).bytes()..=Key::new().s(t).s(c).n(span.last).bytes();
        let mut doomed = Vec::new();
        for g in self.snap.range(&self.s.messages, range) {
            let (k, v) = g.into_inner().map_err(storage)?;
            doomed.push((k.to_vec(), decode::<Message>(&v)?));
        }
        for (k, m) in doomed {
            if m.seq == newest {
                continue;
            }
            self.batch.remove(&self.s.messages, k);
            self.batch.remove(
                &self.s.sent,
                Key::new()
                    .s(t)
                    .s(c)
                    .s(m.sender_id.as_str())
                    .s(m.client_msg_id.as_str())
                    .bytes(),
            );
            for (vk, _) in std::mem::take(self.versions_with_keys(t, c, m.seq)?) {
                self.batch.remove(&self.s.versions, vk);
            }
        }
        let row = BucketRow {
            first: span.first,
            archived: Some((span.last, object.to_owned())),
        };
        self.batch.insert(
            &self.s.buckets,
            Key::new().s(t).s(c).day(b.day).bytes(),
            row.encode(),
        );
        self.pending.archived.insert(Key::new().s(t).s(c).bytes());
        Ok(())
    }
}
