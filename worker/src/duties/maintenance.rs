//! Maintenance requests on the ingest streams: work the leader asks of a
//! conversation's writer (archive a bucket, expire messages), which it
//! serves between two batches of commands, so that nothing it changes
//! races the conversation's edits (`archive::serve_requests`).

use switchboard_nats::BackboneError;
use switchboard_nats::commands::to_writer;
use switchboard_nats::envelope::HEADER_MAINTENANCE;
use switchboard_nats::publish::publish_stored;
use switchboard_store::ConversationKey;

use crate::ctx::Ctx;

/// Why a maintenance request was not published; logged, and the next
/// scan or pass retries. Each cause reads as its own error did.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    #[error(transparent)]
    Encoding(#[from] serde_json::Error),
    #[error(transparent)]
    Publish(#[from] BackboneError),
}

/// Publishes a maintenance request of `kind` (archive, expire) to the
/// conversation's ingest partition, where its writer serves it between
/// batches. `id` is its `Nats-Msg-Id`: the same request published again
/// inside the dedupe window queues nothing twice.
pub(crate) async fn publish_request(
    ctx: &Ctx,
    key: &ConversationKey,
    kind: &str,
    id: &str,
    payload: Vec<u8>,
) -> Result<(), RequestError> {
    let (subject, mut headers) =
        to_writer(&key.tenant, &key.conversation_id, ctx.config.partitions, id);
    headers.insert(HEADER_MAINTENANCE, kind);
    publish_stored(
        &ctx.js,
        subject,
        headers,
        payload.into(),
        "a maintenance request",
    )
    .await?;
    Ok(())
}

/// Asks the conversation's writer again, at the back of its partition's
/// queue, for the rest of a request of `kind` it could not finish in one
/// step: the commands already waiting there go first. Its id is new, so
/// no dedupe window drops it.
pub(crate) async fn continue_later(
    ctx: &Ctx,
    key: &ConversationKey,
    kind: &str,
    request: &impl serde::Serialize,
) -> Result<(), RequestError> {
    let id = format!("{kind}.then.{}", rand::random::<u64>());
    let payload = serde_json::to_vec(request)?;
    publish_request(ctx, key, kind, &id, payload).await
}
