//! What can go wrong in a search replica.

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("search index: {0}")]
    Index(#[from] tantivy::TantivyError),
    /// A query refused for what it asks (the message is the user's).
    #[error(transparent)]
    Query(#[from] crate::query::QueryError),
    /// The query's time ran out (waiting for its turn or computing).
    #[error("the search took too long")]
    TimedOut,
    #[error("search index directory: {0}")]
    Dir(#[source] std::io::Error),
    #[error("search index commit record: {0}")]
    Payload(#[source] serde_json::Error),
    #[error(transparent)]
    Store(#[from] switchboard_store::StoreError),
    #[error("the index feed skipped from {expected} to {got}: rebuilding")]
    Gap { expected: u64, got: u64 },
    #[error("{0} is not a search index, and not empty: refusing to replace it")]
    NotAnIndex(String),
    #[error("NATS: {context}: {source}")]
    Nats {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl SearchError {
    pub(crate) fn nats(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Nats {
            context: context.into(),
            source: source.into(),
        }
    }
}
