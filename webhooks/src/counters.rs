//! The webhook dispatcher's metrics, with their descriptions.

/// Webhook deliveries of one event to one endpoint by outcome (v1.2):
/// `sent`, `retry` (tried again later), `dead_letter` (kept in
/// `SB_EVENTS_DEAD`).
pub const WEBHOOK_DELIVERIES: &str = "switchboard_webhook_deliveries_total";
/// How old events are when their delivery starts, in seconds.
pub const WEBHOOK_LAG: &str = "switchboard_webhook_lag_seconds";
/// Events the dispatcher holds, waiting in their conversation's lane.
pub const WEBHOOK_HELD: &str = "switchboard_webhook_events_held";

pub(crate) fn webhook_outcome(outcome: &'static str) {
    metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => outcome).increment(1);
}

pub(crate) fn webhook_lag(seconds: f64) {
    metrics::histogram!(WEBHOOK_LAG).record(seconds);
}

/// Events taken into (positive) or out of (negative) the lanes.
pub(crate) fn webhook_held(change: f64) {
    metrics::gauge!(WEBHOOK_HELD).increment(change);
}

/// Registers the descriptions (`# HELP` lines).
pub fn describe_metrics() {
    metrics::describe_counter!(
        WEBHOOK_DELIVERIES,
        "Webhook deliveries (v1.2) of one event to one endpoint by outcome: sent, retry, dead_letter."
    );
    // Every outcome from zero, so that a first dead letter is an increase
    // an alert sees, not a new series.
    for outcome in ["sent", "retry", "dead_letter"] {
        metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => outcome).absolute(0);
    }
    metrics::describe_histogram!(
        WEBHOOK_LAG,
        metrics::Unit::Seconds,
        "How old an event is when its webhook delivery starts (v1.2)."
    );
    metrics::describe_gauge!(
        WEBHOOK_HELD,
        "Events the webhook dispatcher holds, waiting in their conversation's lane (v1.2)."
    );
}
