//! An erasure's last word on the streams that carry copies of messages
//! (v1.2): the search index feed and the outbound events. By then every
//! conversation of the user is erased in the store and its index
//! removals are on the feed.
//!
//! - `SB_INDEX` is purged up to now. Its messages hold many users' text
//!   a batch at a time, so none can be cut out alone; a search replica
//!   that had not applied them yet finds the feed behind its position
//!   and rebuilds from the store, which holds only tombstones of the user.
//! - `SB_EVENTS` keeps the tenant's events by conversation: each one that
//!   names the user (their messages, reactions, memberships) is deleted.
//!   An endpoint that had not taken it yet never gets it.

use async_nats::jetstream::stream::DirectGetErrorKind;
use switchboard_nats::definitions::{EVENTS_STREAM, INDEX_STREAM};
use switchboard_nats::events::EVENTS_PREFIX;
use switchboard_nats::subject::token;
use switchboard_protocol::{TenantId, UserId};

use crate::ctx::Ctx;

/// What could not be purged, and why.
pub(super) type Unpurged = (String, async_nats::Error);

/// Events read per pass at most: the rest waits for the next pass of the
/// job (which is a step safe to repeat).
const EVENTS_PER_PASS: usize = 100_000;

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
    let events = ctx
        .js
        .get_stream(EVENTS_STREAM)
        .await
        .map_err(|e| failed(EVENTS_STREAM, e.into()))?;
    let subjects = format!("{EVENTS_PREFIX}.{}.>", token(tenant.as_str()));
    // The user's id as the events' JSON writes it.
    let named = serde_json::to_string(user.as_str()).unwrap_or_default();
    let mut after = 0;
    for _ in 0..EVENTS_PER_PASS {
        let next = events
            .direct_get_next_for_subject(&subjects, Some(after + 1))
            .await;
        let message = match next {
            Ok(m) => m,
            Err(e) if e.kind() == DirectGetErrorKind::NotFound => break,
            Err(e) => return Err(failed(&subjects, e.into())),
        };
        after = message.sequence;
        let body = String::from_utf8_lossy(&message.payload);
        if body.contains(&named) {
            events
                .delete_message(message.sequence)
                .await
                .map_err(|e| failed(&subjects, e.into()))?;
        }
    }
    Ok(())
}
