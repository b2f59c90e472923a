//! The store's Prometheus metrics: commits, whichever the backend (the
//! embedded store's group commit, Scylla's logged batch); a no-op unless
//! the process installs an exporter.

use metrics::{Unit, describe_histogram, histogram};

pub const COMMIT_JOBS: &str = "switchboard_store_commit_jobs";
pub const COMMIT_SECONDS: &str = "switchboard_store_commit_seconds";

/// Registers the descriptions (`# HELP` lines).
pub fn describe() {
    describe_histogram!(
        COMMIT_JOBS,
        Unit::Count,
        "Commits (a writer batch, a receipt window's marks, ...) made durable together: a group commit of the embedded store; always 1 on Scylla."
    );
    describe_histogram!(
        COMMIT_SECONDS,
        Unit::Seconds,
        "One durable commit: the embedded store's group, its journal sync included; Scylla's batch until a quorum took it."
    );
}

/// One commit of `jobs` made durable together, taking `took` (every
/// backend records its commits here).
pub fn group_committed(jobs: usize, took: std::time::Duration) {
    histogram!(COMMIT_JOBS).record(jobs as f64);
    histogram!(COMMIT_SECONDS).record(took.as_secs_f64());
}
