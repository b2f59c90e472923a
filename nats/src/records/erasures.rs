//! Erasure jobs (v1.2) in `sb_erasures`: key `erase.<job_id>`, value an
//! [`ErasureRecord`]. The job id is a digest of the tenant and the user,
//! so a second request for a user finds the job under way instead of
//! starting another, and a restarted worker finds every job that was
//! running. While it runs the record holds the tenant and user; once
//! done it holds neither the user nor anything derived from them but the
//! id: the operator's record that the erasure happened.
//!
//! Only workers write it: a gateway asks a worker for a new job over
//! `sb.erasures.request` and reads a job's progress by direct get.

use std::fmt::Write as _;

use async_nats::jetstream::{self, kv};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use switchboard_protocol::jobs::{Job, JobKind, JobState};
use switchboard_protocol::{TenantId, Timestamp, UserId};

use crate::BackboneError;
use crate::definitions::ERASURES_BUCKET;

/// The subject workers answer erasure requests on (a queue group).
pub const REQUEST_SUBJECT: &str = "sb.erasures.request";

/// A gateway's request for an erasure, on [`REQUEST_SUBJECT`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureRequest {
    pub tenant: TenantId,
    pub user: UserId,
}

/// A worker's answer: the job, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErasureAnswer {
    Job(Job),
    /// The tenant has no trace of the user (no conversation they ever
    /// joined, no device): another tenant's user is not this tenant's.
    UnknownUser,
    Failed(String),
}

/// Where a running erasure is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErasureStep {
    /// Each conversation the user ever joined is erased by its writer;
    /// the step ends when none is left.
    Conversations,
    /// The tenant's reports that name the user are rewritten.
    Reports,
    /// The user's own rows and their keys, tokens and presence.
    User,
}

/// One job as `sb_erasures` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureRecord {
    pub tenant: TenantId,
    /// Who is erased; `None` once the job is done.
    pub user: Option<UserId>,
    pub step: ErasureStep,
    pub job: Job,
}

/// The job id of erasing `user` in `tenant`: 32 hex digits of SHA-256 over
/// both (each length-prefixed, so no two pairs share an input).
pub fn job_id(tenant: &TenantId, user: &UserId) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [tenant.as_str(), user.as_str()] {
        ctx.update(&(part.len() as u32).to_be_bytes());
        ctx.update(part.as_bytes());
    }
    let mut id = String::with_capacity(32);
    for b in &ctx.finish().as_ref()[..16] {
        let _ = write!(id, "{b:02x}");
    }
    id
}

/// Whether `id` has the shape of a job id (so that nothing else becomes
/// part of a key).
pub fn is_job_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn key(job_id: &str) -> String {
    format!("erase.{job_id}")
}

/// `sb_erasures`.
#[derive(Clone)]
pub struct Erasures {
    kv: kv::Store,
}

impl Erasures {
    pub async fn open(js: &jetstream::Context) -> Result<Self, BackboneError> {
        let kv = js
            .get_key_value(ERASURES_BUCKET)
            .await
            .map_err(|e| BackboneError::nats(format!("bucket {ERASURES_BUCKET}"), e))?;
        Ok(Self { kv })
    }

    /// The job and its revision, if there is one.
    pub async fn get(&self, job_id: &str) -> Result<Option<(ErasureRecord, u64)>, BackboneError> {
        if !is_job_id(job_id) {
            return Ok(None);
        }
        let entry = self
            .kv
            .entry(key(job_id))
            .await
            .map_err(|e| BackboneError::nats("reading an erasure job", e))?;
        match entry {
            Some(e) if e.operation == kv::Operation::Put => serde_json::from_slice(&e.value)
                .map(|r| Some((r, e.revision)))
                .map_err(BackboneError::encoding),
            _ => Ok(None),
        }
    }

    /// Writes the record if the job is still at `revision` (0: new).
    /// `Ok(false)` when another worker changed it first.
    pub async fn put(&self, record: &ErasureRecord, revision: u64) -> Result<bool, BackboneError> {
        let body = serde_json::to_vec(record).map_err(BackboneError::encoding)?;
        crate::kv_cas::write_if(&self.kv, &key(&record.job.job_id), body.into(), revision)
            .await
            .map_err(|source| BackboneError::Nats {
                context: "writing an erasure job".into(),
                source,
            })
    }

    /// The job for erasing `user`: the one running, or a new one (a job
    /// done before starts again, under a new pseudonym, harmlessly: what
    /// it erased is gone).
    pub async fn begin(
        &self,
        tenant: &TenantId,
        user: &UserId,
        pseudonym: &UserId,
    ) -> Result<ErasureRecord, BackboneError> {
        let id = job_id(tenant, user);
        for _ in 0..8 {
            let existing = self.get(&id).await?;
            if let Some((r, _)) = &existing
                && r.job.state == JobState::Running
            {
                return Ok(r.clone());
            }
            let now = Timestamp::now();
            let record = ErasureRecord {
                tenant: tenant.clone(),
                user: Some(user.clone()),
                step: ErasureStep::Conversations,
                job: Job {
                    job_id: id.clone(),
                    kind: JobKind::EraseUser,
                    state: JobState::Running,
                    created_at: now,
                    updated_at: now,
                    finished_at: None,
                    conversations_left: 0,
                    pseudonym: pseudonym.as_str().to_owned(),
                    error: None,
                },
            };
            if self
                .put(&record, existing.map_or(0, |(_, rev)| rev))
                .await?
            {
                return Ok(record);
            }
        }
        Err(BackboneError::Nats {
            context: "starting an erasure job".into(),
            source: crate::cause("the job kept changing under the request"),
        })
    }

    /// Every running job, with its revision.
    pub async fn running(&self) -> Result<Vec<(ErasureRecord, u64)>, BackboneError> {
        let keys: Vec<String> = match self.kv.keys().await {
            Ok(keys) => keys
                .try_collect()
                .await
                .map_err(|e| BackboneError::nats("listing erasure jobs", e))?,
            Err(e) => return Err(BackboneError::nats("listing erasure jobs", e)),
        };
        let mut out = Vec::new();
        for k in keys {
            let Some(id) = k.strip_prefix("erase.") else {
                continue;
            };
            if let Some((r, rev)) = self.get(id).await?
                && r.job.state == JobState::Running
            {
                out.push((r, rev));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_are_per_tenant_and_user() {
        let (a, b) = (TenantId::new("a").unwrap(), TenantId::new("b").unwrap());
        let alice = UserId::new("alice").unwrap();
        let id = job_id(&a, &alice);
        assert!(is_job_id(&id));
        assert_eq!(id, job_id(&a, &alice));
        assert_ne!(id, job_id(&b, &alice));
        // Length-prefixed: ("ab", "c") and ("a", "bc") differ.
        assert_ne!(
            job_id(&TenantId::new("ab").unwrap(), &UserId::new("c").unwrap()),
            job_id(&a, &UserId::new("bc").unwrap())
        );
        assert!(!is_job_id("erase.>"));
        assert!(!is_job_id(&id.to_uppercase()));
    }
}
