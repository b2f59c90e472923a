//! `GET /v1/conversations/{id}/messages`: a conversation's history, a page
//! at a time, newest first.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::Deserialize;
use switchboard_protocol::conversation::HistoryPage;
use switchboard_protocol::{ConversationId, ErrorCode, MessageId};
use switchboard_store::{HistoryQuery, MessageKey};

use super::extract::PathParams;
use super::extract::Shared;
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

#[derive(Deserialize, schemars::JsonSchema)]
pub(super) struct HistoryParams {
    /// Only messages before this seq.
    before_seq: Option<u64>,
    /// Only messages after this seq.
    after_seq: Option<u64>,
    /// Messages per page: 50 when absent; at least 1, larger values are
    /// capped at 200.
    #[schemars(extend("default" = HISTORY_DEFAULT_LIMIT))]
    limit: Option<usize>,
    /// Only the thread of this root (v1.1): its replies and the root
    /// itself.
    thread_id: Option<MessageId>,
}

/// Default and largest page of `GET .../messages` (docs/protocol.md).
const HISTORY_DEFAULT_LIMIT: usize = 50;
const HISTORY_MAX_LIMIT: usize = 200;

/// `GET /v1/conversations/{id}/messages`
pub(super) fn page_op() -> Operation {
    Operation::get("History, newest first")
        .describe("Messages with after_seq < seq < before_seq. Page with next_before_seq. With thread_id, only that thread: its root and its replies (replies moved to the archive are not shown); 404 when thread_id names no message of the conversation.")
        .path::<ConversationId>("id", "The conversation.")
        .query_fields::<HistoryParams>()
        .reply::<HistoryPage>(200, "A page.")
        .errors(&[404])
}

pub(super) async fn page(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
    params: Result<Query<HistoryParams>, QueryRejection>,
) -> Result<Json<HistoryPage>, ApiError> {
    let conversation = path.get()?;
    let Query(params) = params?;
    let limit = params
        .limit
        .unwrap_or(HISTORY_DEFAULT_LIMIT)
        .clamp(1, HISTORY_MAX_LIMIT);
    let thread_root = match params.thread_id {
        None => None,
        Some(root) => {
            let key = MessageKey {
                tenant: id.tenant.clone(),
                conversation_id: conversation.clone(),
                message_id: root,
            };
            let seq = gw.store.message_seqs(vec![key]).await?.pop().flatten();
            Some(seq.ok_or_else(|| {
                ApiError::new(
                    ErrorCode::NotFound,
                    "thread_id names no message of this conversation",
                )
            })?)
        }
    };
    // Nothing before the reader's first seq (v1.3: they joined after it).
    let first =
        crate::floors::first_seq(gw.store.as_ref(), &id.tenant, &id.user, &conversation).await?;
    let after_seq = match params.after_seq {
        Some(after) => Some(after.max(first - 1)),
        None => (first > 1).then_some(first - 1),
    };
    let query = HistoryQuery {
        before_seq: params.before_seq,
        after_seq,
        limit,
        thread_root,
    };
    let mut messages = gw
        .store
        .history(&id.tenant, &conversation, &id.user, query)
        .await?;
    // Where the page read ends, whether the caller may see all of it or
    // not: a page of others' shadow messages is no last page.
    let (read, oldest) = (messages.len(), messages.last().map(|m| m.seq));
    if let Some(root) = params.thread_id
        && gw
            .tenants
            .bans()
            .shadowed(&id.tenant, &id.user, switchboard_protocol::Timestamp::now())
    {
        let oldest = oldest.filter(|_| read == limit);
        let window = (oldest, params.before_seq);
        own_shadow_replies(&gw, &id, &conversation, root, window, &mut messages).await?;
    }
    crate::blocks::as_seen_by(gw.store.as_ref(), &id.tenant, &id.user, &mut messages).await?;
    let floor = after_seq.unwrap_or(0).saturating_add(1);
    let next_before_seq = match oldest {
        Some(oldest) if read == limit && oldest > floor => Some(oldest),
        _ => None,
    };
    Ok(Json(HistoryPage {
        messages,
        next_before_seq,
    }))
}

/// Own messages read back for a shadow-banned reader's thread view.
const OWN_REPLIES_READ: usize = 100;

/// A shadow-banned reader's own replies in a thread (v1.3), merged into
/// its page: the thread's index leaves them out (there they would count
/// as unread replies for the others), so they are found among the
/// reader's own newest messages, within the page's `(oldest, before)`
/// seqs (no lower end on the last page).
async fn own_shadow_replies(
    gw: &Shared,
    id: &Identity,
    conversation: &ConversationId,
    root: MessageId,
    (oldest, before): (Option<u64>, Option<u64>),
    page: &mut Vec<switchboard_protocol::Message>,
) -> Result<(), ApiError> {
    let key = switchboard_store::ConversationKey::new(id.tenant.clone(), conversation.clone());
    let mine = gw
        .store
        .sent_by(&key, &id.user, before, OWN_REPLIES_READ)
        .await?;
    let known: std::collections::HashSet<u64> = page.iter().map(|m| m.seq).collect();
    page.extend(mine.into_iter().filter_map(|r| r.message).filter(|m| {
        m.shadow
            && m.thread_id == Some(root)
            && oldest.is_none_or(|o| m.seq > o)
            && !known.contains(&m.seq)
    }));
    page.sort_unstable_by_key(|m| std::cmp::Reverse(m.seq));
    Ok(())
}
