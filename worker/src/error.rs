//! The worker's one error type.

use switchboard_nats::BackboneError;
use switchboard_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The writer saw its consumer lose or skip deliveries, or end: it
    /// starts over. There is no underlying error; the message says what
    /// was seen.
    #[error("NATS: {0}")]
    StartOver(String),
    /// The refused-sends bucket could not be opened. (It reads "NATS: NATS:
    /// ...", as it did when the backbone error was turned into this string.)
    #[error("NATS: {0}")]
    Refusals(#[source] BackboneError),
    #[error(transparent)]
    Backbone(#[from] BackboneError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("partition lease no longer valid")]
    LeaseLost,
}

impl WorkerError {
    /// A failed NATS call, as the backbone's own error (which reads "NATS:
    /// {context}: {source}", as this crate's did).
    pub(crate) fn nats(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Backbone(BackboneError::nats(context, source))
    }
}
