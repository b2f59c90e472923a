//! Deploys under way in this process's deploy service, and the reports of
//! the finished ones: what `GET /v1/admin/plugins/{hook}/deploys/{id}`
//! shows. A deploy compiles outside the admin's request (a JavaScript
//! engine takes tens of seconds), so its progress is kept here and every
//! process's status answer carries its own deploys of the hook asked
//! about (`registry::ProcessStatus`).
//!
//! Bounded: at most `deploy_queue` deploys under way (queued for a
//! compiler or compiling) and `deploy_queue_per_tenant` of one tenant;
//! finished ones are reported for `deploy_report_ms`, at most
//! `deploy_reports` of them, oldest forgotten first. A deploy whose
//! worker stops is forgotten with it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchboard_protocol::error::ErrorBody;
use switchboard_protocol::{TenantId, Timestamp};
use tokio::sync::watch;

use crate::deploy_error::{DeployError, Refusal, RefusalKind};
use crate::hook::Hook;
use crate::limits::PluginLimits;
use crate::record::VersionEntry;

/// Where a deploy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeployState {
    /// Accepted; reading the upload, or waiting for a free compiler.
    Queued,
    /// Compiling (or loading its precompiled code) and making the trial
    /// call.
    Compiling,
    /// Stored and made the hook's version: every process is activating
    /// it.
    Stored,
    /// Every process that answered runs it.
    Active,
    /// Refused or failed: `error` says why; nothing was activated.
    Failed,
}

impl DeployState {
    pub fn is_final(self) -> bool {
        matches!(self, Self::Stored | Self::Active | Self::Failed)
    }
}

/// A process's view of a deploy's version: whether it runs it yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Running {
    pub process: String,
    pub running: bool,
    /// Why this process cannot run it (its hook's failure policy answers
    /// there meanwhile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_error: Option<String>,
}

/// A deploy's progress, as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeployProgress {
    /// The deploy's id (`Location: /v1/admin/plugins/{hook}/deploys/{id}`).
    pub id: String,
    pub hook: Hook,
    /// Whether it deploys the hook's shadow rather than its active version.
    pub shadow: bool,
    pub state: DeployState,
    /// The component's digest and size, once its upload was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// How its code was made, once it was: `compiled`, `precompiled`
    /// (loaded from `sb_plugin_compiled`) or `cached` (compiled before by
    /// this worker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub by: String,
    pub started_at: Timestamp,
    pub updated_at: Timestamp,
    /// The worker carrying it out.
    pub process: String,
    /// The version it made, once stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<VersionEntry>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    /// Once stored: each gateway and worker that answered within a
    /// moment, and whether it runs the version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<Running>,
}

/// What a new deploy is.
pub(crate) struct Start {
    pub id: String,
    pub tenant: TenantId,
    pub hook: Hook,
    pub shadow: bool,
    pub by: String,
    pub process: String,
}

/// One deploy under way or finished.
pub(crate) struct Job {
    pub tenant: TenantId,
    progress: watch::Sender<DeployProgress>,
}

impl Job {
    pub(crate) fn progress(&self) -> DeployProgress {
        self.progress.borrow().clone()
    }

    pub(crate) fn update(&self, change: impl FnOnce(&mut DeployProgress)) {
        self.progress.send_modify(|p| {
            change(p);
            p.updated_at = Timestamp::now();
        });
    }
}

/// This process's deploys.
pub(crate) struct DeployJobs {
    queue: usize,
    queue_per_tenant: usize,
    reports: usize,
    report_for: Duration,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    jobs: HashMap<String, Arc<Job>>,
    /// The finished ones, oldest first, with when they finished.
    finished: VecDeque<(Instant, String)>,
}

