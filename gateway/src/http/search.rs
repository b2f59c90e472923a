//! `GET /v1/search` (v1.2): full-text search over the messages of the
//! caller's conversations. The gateway names the conversations the
//! caller is a member of; the tenant's search shard finds matches
//! (`switchboard_search`, over NATS); the gateway reads each match from
//! the store as it is now, so an edit, a deletion or an expiry shows at
//! once even before the index has it.

use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::Deserialize;
use switchboard_nats::search::{SearchReply, SearchRequest, search_subject, shard_of};
use switchboard_protocol::search::{
    DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS, MAX_RESULTS, SearchResult, SearchResults,
};
use switchboard_protocol::{Content, ConversationId, ErrorCode, Timestamp};
use switchboard_store::MessageKey;

use super::extract::Shared;
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

/// How long a search shard has to answer: a little longer than a
/// replica lets a query run (`[search] query_timeout_ms`, 4 s), so that
/// its own answer, `timed_out`, arrives first.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

#[derive(Deserialize, schemars::JsonSchema)]
pub(super) struct SearchParams {
    /// The words to find (all of them; `"a phrase"` in quotes; at most 500
    /// characters, not only spaces).
    #[schemars(length(min = 1, max = 500), regex(pattern = r"\S"))]
    q: String,
    /// Only this conversation.
    conversation_id: Option<ConversationId>,
    /// Results per page: 20 when absent, at most 50.
    #[schemars(extend("default" = DEFAULT_LIMIT))]
    limit: Option<usize>,
    /// The `next_cursor` of the page before.
    #[schemars(regex(pattern = r"^[0-9]{1,9}$"))]
    cursor: Option<String>,
}

/// `GET /v1/search`
pub(super) fn search_op() -> Operation {
    Operation::get("Search messages")
        .describe("Text and captions of the messages of the conversations the caller is a member of (or of `conversation_id` alone), best match first; never ciphertext. Pages through the first 1000 results at most. A message is findable within 2 s of its `ack`; edited, deleted, expired and erased ones are shown as they are now or not at all. 429 `rate_limited` when the caller (2 at once) or the tenant (4) already has queries running; 503 `unavailable` when no search replica answers or the query ran past its time (4 s).")
        .query_fields::<SearchParams>()
        .reply::<SearchResults>(200, "A page of results.")
        .errors(&[400, 403, 404, 429, 503])
}

pub(super) async fn search(
    State(gw): State<Shared>,
    id: Identity,
    params: Result<Query<SearchParams>, QueryRejection>,
) -> Result<Json<SearchResults>, ApiError> {
    let Query(params) = params?;
    let q = params.q.trim().to_owned();
    if q.is_empty() || q.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::invalid(format!(
            "q must be 1 to {MAX_QUERY_CHARS} characters"
        )));
    }
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let offset = match params.cursor.as_deref() {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| ApiError::invalid("cursor is not a next_cursor this API gave"))?,
    };
    if offset >= MAX_RESULTS {
        return Ok(Json(SearchResults {
            results: Vec::new(),
            next_cursor: None,
        }));
    }
    let limit = limit.min(MAX_RESULTS - offset);
    let conversations = match params.conversation_id {
        Some(c) => {
            gw.store.members(&id.tenant, &c, &id.user).await?;
            vec![c]
        }
        None => gw
            .store
            .memberships(&id.tenant, &id.user)
            .await?
            .into_iter()
            .map(|(c, _, _)| c)
            .collect(),
    };
    if conversations.is_empty() {
        return Ok(Json(SearchResults {
            results: Vec::new(),
            next_cursor: None,
        }));
    }
    let request = SearchRequest {
        tenant: id.tenant.clone(),
        user: Some(id.user.clone()),
        conversations,
        q,
        limit,
        offset,
    };
    let body = serde_json::to_vec(&request)
        .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let subject = search_subject(shard_of(&id.tenant, gw.config.search_shards));
    let unavailable = |why: String| ApiError::new(ErrorCode::Unavailable, why);
    let answer = tokio::time::timeout(ANSWER_WITHIN, gw.client.request(subject, body.into()))
        .await
        .map_err(|_| unavailable("search did not answer in time; retry".into()))?
        .map_err(|e| unavailable(format!("search is not available: {e}")))?;
    let (hits, more) = match serde_json::from_slice::<SearchReply>(&answer.payload) {
        Ok(SearchReply::Hits { hits, more }) => (hits, more),
        Ok(SearchReply::Refused { message }) => return Err(ApiError::invalid(message)),
        Ok(SearchReply::Busy { message }) => {
            return Err(ApiError::new(ErrorCode::RateLimited, message).retry_after(Some(1000)));
        }
        Ok(SearchReply::TimedOut { message }) => return Err(unavailable(message)),
        Err(e) => {
            return Err(ApiError::new(
                ErrorCode::Internal,
                format!("bad search answer: {e}"),
            ));
        }
    };
    let keys = hits
        .iter()
        .map(|h| MessageKey {
            tenant: id.tenant.clone(),
            conversation_id: h.conversation_id.clone(),
            message_id: h.message_id,
        })
        .collect();
    let now = Timestamp::now();
    let found = gw.store.find_messages(keys).await?;
    let mut messages = Vec::new();
    let mut highlights = Vec::new();
    for (hit, message) in hits.into_iter().zip(found) {
        // As it is now: gone, expired or ciphertext since it was indexed
        // is not a result.
        let Some(m) = message else { continue };
        let shown = m.deleted_at.is_none()
            && m.expires_at.is_none_or(|at| at > now)
            && !matches!(m.content, Some(Content::Ciphertext { .. }) | None);
        if shown {
            messages.push(m);
            highlights.push(hit.highlights);
        }
    }
    // Nothing from before the caller joined where that history is not
    // theirs (v1.3).
    let readable =
        crate::floors::readable(gw.store.as_ref(), &id.tenant, &id.user, &messages).await?;
    let (mut messages, highlights): (Vec<_>, Vec<_>) = messages
        .into_iter()
        .zip(highlights)
        .zip(readable)
        .filter_map(|(pair, keep)| keep.then_some(pair))
        .unzip();
    crate::blocks::as_seen_by(gw.store.as_ref(), &id.tenant, &id.user, &mut messages).await?;
    let results = messages
        .into_iter()
        .zip(highlights)
        .map(|(message, highlights)| SearchResult {
            message,
            highlights,
        })
        .collect();
    Ok(Json(SearchResults {
        results,
        next_cursor: (more && offset + limit < MAX_RESULTS).then(|| (offset + limit).to_string()),
    }))
}
