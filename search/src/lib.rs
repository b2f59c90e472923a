//! Search (v1.2): the `switchboard search` role. Each replica keeps its
//! own tantivy index of the messages' searchable text (text and captions;
//! never ciphertext), fed in order from `SB_INDEX`, which the writers
//! fill after each commit, so the index never holds what the store does
//! not. At start an index that is missing, of another format, or behind
//! what `SB_INDEX` still keeps is rebuilt from the store. Queries come
//! over NATS (`service.rs`); replicas of a shard share them, and tenants
//! are spread over shards (`switchboard_nats::search::shard_of`).

mod admission;
mod deadline;
mod error;
mod feed;
mod index;
pub mod metrics;
pub mod query;
mod rebuild;
mod replica;
mod service;

pub use deadline::Deadline;
pub use error::SearchError;
pub use feed::Shard;
pub use index::{FORMAT, SearchIndex, Searching, open};
pub use replica::{SearchConfig, run};
pub use service::{MAX_CONVERSATIONS, MAX_LIMIT, MAX_OFFSET, MAX_QUERY_CHARS, QueryLimits};
