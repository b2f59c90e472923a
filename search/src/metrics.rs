//! The search role's metrics.

/// How old the feed's latest applied change was when applied (seconds):
/// the index's lag behind the writers' commits.
pub const SEARCH_LAG: &str = "switchboard_search_lag_seconds";
/// Documents in this replica's index.
pub const SEARCH_DOCUMENTS: &str = "switchboard_search_documents";
/// The feed position this replica's index committed.
pub const SEARCH_POSITION: &str = "switchboard_search_feed_position";
/// Queries answered, by outcome (`ok`, `refused`, `busy`: the user or
/// tenant had its bound running, `timed_out`: stopped at its deadline).
pub const SEARCH_QUERIES: &str = "switchboard_search_queries_total";
/// How long a query took here (seconds).
pub const SEARCH_QUERY_SECONDS: &str = "switchboard_search_query_seconds";

pub fn describe() {
    metrics::describe_gauge!(
        SEARCH_LAG,
        metrics::Unit::Seconds,
        "How old the latest index change was when this search replica applied it (v1.2)."
    );
    metrics::describe_gauge!(SEARCH_DOCUMENTS, "Messages in this search replica's index.");
    metrics::describe_gauge!(
        SEARCH_POSITION,
        "The SB_INDEX sequence this search replica's index has committed."
    );
    metrics::describe_counter!(
        SEARCH_QUERIES,
        "Search queries by outcome: ok, refused, busy (the user or tenant had its bound running), timed_out."
    );
    metrics::describe_histogram!(
        SEARCH_QUERY_SECONDS,
        metrics::Unit::Seconds,
        "How long a search query took in its replica."
    );
}

pub(crate) fn lag(published: time::OffsetDateTime) {
    let age = (time::OffsetDateTime::now_utc() - published).as_seconds_f64();
    metrics::gauge!(SEARCH_LAG).set(age.max(0.0));
}

pub(crate) fn committed(position: u64, documents: u64) {
    metrics::gauge!(SEARCH_POSITION).set(position as f64);
    metrics::gauge!(SEARCH_DOCUMENTS).set(documents as f64);
}

pub(crate) fn query(outcome: &'static str, seconds: f64) {
    metrics::counter!(SEARCH_QUERIES, "outcome" => outcome).increment(1);
    metrics::histogram!(SEARCH_QUERY_SECONDS).record(seconds);
}
