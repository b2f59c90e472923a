//! Jobs of the admin API (v1.2): work that outlasts its request. The one
//! kind so far is the erasure of a user: `DELETE /v1/admin/users/{user}`
//! answers `202` with the job, and `GET /v1/admin/jobs/{job_id}` follows
//! it.

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    Done,
    Failed,
}

/// What a job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// Erases a user: `DELETE /v1/admin/users/{user}`.
    EraseUser,
}

/// A job as the admin API shows it. A finished erasure says nothing of
/// whom it erased: the record keeps no trace of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Job {
    pub job_id: String,
    pub kind: JobKind,
    pub state: JobState,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When it finished (`done` or `failed`).
    #[serde(default)]
    pub finished_at: Option<Timestamp>,
    /// Conversations the job has still to erase (at most 1,000 are
    /// counted); 0 once past that step.
    pub conversations_left: u64,
    /// The name the erased user's tombstones carry (`erased-` and 16 hex
    /// digits): what `sender_id` of their messages says now. Empty once
    /// the job is done: nothing links the tombstones to it then.
    pub pseudonym: String,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
