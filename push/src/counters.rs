//! The push pipeline's metrics, with their descriptions.

/// Pushes to one device by outcome: `sent`, `token_gone` (the provider
/// called the token dead; it is forgotten), `retry` (tried again later),
/// `dead_letter` (failed for good, kept in `SB_PUSH_DEAD`).
pub const PUSH_JOBS: &str = "switchboard_push_jobs_total";

/// Message jobs that queued no push because their tenant had
/// `tenant_max_queued` sends waiting already (its endpoints are slow).
pub const PUSH_MESSAGES_SHED: &str = "switchboard_push_messages_shed_total";

/// Registers the descriptions (`# HELP` lines).
pub fn describe_metrics() {
    metrics::describe_counter!(
        PUSH_JOBS,
        "Pushes to one device by outcome: sent, token_gone, retry, dead_letter."
    );
    // Every outcome from zero, so that a first dead letter is an increase
    // an alert sees, not a new series.
    for outcome in ["sent", "token_gone", "retry", "dead_letter"] {
        metrics::counter!(PUSH_JOBS, "outcome" => outcome).absolute(0);
    }
    metrics::describe_counter!(
        PUSH_MESSAGES_SHED,
        "Stored messages that queued no push because their tenant had tenant_max_queued pushes waiting."
    );
    metrics::counter!(PUSH_MESSAGES_SHED).absolute(0);
}
