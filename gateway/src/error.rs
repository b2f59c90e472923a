//! REST errors: `{ "code", "message" }` with the code's HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use switchboard_protocol::ErrorCode;
use switchboard_protocol::error::ErrorBody;
use switchboard_store::StoreError;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
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

/// An upload body that could not be read: over its route's limit, or not
/// read at all.
pub(crate) fn upload_rejection(e: axum::extract::rejection::BytesRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(ErrorCode::TooLarge, "the upload is over the size limit")
    } else {
        ApiError::invalid(e.body_text())
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
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = ErrorBody {
            code: self.code,
            message: self.message,
        };
        (status, axum::Json(body)).into_response()
    }
}
