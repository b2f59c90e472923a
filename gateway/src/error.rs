//! The gateway's one error path: `ApiError`, a protocol error code and its
//! message, and the `From` impls that say once which code each kind of
//! failure gets, so handlers and the connection code use `?`.
//!
//! On REST it is answered as `{ "code", "message" }` with the code's HTTP
//! status; on a WebSocket its code and message go into an `error` frame.

use crate::key_directory::KeyError;
use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use switchboard_blob::BlobError;
use switchboard_nats::BackboneError;
use switchboard_nats::records::push_tokens::PushTokenError;
use switchboard_nats::records::tenants::TenantError;
use switchboard_plugin_host::deploy::DeployError;
use switchboard_protocol::content::ContentError;
use switchboard_protocol::error::ErrorBody;
use switchboard_protocol::{ErrorCode, IdError};
use switchboard_store::StoreError;

use crate::auth::AuthError;

/// A refusal as the client sees it. Its message is the whole of what the
/// client is told, so it is built from the failure's own text and no
/// source is kept: what an operator needs beyond it is logged where the
/// failure is mapped.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// With `rate_limited` from slow mode: when to try again (v1.2).
    pub retry_after_ms: Option<u64>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// This refusal, saying when to try again.
    pub fn retry_after(mut self, ms: Option<u64>) -> Self {
        self.retry_after_ms = ms;
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    /// This refusal as the `error` frame that answers a WebSocket request
    /// of type `request_type` (naming its send or conversation).
    pub fn answering(
        self,
        request_type: &str,
        client_msg_id: Option<&str>,
        conversation_id: Option<&str>,
    ) -> switchboard_protocol::ServerFrame {
        switchboard_protocol::ServerFrame::error_answering(
            self.code,
            self.message,
            Some(request_type),
            client_msg_id,
            conversation_id,
        )
        .retry_after(self.retry_after_ms)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry_after = self.retry_after_ms.map(|ms| ms.div_ceil(1000).to_string());
        let body = ErrorBody {
            code: self.code,
            message: self.message,
            retry_after_ms: self.retry_after_ms,
        };
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(secs) = retry_after
            && let Ok(value) = axum::http::HeaderValue::from_str(&secs)
        {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, value);
        }
        response
    }
}

/// The protocol error code for a store error.
pub fn store_error_code(e: &StoreError) -> ErrorCode {
    match e {
        StoreError::NotFound => ErrorCode::NotFound,
        StoreError::NotAMember => ErrorCode::NotAMember,
        StoreError::Conflict(_) => ErrorCode::Conflict,
        StoreError::Unavailable(_) => ErrorCode::Unavailable,
        StoreError::Corrupt(_) => ErrorCode::Internal,
        // Retrying may help (the blob store may be back), and the message
        // names the object for the operator.
        StoreError::ArchiveUnreadable { .. } => ErrorCode::Unavailable,
        StoreError::AnswerTooLarge { .. } => ErrorCode::TooLarge,
        // Only a process calling the wrong endpoint gets it: a bug here.
        StoreError::Refused(_) => ErrorCode::Internal,
        // A writer's own commit only; the writer stops and its successor
        // answers the command.
        StoreError::Fenced(_) => ErrorCode::Unavailable,
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let code = store_error_code(&e);
        if code == ErrorCode::Internal {
            tracing::error!(error = %e, "store error");
        }
        Self::new(code, e.to_string())
    }
}

/// A token that is missing or does not verify.
impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        let code = match e {
            AuthError::Banned { .. } => ErrorCode::Banned,
            _ => ErrorCode::Unauthorized,
        };
        Self::new(code, e.to_string())
    }
}

/// An id that does not parse, in a path or a body: the request is invalid.
impl From<IdError> for ApiError {
    fn from(e: IdError) -> Self {
        Self::invalid(e.to_string())
    }
}

/// Content a client sends that its tenant's limits refuse: `too_large` for
/// size, `invalid_frame` for shape (content only comes in frames).
impl From<ContentError> for ApiError {
    fn from(e: ContentError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

/// The backbone could not do its part (an id, a publish): retrying may
/// help.
impl From<BackboneError> for ApiError {
    fn from(e: BackboneError) -> Self {
        Self::new(ErrorCode::Unavailable, e.to_string())
    }
}

/// Path parameters axum could not take (say, not UTF-8).
impl From<PathRejection> for ApiError {
    fn from(e: PathRejection) -> Self {
        Self::invalid(e.body_text())
    }
}

/// A query string that does not fit its parameters.
impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> Self {
        Self::invalid(e.body_text())
    }
}

/// A body that could not be read: `too_large` past its route's limit,
/// invalid otherwise (not read at all, or not what the route takes).
fn unreadable_body(status: StatusCode, text: String, too_large: &'static str) -> ApiError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(ErrorCode::TooLarge, too_large)
    } else {
        ApiError::invalid(text)
    }
}

