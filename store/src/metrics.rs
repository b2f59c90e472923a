//! The store's Prometheus metrics (the embedded store's group commit);
//! a no-op unless the process installs an exporter.

use metrics::{Unit, describe_histogram, histogram};

pub const COMMIT_JOBS: &str = "switchboard_store_commit_jobs";
pub const COMMIT_SECONDS: &str = "switchboard_store_commit_seconds";

/// Registers the descriptions (`# HELP` lines).
pub fn describe() {
    describe_histogram!(
        COMMIT_JOBS,
        Unit::Count,
        "Commits (a writer batch, a receipt window's marks, ...) that one group commit made durable together."
    );
    describe_histogram!(
        COMMIT_SECONDS,
        Unit::Seconds,
        "One group commit, from applying its jobs to the journal's sync."
    );
}

pub(crate) fn group_committed(jobs: usize, took: std::time::Duration) {
    histogram!(COMMIT_JOBS).record(jobs as f64);
    histogram!(COMMIT_SECONDS).record(took.as_secs_f64());
}
