//! A deletion: what a `delete` does, and expiry and erasure with it.

use switchboard_protocol::Timestamp;

use super::commit::{Commit, Write};
use super::steps::{check_not_archived_here, store_update};
use super::threads;
use crate::{ConversationKey, StoreError, StoreResult};

/// Soft delete of message `seq`: no content anywhere from now on.
pub(super) async fn delete<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    seq: u64,
    at: Timestamp,
    inbox: bool,
) -> StoreResult<()> {
    check_not_archived_here(view, c)?;
    let Some(mut message) = view.message(c, seq).await? else {
        return Err(StoreError::NotFound);
    };
    if message.deleted_at.is_some() {
        return Ok(());
    }
    // No content anywhere after a delete, the versions included: the
    // blobs it or any of its versions carried are no longer its.
    let versions = view.versions(c, seq).await?;
    // Its previews' images (v1.3) too.
    let mut blobs: Vec<&str> = versions
        .iter()
        .filter_map(|v| v.content.media())
        .map(|m| m.blob_ref.as_str())
        .chain(message.blob_refs())
        .collect();
    blobs.sort_unstable();
    blobs.dedup();
    let blobs: Vec<String> = blobs.into_iter().map(str::to_owned).collect();
    for blob_ref in &blobs {
        view.write(Write::MediaRef {
            c,
            seq,
            blob_ref,
            present: false,
        })
        .await?;
    }
    view.write(Write::VersionsGone { c, seq }).await?;
    // Nor reactions or mentions: a deleted message shows nothing of what
    // it was, and counts in nobody's mentions.
    if !message.reactions.is_empty() {
        view.write(Write::MessageReactionsGone { c, seq }).await?;
    }
    threads::unmention(view, c, &message).await?;
    super::unread::uncount(view, c, seq).await?;
    message.mark_deleted(at);
    store_update(view, c, &message, inbox, at).await
}
