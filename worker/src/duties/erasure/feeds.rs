//! An erasure's last word on the streams that carry copies of messages
//! (v1.2): the search index feed and the outbound events. By then every
//! conversation of the user is erased in the store and its index
//! removals are on the feed.
//!
//! - `SB_INDEX` is purged up to now. Its messages hold many users' text
//!   a batch at a time, so none can be cut out alone; a search replica
//!   that had not applied them yet finds the feed behind its position
//!   and rebuilds from the store, which holds only tombstones of the user.
//! - `SB_EVENTS` and `SB_EVENTS_DEAD` keep the tenant's events: each one
//!   that names the user (their messages, reactions, memberships) is
//!   deleted. An endpoint that had not taken it yet never gets it.
//! - `SB_INGEST_<p>` keeps commands its writer handled until the writer
//!   purges them (about a second later; a writer that just started, at
//!   its first tick): each is purged up to its writer's ack floor now.

use async_nats::jetstream::stream::DirectGetErrorKind;
use switchboard_nats::definitions::{
    EVENTS_DEAD_STREAM, EVENTS_STREAM, INDEX_STREAM, ingest_stream_name, writer_acked_floor,
};
use switchboard_nats::events::{DEAD_PREFIX, EVENTS_PREFIX};
use switchboard_nats::subject::token;
use switchboard_protocol::{TenantId, UserId};

use crate::ctx::Ctx;

/// What could not be purged, and why.
pub(super) type Unpurged = (String, async_nats::Error);

pub(super) async fn purge(ctx: &Ctx, tenant: &TenantId, user: &UserId) -> Result<(), Unpurged> {
    let failed = |subject: &str, source: async_nats::Error| (subject.to_owned(), source);
    let index = ctx
        .js
        .get_stream(INDEX_STREAM)
        .await
        .map_err(|e| failed(INDEX_STREAM, e.into()))?;
    index
        .purge()
        .await
        .map_err(|e| failed(INDEX_STREAM, e.into()))?;
    // The user's id as the events' JSON writes it.
    let named = serde_json::to_string(user.as_str()).unwrap_or_default();
    let tenant = token(tenant.as_str());
    for (stream, subjects) in [
        (EVENTS_STREAM, format!("{EVENTS_PREFIX}.{tenant}")),
        // What older releases stored, per conversation.
        (EVENTS_STREAM, format!("{EVENTS_PREFIX}.{tenant}.>")),
        (EVENTS_DEAD_STREAM, format!("{DEAD_PREFIX}.{tenant}")),
    ] {
        delete_naming(ctx, stream, &subjects, &named)
            .await
            .map_err(|e| failed(&subjects, e))?;
    }
    for p in 0..ctx.config.partitions.max(1) {
        let name = ingest_stream_name(p);
        purge_handled(ctx, &name, p)
            .await
            .map_err(|e| failed(&name, e))?;
    }
    Ok(())
}

/// Purges an ingest stream up to what its writer acked: commands it
/// handled, which it would purge itself a little later.
async fn purge_handled(ctx: &Ctx, name: &str, partition: u16) -> Result<(), async_nats::Error> {
    let stream = ctx.js.get_stream(name).await?;
    // No writer yet: nothing was handled.
    if let Some(floor) = writer_acked_floor(&stream, partition).await?
        && floor > 0
    {
        stream.purge().sequence(floor + 1).await?;
    }
    Ok(())
}

/// Deletes every message of `stream` under `subjects` whose body has
/// `named` in it, reading them all in order.
async fn delete_naming(
    ctx: &Ctx,
    stream: &str,
    subjects: &str,
    named: &str,
) -> Result<(), async_nats::Error> {
    let stream = ctx.js.get_stream(stream).await?;
    let mut after = 0;
    loop {
        let message = match stream
            .direct_get_next_for_subject(subjects, Some(after + 1))
            .await
        {
            Ok(m) => m,
            Err(e) if e.kind() == DirectGetErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        after = message.sequence;
        if String::from_utf8_lossy(&message.payload).contains(named) {
            stream.delete_message(message.sequence).await?;
        }
    }
}
