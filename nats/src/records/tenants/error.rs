//! The errors of tenant records, and the backbone cause they wrap.

#[derive(Debug, thiserror::Error)]
pub enum TenantError {
    #[error("{0}")]
    Invalid(String),
    #[error("no tenant {0}")]
    NotFound(String),
    #[error("tenant {0} exists already")]
    Exists(String),
    #[error("tenant {0} was changed by someone else meanwhile; try again")]
    Conflict(String),
    /// The tenants bucket could not be read or written.
    #[error("tenants: {0}")]
    Backbone(#[source] crate::Cause),
    /// A stored tenant record that this release cannot read.
    #[error("tenants: tenant {id} does not decode: {source}")]
    Undecodable {
        id: String,
        #[source]
        source: serde_json::Error,
    },
}

pub(super) fn nats(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> TenantError {
    TenantError::Backbone(crate::cause(e))
}
