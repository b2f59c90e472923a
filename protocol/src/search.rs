//! Search (v1.2): `GET /v1/search?q=&conversation_id=&limit=&cursor=`.

use serde::{Deserialize, Serialize};

use crate::Message;

/// Results on one page, by default and at most.
pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 50;
/// The longest query.
pub const MAX_QUERY_CHARS: usize = 500;
/// The results a query pages through at most: a page past them is empty.
pub const MAX_RESULTS: usize = 1000;

/// One result: the message as it is now, and fragments of its text
/// around what matched (matched words in `<b>...</b>`, the rest escaped
/// as HTML).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SearchResult {
    pub message: Message,
    pub highlights: Vec<String>,
}

/// A page of results, best match first; `next_cursor` asks for the next
/// page (`null` on the last).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SearchResults {
    pub results: Vec<SearchResult>,
    pub next_cursor: Option<String>,
}