/// A JSON body that could not be read: over the body limit, or not JSON.
impl From<JsonRejection> for ApiError {
    fn from(e: JsonRejection) -> Self {
        unreadable_body(
            e.status(),
            e.body_text(),
            "request body over the size limit",
        )
    }
}

/// A raw body that could not be read. Only uploads take raw bodies, hence
/// the wording.
impl From<BytesRejection> for ApiError {
    fn from(e: BytesRejection) -> Self {
        unreadable_body(
            e.status(),
            e.body_text(),
            "the upload is over the size limit",
        )
    }
}

/// Blob storage: a backend failure is logged, the rest is the client's.
impl From<BlobError> for ApiError {
    fn from(e: BlobError) -> Self {
        let code = match &e {
            BlobError::NotFound => ErrorCode::NotFound,
            BlobError::Exists => ErrorCode::Conflict,
            BlobError::Mismatch(_) => ErrorCode::InvalidRequest,
            BlobError::BadUrl(_) | BlobError::Expired => ErrorCode::Forbidden,
            BlobError::Backend { .. } => ErrorCode::Unavailable,
        };
        if code == ErrorCode::Unavailable {
            tracing::warn!(error = %e, "blob storage");
        }
        Self::new(code, e.to_string())
    }
}

/// The end-to-end key directory.
impl From<KeyError> for ApiError {
    fn from(e: KeyError) -> Self {
        let code = match &e {
            KeyError::Invalid(_) => ErrorCode::InvalidRequest,
            KeyError::NotFound => ErrorCode::NotFound,
            // Over the documented count (the schema's maxItems for one
            // upload): invalid, like any field out of bounds.
            KeyError::TooMany => ErrorCode::InvalidRequest,
            KeyError::Contended | KeyError::Backbone(_) | KeyError::Undecodable { .. } => {
                ErrorCode::Unavailable
            }
        };
        if code == ErrorCode::Unavailable {
            tracing::warn!(error = %e, "key directory");
        }
        Self::new(code, e.to_string())
    }
}

/// The push token registry fails only when the backbone does.
impl From<PushTokenError> for ApiError {
    fn from(e: PushTokenError) -> Self {
        tracing::warn!(error = %e, "push tokens");
        Self::new(ErrorCode::Unavailable, e.to_string())
    }
}

/// The tenant registry (the operator API).
impl From<TenantError> for ApiError {
    fn from(e: TenantError) -> Self {
        let code = match &e {
            TenantError::Invalid(_) => ErrorCode::InvalidRequest,
            TenantError::NotFound(_) => ErrorCode::NotFound,
            TenantError::Exists(_) | TenantError::Conflict(_) => ErrorCode::Conflict,
            TenantError::Backbone(_) | TenantError::Undecodable { .. } => ErrorCode::Unavailable,
        };
        Self::new(code, e.to_string())
    }
}

/// Deploying, listing and rolling back plugins.
impl From<DeployError> for ApiError {
    fn from(e: DeployError) -> Self {
        Self::new(e.kind().code(), e.to_string())
    }
}

/// Why a gateway could not start: its configuration, or a backbone call
/// of its start-up.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Keys(#[from] crate::auth::KeyError),
    #[error("limits: {0}")]
    Limits(String),
    #[error("serving HTTP: {0}")]
    Io(#[from] std::io::Error),
    /// A backbone call of the start-up failed; each kind of cause keeps
    /// its own typed error, and all of them read "backbone: ..." as before.
    #[error("backbone: {0}")]
    Backbone(#[from] switchboard_nats::BackboneError),
    #[error("backbone: {0}")]
    Deploy(#[from] switchboard_plugin_host::deploy::DeployError),
    #[error("backbone: {0}")]
    Tenants(#[from] switchboard_nats::records::tenants::TenantError),
    #[error("backbone: {0}")]
    PushTokens(#[from] switchboard_nats::records::push_tokens::PushTokenError),
    /// A bucket could not be opened; `context` names it.
    #[error("backbone: {context}: {source}")]
    Bucket {
        context: String,
        #[source]
        source: switchboard_nats::Cause,
    },
}

impl GatewayError {
    pub(crate) fn bucket(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Bucket {
            context: context.into(),
            source: switchboard_nats::cause(source),
        }
    }
}
