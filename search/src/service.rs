//! Queries over NATS: `sb.search.<shard>` in the queue group
//! `search-<shard>`, so every replica of a shard shares its queries. The
//! gateway names the conversations the asker may see; the answer names
//! messages, which the gateway reads from the store as they are now.
//!
//! Each query first gets its turn (`admission.rs`: bounded per user, per
//! tenant and in all) and a deadline, which its wait counts against; it
//! computes on a blocking thread until it is done or the deadline passes
//! (`deadline.rs`).

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use switchboard_nats::search::{SearchReply, SearchRequest, search_subject};

use crate::admission::{Admission, Refusal};
use crate::deadline::Deadline;
use crate::error::SearchError;
use crate::index::Searching;

pub use crate::admission::QueryLimits;

/// Bounds of one query, whatever a gateway asks.
pub const MAX_LIMIT: usize = 50;
pub const MAX_QUERY_CHARS: usize = 500;
pub const MAX_CONVERSATIONS: usize = 20_000;
pub const MAX_OFFSET: usize = switchboard_protocol::search::MAX_RESULTS;

pub async fn serve(
    client: async_nats::Client,
    searching: Searching,
    shard: u16,
    limits: QueryLimits,
) -> Result<(), SearchError> {
    let subject = search_subject(shard);
    let mut requests = client
        .queue_subscribe(subject.clone(), format!("search-{shard}"))
        .await
        .map_err(|e| SearchError::nats(format!("subscribing to {subject}"), e))?;
    tracing::info!(%subject, "search queries served");
    let admission = Arc::new(Admission::new(limits));
    while let Some(request) = requests.next().await {
        let Some(reply_to) = request.reply.clone() else {
            continue;
        };
        let searching = searching.clone();
        let client = client.clone();
        let admission = admission.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let reply = match serde_json::from_slice::<SearchRequest>(&request.payload) {
                Ok(query) => answer(&admission, searching, query).await,
                Err(e) => SearchReply::Refused {
                    message: format!("not a search request: {e}"),
                },
            };
            let outcome = match &reply {
                SearchReply::Hits { .. } => "ok",
                SearchReply::Refused { .. } => "refused",
                SearchReply::Busy { .. } => "busy",
                SearchReply::TimedOut { .. } => "timed_out",
            };
            crate::metrics::query(outcome, started.elapsed().as_secs_f64());
            match serde_json::to_vec(&reply) {
                Ok(body) => {
                    if let Err(e) = client.publish(reply_to, body.into()).await {
                        tracing::warn!(error = %e, "a search answer was not sent");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "a search answer does not encode"),
            }
        });
    }
    Ok(())
}

async fn answer(admission: &Admission, searching: Searching, query: SearchRequest) -> SearchReply {
    let refuse = |message: String| SearchReply::Refused { message };
    if query.q.chars().count() > MAX_QUERY_CHARS {
        return refuse(format!("q is longer than {MAX_QUERY_CHARS} characters"));
    }
    if query.conversations.len() > MAX_CONVERSATIONS {
        return refuse(format!(
            "more than {MAX_CONVERSATIONS} conversations in one query"
        ));
    }
    if query.offset > MAX_OFFSET {
        return refuse(format!("no pages past the first {MAX_OFFSET} results"));
    }
    let deadline = Deadline::new(Instant::now() + admission.limits().timeout);
    let turn = match admission
        .enter(&query.tenant, query.user.as_ref(), &deadline)
        .await
    {
        Ok(turn) => turn,
        Err(Refusal::Busy(message)) => return SearchReply::Busy { message },
        Err(Refusal::TimedOut) => return timed_out(),
    };
    let limit = query.limit.clamp(1, MAX_LIMIT);
    let found = tokio::task::spawn_blocking(move || {
        let found = searching.search(
            &query.tenant,
            &query.conversations,
            &query.q,
            limit,
            query.offset,
            &deadline,
        );
        // The turn ends with the computing, not with the answer.
        drop(turn);
        found
    })
    .await;
    match found {
        Ok(Ok((hits, more))) => SearchReply::Hits { hits, more },
        Ok(Err(SearchError::Query(e))) => refuse(e.to_string()),
        Ok(Err(SearchError::TimedOut)) => timed_out(),
        Ok(Err(e)) => refuse(format!("the search failed: {e}")),
        Err(e) => refuse(format!("the search failed: {e}")),
    }
}

fn timed_out() -> SearchReply {
    SearchReply::TimedOut {
        message: "the search took too long and stopped; try fewer or longer words".into(),
    }
}
