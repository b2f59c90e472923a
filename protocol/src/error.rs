//! Error codes shared by WebSocket `error` frames and REST error bodies.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Malformed JSON, an unknown `type`, a missing or mistyped field.
    InvalidFrame,
    /// A REST request body or query that does not parse or validate.
    InvalidRequest,
    /// A frame, body or message over a documented size limit.
    TooLarge,
    /// Missing, malformed, expired or wrongly signed token.
    Unauthorized,
    /// Authenticated, but not allowed to do this.
    Forbidden,
    /// The user is banned from the tenant (v1.3): their tokens are
    /// refused until the ban ends or is lifted.
    Banned,
    /// The caller is not a member of the conversation.
    NotAMember,
    /// No such conversation, message or other resource (for this caller).
    NotFound,
    /// The request contradicts the current state (for example, adding a
    /// third member to a direct conversation).
    Conflict,
    /// A tenant plugin refused the message.
    RejectedByPolicy,
    /// Too many requests or messages; slow down.
    RateLimited,
    /// A tenant quota is used up.
    QuotaExceeded,
    /// A dependency (NATS, the store) is down or slow; retrying is safe.
    Unavailable,
    /// A bug on the server side; retrying may help.
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidFrame => "invalid_frame",
            Self::InvalidRequest => "invalid_request",
            Self::TooLarge => "too_large",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::Banned => "banned",
            Self::NotAMember => "not_a_member",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::RejectedByPolicy => "rejected_by_policy",
            Self::RateLimited => "rate_limited",
            Self::QuotaExceeded => "quota_exceeded",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }

    /// The HTTP status a REST response with this code carries.
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidFrame | Self::InvalidRequest => 400,
            Self::Unauthorized => 401,
            Self::Forbidden | Self::Banned | Self::NotAMember | Self::RejectedByPolicy => 403,
            Self::NotFound => 404,
            Self::Conflict => 409,
            Self::TooLarge => 413,
            Self::RateLimited | Self::QuotaExceeded => 429,
            Self::Unavailable => 503,
            Self::Internal => 500,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The REST error body: `{ "code", "message" }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    /// With `rate_limited` from slow mode (v1.2): how long until a send
    /// may go. The answer carries `Retry-After` too, in whole seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}
