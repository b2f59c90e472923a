//! Link previews (v1.3): the cards the previews stage made for a
//! message, kept where the message still has their links, with the
//! references that let members download their images.

use switchboard_protocol::previews::{LinkPreview, links};
use switchboard_protocol::{Content, Timestamp};

use super::commit::{Commit, Write};
use super::steps::{check_not_archived_here, store_update};
use crate::{ConversationKey, StoreResult};

pub(super) async fn set<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    seq: u64,
    previews: &[LinkPreview],
    at: Timestamp,
    inbox: bool,
) -> StoreResult<()> {
    check_not_archived_here(view, c)?;
    let Some(mut message) = view.message(c, seq).await? else {
        return Ok(());
    };
    let Some(Content::Text { text }) = &message.content else {
        return Ok(());
    };
    if message.deleted_at.is_some() {
        return Ok(());
    }
    let still = links(text);
    let kept: Vec<LinkPreview> = previews
        .iter()
        .filter(|p| still.contains(&p.url))
        .cloned()
        .collect();
    if kept == message.previews {
        return Ok(());
    }
    let image = |p: &LinkPreview| p.image.as_ref().map(|i| i.blob_ref.clone());
    let before: Vec<String> = message.previews.iter().filter_map(image).collect();
    let after: Vec<String> = kept.iter().filter_map(image).collect();
    for (blob_ref, present) in before
        .iter()
        .filter(|b| !after.contains(b))
        .map(|b| (b, false))
        .chain(
            after
                .iter()
                .filter(|b| !before.contains(b))
                .map(|b| (b, true)),
        )
    {
        view.write(Write::MediaRef {
            c,
            seq,
            blob_ref,
            present,
        })
        .await?;
    }
    message.previews = kept;
    store_update(view, c, &message, inbox, at).await
}
