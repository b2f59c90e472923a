//! The previews stage's metrics, with their descriptions.

/// Links looked at, by outcome: `cached` (the tenant's card of the link
/// was in `sb_previews`), `fetched` (unfurled now, card or none),
/// `failed` (the fetch gave nothing: refused, too slow, not a page).
pub const PREVIEW_LINKS: &str = "switchboard_preview_links_total";

pub(crate) fn cached() {
    metrics::counter!(PREVIEW_LINKS, "outcome" => "cached").increment(1);
}

pub(crate) fn fetched() {
    metrics::counter!(PREVIEW_LINKS, "outcome" => "fetched").increment(1);
}

pub(crate) fn failed() {
    metrics::counter!(PREVIEW_LINKS, "outcome" => "failed").increment(1);
}

/// Jobs dropped because their tenant held its whole share of the stage
/// for 10 s.
pub const PREVIEW_JOBS_SHED: &str = "switchboard_preview_jobs_shed_total";

pub(crate) fn shed() {
    metrics::counter!(PREVIEW_JOBS_SHED).increment(1);
}

/// Registers the descriptions (`# HELP` lines).
pub fn describe_metrics() {
    metrics::describe_counter!(
        PREVIEW_LINKS,
        "Links of stored messages looked at by the previews stage, by outcome: cached, fetched, failed."
    );
    for outcome in ["cached", "fetched", "failed"] {
        metrics::counter!(PREVIEW_LINKS, "outcome" => outcome).absolute(0);
    }
    metrics::describe_counter!(
        PREVIEW_JOBS_SHED,
        "Link preview jobs dropped because their tenant held its whole share of the stage for 10 s."
    );
    metrics::counter!(PREVIEW_JOBS_SHED).absolute(0);
}
