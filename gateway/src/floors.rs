//! Where each reader's history starts (v1.3): a user who joined a
//! channel whose history is not for newcomers reads it from their join
//! on. Every read of messages for a user passes through here after the
//! store's membership check: history and backlog start at the floor,
//! search, pins, threads and versions leave out what lies before it.

use std::collections::HashMap;

use switchboard_protocol::{ConversationId, Message, TenantId, UserId};
use switchboard_store::{Store, StoreResult};

/// The first seq `user` reads in `conversation` (1 for all of it).
pub(crate) async fn first_seq(
    store: &dyn Store,
    tenant: &TenantId,
    user: &UserId,
    conversation: &ConversationId,
) -> StoreResult<u64> {
    let floors = store
        .history_floors(tenant, user, vec![conversation.clone()])
        .await?;
    Ok(floors.first().copied().unwrap_or(0).max(1))
}

/// Whether each of `messages` (of any conversations) is at or past
/// `user`'s floor in its conversation, in order.
pub(crate) async fn readable(
    store: &dyn Store,
    tenant: &TenantId,
    user: &UserId,
    messages: &[Message],
) -> StoreResult<Vec<bool>> {
    let mut conversations: Vec<ConversationId> =
        messages.iter().map(|m| m.conversation_id.clone()).collect();
    conversations.sort();
    conversations.dedup();
    if conversations.is_empty() {
        return Ok(Vec::new());
    }
    let floors = store
        .history_floors(tenant, user, conversations.clone())
        .await?;
    let floors: HashMap<ConversationId, u64> = conversations.into_iter().zip(floors).collect();
    Ok(messages
        .iter()
        .map(|m| m.seq >= floors.get(&m.conversation_id).copied().unwrap_or(0))
        .collect())
}
