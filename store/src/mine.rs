//! A reader's own reactions on the messages they read (v1.1): stored
//! messages carry the counts only; `me` is the reader's, filled in here
//! from [`crate::Read::UserReactions`] for every read that hands messages to
//! a member (history, replay, the inbox, threads, pins).

use std::collections::BTreeMap;

use switchboard_protocol::{ConversationId, Message, TenantId, UserId};

use crate::{ConversationKey, Store, StoreResult};

/// Sets `me` on every reaction of `messages` that `reader` made. Asks the
/// store once per conversation, and only for messages with reactions.
pub async fn mark_mine(
    store: &dyn Store,
    tenant: &TenantId,
    reader: &UserId,
    messages: &mut [Message],
) -> StoreResult<()> {
    let mut asked: BTreeMap<ConversationId, Vec<u64>> = BTreeMap::new();
    for m in messages.iter().filter(|m| !m.reactions.is_empty()) {
        asked
            .entry(m.conversation_id.clone())
            .or_default()
            .push(m.seq);
    }
    for (conversation, seqs) in asked {
        let key = ConversationKey::new(tenant.clone(), conversation.clone());
        let mine = store.user_reactions(&key, reader, seqs.clone()).await?;
        let by_seq: BTreeMap<u64, Vec<String>> = seqs.into_iter().zip(mine).collect();
        for m in messages
            .iter_mut()
            .filter(|m| m.conversation_id == conversation)
        {
            if let Some(emoji) = by_seq.get(&m.seq) {
                for r in &mut m.reactions {
                    r.me = emoji.contains(&r.emoji);
                }
            }
        }
    }
    Ok(())
}