impl DeployJobs {
    pub(crate) fn new(limits: &PluginLimits) -> Self {
        Self {
            queue: limits.deploy_queue,
            queue_per_tenant: limits.deploy_queue_per_tenant,
            reports: limits.deploy_reports,
            report_for: limits.deploy_report,
            table: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a new deploy, unless this process has `deploy_queue` under
    /// way, or the tenant `deploy_queue_per_tenant`.
    pub(crate) fn start(&self, start: Start, now: Instant) -> Result<Arc<Job>, DeployError> {
        let mut table = self.lock();
        self.forget_old(&mut table, now);
        if table.jobs.contains_key(&start.id) {
            return Err(DeployError::Refused(Refusal::new(
                RefusalKind::Conflict,
                format!("a deploy {} exists already", start.id),
            )));
        }
        let under_way = || {
            table
                .jobs
                .values()
                .filter(|j| !j.progress.borrow().state.is_final())
        };
        if under_way().count() >= self.queue {
            return Err(DeployError::Refused(Refusal::new(
                RefusalKind::Unavailable,
                format!(
                    "this worker has {} deploys under way (deploy_queue); retry in a moment",
                    self.queue
                ),
            )));
        }
        if under_way().filter(|j| j.tenant == start.tenant).count() >= self.queue_per_tenant {
            return Err(DeployError::Refused(Refusal::new(
                RefusalKind::RateLimited,
                format!(
                    "this tenant has {} deploys under way on this worker (deploy_queue_per_tenant); retry when one is over",
                    self.queue_per_tenant
                ),
            )));
        }
        let at = Timestamp::now();
        let job = Arc::new(Job {
            tenant: start.tenant,
            progress: watch::channel(DeployProgress {
                id: start.id.clone(),
                hook: start.hook,
                shadow: start.shadow,
                state: DeployState::Queued,
                digest: None,
                size: None,
                code: None,
                by: start.by,
                started_at: at,
                updated_at: at,
                process: start.process,
                version: None,
                error: None,
                processes: Vec::new(),
            })
            .0,
        });
        table.jobs.insert(start.id, job.clone());
        Ok(job)
    }

    /// Ends `job`: stored with its version, or failed with why.
    pub(crate) fn finish(
        &self,
        job: &Job,
        outcome: &Result<VersionEntry, DeployError>,
        error: impl FnOnce(&DeployError) -> ErrorBody,
        now: Instant,
    ) {
        job.update(|p| match outcome {
            Ok(version) => {
                p.state = DeployState::Stored;
                p.version = Some(version.clone());
            }
            Err(e) => {
                p.state = DeployState::Failed;
                p.error = Some(error(e));
            }
        });
        let mut table = self.lock();
        let id = job.progress.borrow().id.clone();
        table.finished.push_back((now, id));
        self.forget_old(&mut table, now);
    }

    /// The deploys of the tenant's hook this process knows, newest first.
    pub(crate) fn of(&self, tenant: &TenantId, hook: Hook) -> Vec<DeployProgress> {
        let mut table = self.lock();
        self.forget_old(&mut table, Instant::now());
        let mut found: Vec<DeployProgress> = table
            .jobs
            .values()
            .filter(|j| j.tenant == *tenant)
            .map(|j| j.progress())
            .filter(|p| p.hook == hook)
            .collect();
        found.sort_by_key(|p| std::cmp::Reverse(p.started_at));
        found
    }

    /// Forgets finished deploys older than `deploy_report_ms`, and the
    /// oldest past `deploy_reports`.
    fn forget_old(&self, table: &mut Table, now: Instant) {
        while let Some((at, _)) = table.finished.front() {
            let expired = now.saturating_duration_since(*at) >= self.report_for;
            if !expired && table.finished.len() <= self.reports {
                break;
            }
            if let Some((_, id)) = table.finished.pop_front() {
                table.jobs.remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn jobs(queue: usize, per_tenant: usize, reports: usize) -> DeployJobs {
        DeployJobs::new(&PluginLimits {
            deploy_queue: queue,
            deploy_queue_per_tenant: per_tenant,
            deploy_reports: reports,
            deploy_report: Duration::from_secs(60),
            ..PluginLimits::default()
        })
    }

    fn start(id: &str, tenant: &str) -> Start {
        Start {
            id: id.into(),
            tenant: TenantId::new(tenant).unwrap(),
            hook: Hook::Moderation,
            shadow: false,
            by: "root".into(),
            process: "worker-1".into(),
        }
    }

    fn kind(e: DeployError) -> RefusalKind {
        e.kind()
    }

    fn stored() -> Result<VersionEntry, DeployError> {
        Ok(VersionEntry {
            revision: 1,
            record: None,
        })
    }

    fn body(e: &DeployError) -> ErrorBody {
        ErrorBody {
            code: e.kind().code(),
            message: e.to_string(),
            retry_after_ms: None,
        }
    }

    #[test]
    fn deploys_under_way_are_bounded_per_process_and_per_tenant() {
        let now = Instant::now();
        let table = jobs(3, 2, 10);
        let a1 = table.start(start("a1", "acme"), now).unwrap();
        table.start(start("a2", "acme"), now).unwrap();
        // The tenant's third is one past its share.
        let third = table.start(start("a3", "acme"), now).err().unwrap();
        assert_eq!(kind(third), RefusalKind::RateLimited);
        // Another tenant takes the last place of the process...
        table.start(start("g1", "globex"), now).unwrap();
        // ...after which everyone waits.
        let full = table.start(start("i1", "initech"), now).err().unwrap();
        assert_eq!(kind(full), RefusalKind::Unavailable);
        // A finished deploy frees its place, and is still reported.
        table.finish(&a1, &stored(), body, now);
        table.start(start("a3", "acme"), now).unwrap();
        let reported = table.of(&TenantId::new("acme").unwrap(), Hook::Moderation);
        assert_eq!(reported.len(), 3);
        assert!(
            reported
                .iter()
                .any(|p| p.id == "a1" && p.state == DeployState::Stored)
        );
        // An id is used once.
        let again = table.start(start("a1", "acme"), now).err().unwrap();
        assert_eq!(kind(again), RefusalKind::Conflict);
    }

    #[test]
    fn finished_reports_are_kept_for_their_time_and_count() {
        let now = Instant::now();
        let table = jobs(10, 10, 2);
        let acme = TenantId::new("acme").unwrap();
        for id in ["r1", "r2", "r3"] {
            let job = table.start(start(id, "acme"), now).unwrap();
            let failed = Err(DeployError::NotDeployed);
            table.finish(&job, &failed, body, now);
        }
        // The oldest past `deploy_reports` is forgotten.
        let ids: Vec<String> = table
            .of(&acme, Hook::Moderation)
            .into_iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(ids.len(), 2, "{ids:?}");
        assert!(!ids.contains(&"r1".to_owned()));
        let failed = table.of(&acme, Hook::Moderation).remove(0);
        assert_eq!(failed.state, DeployState::Failed);
        assert_eq!(
            failed.error.unwrap().code,
            switchboard_protocol::ErrorCode::NotFound
        );
        // All are forgotten once `deploy_report_ms` has passed, and only
        // the tenant's own hook is ever listed.
        let under_way = table.start(start("u1", "acme"), now).unwrap();
        table
            .lock()
            .finished
            .iter_mut()
            .for_each(|(at, _)| *at = now.checked_sub(Duration::from_secs(61)).unwrap_or(now));
        let left = table.of(&acme, Hook::Moderation);
        assert_eq!(left.len(), 1, "the one under way stays");
        assert_eq!(left[0].id, "u1");
        assert!(table.of(&acme, Hook::FanOut).is_empty());
        assert!(
            table
                .of(&TenantId::new("globex").unwrap(), Hook::Moderation)
                .is_empty()
        );
        drop(under_way);
    }
}
