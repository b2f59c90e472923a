//! The worker's Prometheus metrics; a no-op unless the process installs an
//! exporter. Labels are bounded: partitions (the deployment's count) and
//! event routes.

use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};

pub const CONSUMER_LAG: &str = "switchboard_writer_consumer_lag";
pub const BATCH_COMMANDS: &str = "switchboard_writer_batch_commands";
pub const DELIVERIES: &str = "switchboard_writer_deliveries_total";
pub const PARTITIONS_HELD: &str = "switchboard_writer_partitions_held";
pub const INBOX_ENTRIES: &str = "switchboard_writer_inbox_entries";
pub const INBOX_EXPIRED: &str = "switchboard_writer_inbox_expired_total";
pub const PARKED: &str = "switchboard_writer_parked_total";
pub const REPORTS_OPEN: &str = "switchboard_reports_open";
pub const MESSAGES_EXPIRED: &str = "switchboard_writer_messages_expired_total";
pub const ERASURE_CONVERSATIONS: &str = "switchboard_erasure_conversations_total";
pub const ERASURES: &str = "switchboard_erasures_total";
pub const SCHEDULED: &str = "switchboard_scheduled_messages_total";
pub const EVENTS_LOST: &str = "switchboard_webhook_events_lost_total";
pub const INDEX_OPS_LOST: &str = "switchboard_index_ops_lost_total";

/// Registers the descriptions (`# HELP` lines).
pub fn describe() {
    describe_gauge!(
        CONSUMER_LAG,
        "Ingest messages waiting for a partition's writer, as its consumer last reported."
    );
    describe_histogram!(
        BATCH_COMMANDS,
        Unit::Count,
        "Commands a writer took from its partition at once."
    );
    describe_counter!(
        DELIVERIES,
        "Stored messages and updates fanned out: per recipient on write (`users`), once per conversation on read (`conversation`)."
    );
    describe_gauge!(PARTITIONS_HELD, "Ingest partitions this worker writes.");
    describe_counter!(
        INDEX_OPS_LOST,
        "Search index changes (v1.2) a writer could not store on SB_INDEX: the index gets them at its next rebuild."
    );
    describe_counter!(
        EVENTS_LOST,
        "Outbound events (v1.2) a writer could not store on SB_EVENTS after its commit: their webhooks never get them."
    );
    describe_counter!(
        SCHEDULED,
        "Scheduled messages that came due, by outcome: sent, or refused at their time."
    );
    describe_gauge!(
        INBOX_ENTRIES,
        "Undelivered inbox entries (one per message and device that has not acked it), as the leader's last whole expiry sweep left them."
    );
    describe_gauge!(
        REPORTS_OPEN,
        "Reports waiting for a tenant admin, per tenant, as the leader last counted them."
    );
    describe_counter!(
        MESSAGES_EXPIRED,
        "Messages gone past their conversation's retention or disappearing time."
    );
    describe_counter!(
        ERASURE_CONVERSATIONS,
        "Conversations a writer finished erasing a user from."
    );
    describe_counter!(
        ERASURES,
        "Erasure jobs that ended, by outcome (done, failed)."
    );
    describe_counter!(
        PARKED,
        "Commands that could not be applied, also alone, and were set aside in SB_PARKED."
    );
    describe_counter!(
        INBOX_EXPIRED,
        "Inbox entries the expiry sweep removed: devices away longer than the inbox lifetime."
    );
}

pub(crate) fn consumer_lag(partition: u16, pending: u64) {
    gauge!(CONSUMER_LAG, "partition" => partition.to_string()).set(pending as f64);
}

pub(crate) fn index_ops_lost(n: usize) {
    counter!(INDEX_OPS_LOST).increment(n as u64);
}

pub(crate) fn event_lost() {
    counter!(EVENTS_LOST).increment(1);
}

pub(crate) fn scheduled_sent() {
    counter!(SCHEDULED, "outcome" => "sent").increment(1);
}

pub(crate) fn scheduled_refused() {
    counter!(SCHEDULED, "outcome" => "refused").increment(1);
}

pub(crate) fn batch_taken(commands: usize) {
    histogram!(BATCH_COMMANDS).record(commands as f64);
}

pub(crate) fn delivered(route: &'static str, n: usize) {
    counter!(DELIVERIES, "route" => route).increment(n as u64);
}

pub(crate) fn partitions_held(n: usize) {
    gauge!(PARTITIONS_HELD).set(n as f64);
}

pub(crate) fn inbox_entries(n: usize) {
    gauge!(INBOX_ENTRIES).set(n as f64);
}

pub(crate) fn open_reports(tenant: &switchboard_protocol::TenantId, n: u64) {
    gauge!(REPORTS_OPEN, "tenant" => tenant.as_str().to_owned()).set(n as f64);
}

pub(crate) fn messages_expired(n: usize) {
    counter!(MESSAGES_EXPIRED).increment(n as u64);
}

pub(crate) fn inbox_expired(n: usize) {
    counter!(INBOX_EXPIRED).increment(n as u64);
}

pub(crate) fn conversation_erased() {
    counter!(ERASURE_CONVERSATIONS).increment(1);
}

pub(crate) fn erasure_ended(outcome: &'static str) {
    counter!(ERASURES, "outcome" => outcome).increment(1);
}

pub(crate) fn parked() {
    counter!(PARKED).increment(1);
}
