//! The CQL store's Prometheus metrics: every request by kind and outcome
//! and its latency, the batches sent again because their outcome was
//! unknown, and how many of the cluster's nodes the driver reaches. A
//! no-op unless the process installs an exporter.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ::metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};

pub const REQUESTS: &str = "switchboard_cql_requests_total";
pub const REQUEST_SECONDS: &str = "switchboard_cql_request_seconds";
pub const RESENDS: &str = "switchboard_cql_resends_total";
pub const NODES: &str = "switchboard_cql_nodes";

/// How often the reachable nodes are counted.
const NODES_EVERY: Duration = Duration::from_secs(5);

/// Registers the descriptions (`# HELP` lines).
pub fn describe() {
    describe_counter!(
        REQUESTS,
        Unit::Count,
        "CQL requests by kind (read, write, batch, fence_decide, fence_claim, fence_read, replay) and outcome (ok, timeout, unavailable, error)."
    );
    describe_histogram!(
        REQUEST_SECONDS,
        Unit::Seconds,
        "One CQL request, by kind, until the driver had its answer (retries and speculative executions included)."
    );
    describe_counter!(
        RESENDS,
        Unit::Count,
        "CQL batches and fence transactions sent again because their outcome was unknown (a timeout, a lost connection): a steady rate means the cluster is overloaded or partly down; commits wait until they land."
    );
    describe_gauge!(
        NODES,
        Unit::Count,
        "The CQL cluster's nodes the driver knows, by state: up (it holds a connection) or down."
    );
}

/// What a CQL request was for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Request {
    Read,
    Write,
    /// A commit's batch.
    Batch,
    FenceDecide,
    FenceClaim,
    /// The SERIAL read of a writer fence.
    FenceRead,
    /// A decided commit written again by the next claim.
    Replay,
}

impl Request {
    fn label(self) -> &'static str {
        match self {
            Request::Read => "read",
            Request::Write => "write",
            Request::Batch => "batch",
            Request::FenceDecide => "fence_decide",
            Request::FenceClaim => "fence_claim",
            Request::FenceRead => "fence_read",
            Request::Replay => "replay",
        }
    }
}

/// Records one request of `kind`, begun at `started`.
pub(crate) fn observe<T>(kind: Request, started: Instant, result: &Result<T, ExecutionError>) {
    let outcome = match result {
        Ok(_) => "ok",
        Err(e) => classify(e),
    };
    counter!(REQUESTS, "kind" => kind.label(), "outcome" => outcome).increment(1);
    histogram!(REQUEST_SECONDS, "kind" => kind.label()).record(started.elapsed().as_secs_f64());
}

/// Records the first page of a paged read (its later pages are fetched
/// as the stream is read, and not counted).
pub(crate) fn observe_pager<T, E>(kind: Request, started: Instant, result: &Result<T, E>) {
    let outcome = if result.is_ok() { "ok" } else { "error" };
    counter!(REQUESTS, "kind" => kind.label(), "outcome" => outcome).increment(1);
    histogram!(REQUEST_SECONDS, "kind" => kind.label()).record(started.elapsed().as_secs_f64());
}

/// A request of `kind` sent again after an unknown outcome.
pub(crate) fn resent(kind: Request) {
    counter!(RESENDS, "kind" => kind.label()).increment(1);
}

fn classify(e: &ExecutionError) -> &'static str {
    match e {
        ExecutionError::RequestTimeout(_) => "timeout",
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, _)) => match db {
            DbError::ReadTimeout { .. } | DbError::WriteTimeout { .. } => "timeout",
            DbError::Unavailable { .. } | DbError::Overloaded | DbError::IsBootstrapping => {
                "unavailable"
            }
            _ => "error",
        },
        ExecutionError::LastAttemptError(
            RequestAttemptError::BrokenConnectionError(_)
            | RequestAttemptError::UnableToAllocStreamId,
        )
        | ExecutionError::ConnectionPoolError(_)
        | ExecutionError::EmptyPlan => "unavailable",
        _ => "error",
    }
}

/// Counts the reachable nodes now, and every few seconds for as long as
/// the session lives.
pub(crate) fn watch_nodes(session: &Arc<Session>) {
    count_nodes(session);
    let weak: Weak<Session> = Arc::downgrade(session);
    // A store made outside a runtime (none in this project) has no watch.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(NODES_EVERY).await;
                let Some(session) = weak.upgrade() else {
                    return;
                };
                count_nodes(&session);
            }
        });
    }
}

fn count_nodes(session: &Session) {
    let state = session.get_cluster_state();
    let nodes = state.get_nodes_info();
    let up = nodes.iter().filter(|n| n.is_connected()).count();
    gauge!(NODES, "state" => "up").set(up as f64);
    gauge!(NODES, "state" => "down").set(nodes.len().saturating_sub(up) as f64);
}
