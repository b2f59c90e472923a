//! Why a plugin change was refused, as the deploy service answers it
//! across the backbone (a [`Refusal`]: its kind and message) and as the
//! admin API answers it (the kind's [`ErrorCode`]).

use serde::{Deserialize, Serialize};
use switchboard_protocol::ErrorCode;

use crate::compiler::CompilerError;
use crate::host::CompileError;

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error(transparent)]
    Invalid(#[from] CompileError),
    /// No compiler was free in time, or compiling took too long.
    #[error(transparent)]
    Compiler(#[from] CompilerError),
    #[error(
        "the tenant's stored plugin components would take {bytes} bytes, over its {cap} (max_bytes_per_tenant), counting those replaced less than prune_grace_ms ago until they are deleted; remove a hook's plugin or shadow, retry once replaced ones are deleted, or deploy a smaller component"
    )]
    OverQuota { bytes: u64, cap: u64 },
    #[error("no earlier version to roll back to")]
    NothingToRollBack,
    #[error(
        "the version before ({digest}) is no longer stored (max_versions_per_hook); deploy it again instead"
    )]
    Pruned { digest: String },
    #[error("the version list changed meanwhile; try again")]
    Conflict,
    #[error("no plugin is deployed for this hook")]
    NotDeployed,
    #[error("no shadow version is deployed for this hook")]
    NoShadow,
    #[error("no version {0} of this hook; the listing names the revisions")]
    NoSuchVersion(u64),
    /// The plugins bucket or the code store failed, or a record did not
    /// encode: the client's or serde's error, kept whole.
    #[error("the backbone: {0}")]
    Backbone(#[source] switchboard_nats::Cause),
    /// The upload a deploy names is not in `sb_plugin_uploads` (expired,
    /// taken already, or another tenant's).
    #[error("the uploaded component is gone; upload it again")]
    NoSuchUpload,
    /// The uploaded component could not be read within its bound.
    #[error("the uploaded component: {0}")]
    Upload(#[source] crate::objects::ReadError),
    /// The deploy service refused the change (its answer, as it gave it).
    #[error("{}", .0.message)]
    Refused(Refusal),
}

/// A refusal as it crosses the backbone from the deploy service: its
/// kind, which says how the admin API answers, and its message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
}

impl Refusal {
    pub fn new(kind: RefusalKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// What kind of refusal a [`DeployError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// The component is larger than allowed.
    TooLarge,
    /// The component or the request is not acceptable as it is.
    Invalid,
    /// Over the tenant's plugin storage.
    OverQuota,
    /// The version list is not where the change needs it.
    Conflict,
    /// No such version, shadow or deployment.
    NotFound,
    /// Try again later: no compiler free, the backbone unwell.
    Unavailable,
    /// The tenant has as many deploys under way as it may; retry when one
    /// is over.
    RateLimited,
    /// A bug.
    Internal,
}

impl RefusalKind {
    /// How the admin API answers a refusal of this kind.
    pub fn code(self) -> ErrorCode {
        match self {
            RefusalKind::TooLarge => ErrorCode::TooLarge,
            RefusalKind::Invalid => ErrorCode::InvalidRequest,
            RefusalKind::OverQuota => ErrorCode::QuotaExceeded,
            RefusalKind::Conflict => ErrorCode::Conflict,
            RefusalKind::NotFound => ErrorCode::NotFound,
            RefusalKind::Unavailable => ErrorCode::Unavailable,
            RefusalKind::RateLimited => ErrorCode::RateLimited,
            RefusalKind::Internal => ErrorCode::Internal,
        }
    }
}

impl DeployError {
    pub fn kind(&self) -> RefusalKind {
        match self {
            DeployError::Invalid(CompileError::TooLarge { .. })
            | DeployError::Upload(crate::objects::ReadError::TooLarge { .. }) => {
                RefusalKind::TooLarge
            }
            DeployError::Invalid(_) | DeployError::Compiler(CompilerError::TimedOut(_)) => {
                RefusalKind::Invalid
            }
            DeployError::Compiler(CompilerError::Busy(_))
            | DeployError::Backbone(_)
            | DeployError::Upload(_) => RefusalKind::Unavailable,
            DeployError::Compiler(CompilerError::Join(_)) => RefusalKind::Internal,
            DeployError::OverQuota { .. } => RefusalKind::OverQuota,
            DeployError::NothingToRollBack | DeployError::Pruned { .. } | DeployError::Conflict => {
                RefusalKind::Conflict
            }
            DeployError::NotDeployed
            | DeployError::NoShadow
            | DeployError::NoSuchVersion(_)
            | DeployError::NoSuchUpload => RefusalKind::NotFound,
            DeployError::Refused(r) => r.kind,
        }
    }

    /// The refusal as the deploy service answers it.
    pub fn refusal(&self) -> Refusal {
        Refusal::new(self.kind(), self.to_string())
    }
}

pub(crate) fn backbone(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> DeployError {
    DeployError::Backbone(switchboard_nats::cause(e))
}
