//! A reader's own reactions and votes on the messages they read (v1.1,
//! v1.3 polls): stored messages carry the counts only; `me` is the
//! reader's, filled in here from [`crate::Read::UserReactions`] (a vote
//! is kept among the voter's marks) for every read that hands messages
//! to a member (history, replay, the inbox, threads, pins). A poll whose
//! time has passed reads as closed.

use std::collections::BTreeMap;

use switchboard_protocol::poll::split_marks;
use switchboard_protocol::{Content, ConversationId, Message, TenantId, Timestamp, UserId};

use crate::{ConversationKey, Store, StoreResult};

/// Sets `me` on every reaction of `messages` that `reader` made, and on
/// every poll's results. Asks the store once per conversation, and only
/// for messages with reactions or a poll.
pub async fn mark_mine(
    store: &dyn Store,
    tenant: &TenantId,
    reader: &UserId,
    messages: &mut [Message],
) -> StoreResult<()> {
    let mut asked: BTreeMap<ConversationId, Vec<u64>> = BTreeMap::new();
    let now = Timestamp::now();
    for m in messages
        .iter()
        .filter(|m| !m.reactions.is_empty() || m.poll_results.is_some())
    {
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
            let Some(marks) = by_seq.get(&m.seq) else {
                continue;
            };
            let (emoji, votes) = split_marks(marks);
            for r in &mut m.reactions {
                r.me = emoji.contains(&r.emoji);
            }
            if let Some(Content::Poll(poll)) = &m.content
                && let Some(results) = m.poll_results.as_mut()
            {
                let me = poll
                    .options
                    .iter()
                    .filter(|o| votes.contains(&o.id))
                    .map(|o| o.id.clone())
                    .collect();
                results.for_reader(poll, me, now);
            }
        }
    }
    Ok(())
}
