//! Who may read an upload on Scylla (F13): the messages that reference
//! a blob (`media_message_refs`, and schema version 1's `media_refs`,
//! kept for good), and whether a reader is a member where one does.

use futures::StreamExt;
use switchboard_store::StoreResult;

use crate::client::ScyllaStore;

impl ScyllaStore {
    /// Whether any message references the blob.
    pub(crate) async fn media_is_referenced(&self, t: &str, blob_ref: &str) -> StoreResult<bool> {
        for table in [&self.st.media_refs, &self.st.legacy_media_refs] {
            let mut refs = std::pin::pin!(table.stream(&self.session, (t, blob_ref)).await?);
            if let Some(row) = refs.next().await {
                return row.map(|_| true);
            }
        }
        Ok(false)
    }

    /// Whether `u` is a member of a conversation with a message that
    /// references the blob.
    pub(crate) async fn media_is_readable(
        &self,
        t: &str,
        blob_ref: &str,
        u: &str,
    ) -> StoreResult<bool> {
        // Each conversation is asked once: the rows of one come together.
        let mut asked: Option<String> = None;
        for table in [&self.st.media_refs, &self.st.legacy_media_refs] {
            let mut refs = std::pin::pin!(table.stream(&self.session, (t, blob_ref)).await?);
            while let Some(row) = refs.next().await {
                let (c,) = row?;
                if asked.as_deref() == Some(c.as_str()) {
                    continue;
                }
                if self
                    .st
                    .member
                    .one(&self.session, (t, &c, u))
                    .await?
                    .is_some()
                {
                    return Ok(true);
                }
                asked = Some(c);
            }
        }
        Ok(false)
    }
}
