//! What can go wrong in a store, as every backend and the store service
//! say it.

use serde::{Deserialize, Serialize};

pub type StoreResult<T> = Result<T, StoreError>;

/// What can go wrong. Serializable, because the store can be served over
/// NATS to processes that do not hold it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum StoreError {
    /// The conversation does not exist (or is not visible to the reader).
    #[error("conversation not found")]
    NotFound,
    /// The reader is not a member of the conversation.
    #[error("not a member of this conversation")]
    NotAMember,
    /// A write that contradicts the stored state: an append that does not
    /// continue `last_seq`, a conversation created twice, a duplicate
    /// idempotency key. Only a stale or concurrent writer causes it; the
    /// writer reloads its state and tries again.
    #[error("conflicting write: {0}")]
    Conflict(String),
    /// The backend cannot be reached or failed to read or write. Retrying
    /// is safe.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Stored data that does not decode: a bug or corruption.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// History moved to the archive cannot be read back: its object is
    /// missing from the blob store or does not decode.
    #[error("archived history {object} cannot be read: {reason}")]
    ArchiveUnreadable { object: String, reason: String },
    /// The answer does not fit in one message of the transport (the store
    /// service's NATS `max_payload`): ask for fewer.
    #[error("the answer is {bytes} bytes, over the limit of {max}; ask for fewer")]
    AnswerTooLarge { bytes: usize, max: usize },
    /// The store service does not take this call from where it was asked
    /// (a commit on the endpoint gateways may use).
    #[error("refused by the store service: {0}")]
    Refused(String),
    /// A writer's commit after another writer claimed its partition
    /// ([`Store::claim_writer`](crate::Store::claim_writer)): the writer
    /// lost its lease and must stop; nothing of the commit was written.
    #[error("fenced: {0}")]
    Fenced(String),
}

/// An id read back from a row that is not a valid id: the row is corrupt.
impl From<switchboard_protocol::IdError> for StoreError {
    fn from(e: switchboard_protocol::IdError) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}
