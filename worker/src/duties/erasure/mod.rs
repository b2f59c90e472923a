//! Erasure of a user (v1.2): `DELETE /v1/admin/users/{user}` becomes a
//! job in `sb_erasures` (`records::erasures`), which the leader drives in
//! passes every `PASS`, a step at a time, each step safe to repeat:
//!
//! 1. **Conversations.** Every conversation the user ever joined (the
//!    store's `joined` index, those they left included) is erased by its
//!    own writer, asked by an `erase` maintenance request on its ingest
//!    partition, as archiving and expiry are (`conversation.rs`): the
//!    writer serves it between two batches, so no edit races it. The
//!    writer's last step takes the conversation off the user's `joined`
//!    list; the step ends when the list is empty. A conversation still
//!    listed is asked again once per `ASK_AGAIN` (a request lost with a
//!    writer, or one too large for one request, goes on).
//! 2. **Reports.** The tenant's reports that name the user (filed by
//!    them, about their messages, or resolved by them) are rewritten.
//! 3. **The user.** Their own rows (`Mutation::EraseUser`), then their
//!    keys in the key directory, push tokens, last seen, presence, push
//!    collapse marks and refused sends, each purged from its bucket's
//!    stream with its history, so no revision of them stays.
//!
//! The job then keeps no user id, nor the pseudonym. Every pass of a
//! running job closes the user's open connections (close code 4004,
//! through the session registry as any event of theirs), so a session
//! opened meanwhile is closed too; their tokens are the tenant's to stop
//! issuing: a connection opened after the job is done finds nothing of
//! theirs. What they do meanwhile in a conversation already erased
//! stays, and a conversation they are added to again is erased before
//! the last step. Everything is driven from the record:
//! kill -9 of any process at any point leaves a job that the next leader
//! continues from its step, and every step finds what is left.
//!
//! Media the user uploaded goes with the gateways' blob collector, which
//! removes uploads of erased users made before their erasure
//! (`gateway/src/media.rs`).

mod conversation;
mod feeds;
mod service;

use std::sync::Arc;
use std::time::Duration;

use switchboard_nats::envelope::{SessionsEnd, end_sessions_event};
use switchboard_nats::kv_key::part;
use switchboard_nats::records::erasures::{ErasureRecord, ErasureStep, Erasures};
use switchboard_protocol::jobs::JobState;
use switchboard_protocol::reports::ReportStatus;
use switchboard_protocol::{TenantId, Timestamp, UserId};
use switchboard_store::erasure::Erasure;
use switchboard_store::{ConversationKey, Mutation};
use tracing::Instrument;

use crate::ctx::Ctx;

pub(crate) use conversation::{ERASE_REQUEST, EraseRequest, serve as serve_request};
pub(crate) use service::serve as serve_gateways;

/// How often the leader advances the running jobs.
const PASS: Duration = Duration::from_secs(2);
/// How long a conversation still listed waits before it is asked again:
/// a writer asks for the rest of a conversation itself, so this is for
/// requests lost with a process; as long as the ingest streams' dedupe
/// window, so that no request is queued twice.
const ASK_AGAIN: Duration = Duration::from_secs(120);
/// Conversations one pass asks for, per job.
const PAGE: usize = 1000;
/// Reports read per page.
const REPORTS_PAGE: usize = 200;

/// Why a step stopped; the next pass tries again from the record.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    #[error(transparent)]
    Store(#[from] switchboard_store::StoreError),
    #[error(transparent)]
    Backbone(#[from] switchboard_nats::BackboneError),
    #[error(transparent)]
    Request(#[from] crate::duties::maintenance::RequestError),
    #[error("purging {subject}: {source}")]
    Purge {
        subject: String,
        #[source]
        source: async_nats::Error,
    },
}

pub(crate) async fn run(ctx: Arc<Ctx>) {
    let erasures = match Erasures::open(&ctx.js).await {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(error = %e, "erasure jobs cannot run: their bucket cannot be opened");
            return;
        }
    };
    let mut tick = tokio::time::interval(PASS);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !ctx.leader.holds() {
            continue;
        }
        let running = match erasures.running().await {
            Ok(running) => running,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the erasure jobs; the next pass tries again");
                continue;
            }
        };
        for (record, revision) in running {
            let span =
                tracing::info_span!("erasure", job = %record.job.job_id, step = ?record.step);
            let step = advance(&ctx, &erasures, record, revision).instrument(span.clone());
            if let Err(e) = step.await {
                span.in_scope(
                    || tracing::warn!(error = %e, "erasure step stopped; the next pass continues"),
                );
            }
        }
    }
}

/// One step of one job, recorded when it is done.
async fn advance(
    ctx: &Ctx,
    erasures: &Erasures,
    mut record: ErasureRecord,
    revision: u64,
) -> Result<(), StepError> {
    let Some(user) = record.user.clone() else {
        return Ok(());
    };
    let pseudonym = match UserId::new(record.job.pseudonym.clone()) {
        Ok(p) => p,
        Err(e) => {
            return fail(erasures, record, revision, format!("bad pseudonym: {e}")).await;
        }
    };
    let e = Erasure {
        user: &user,
        pseudonym: &pseudonym,
    };
    end_sessions(ctx, &record.tenant, &user).await;
    match record.step {
        ErasureStep::Conversations => {
            let left = ctx.store.joined(&record.tenant, &user, None, PAGE).await?;
            if left.is_empty() {
                record.step = ErasureStep::Reports;
            } else {
                let window = Timestamp::now().unix_ms() as u128 / ASK_AGAIN.as_millis().max(1);
                for c in &left {
                    let key = ConversationKey::new(record.tenant.clone(), c.clone());
                    conversation::request(ctx, &key, &record, window).await?;
                }
            }
            record.job.conversations_left = left.len() as u64;
        }
        ErasureStep::Reports => {
            rewrite_reports(ctx, &record, e).await?;
            record.step = ErasureStep::User;
        }
        ErasureStep::User => {
            // Added to a conversation since its step: that one first.
            if !ctx
                .store
                .joined(&record.tenant, &user, None, 1)
                .await?
                .is_empty()
            {
                record.step = ErasureStep::Conversations;
                record.job.updated_at = Timestamp::now();
                erasures.put(&record, revision).await?;
                return Ok(());
            }
            ctx.store
                .commit(vec![Mutation::EraseUser {
                    tenant: record.tenant.clone(),
                    user: user.clone(),
                }])
                .await?;
            purge_buckets(ctx, &record.tenant, &user).await?;
            feeds::purge(ctx, &record.tenant, &user)
                .await
                .map_err(|(subject, source)| StepError::Purge { subject, source })?;
            let now = Timestamp::now();
            // Nothing links the tombstones to the job from now on.
            record.user = None;
            record.job.pseudonym = String::new();
            record.job.state = JobState::Done;
            record.job.finished_at = Some(now);
            tracing::info!("erasure done");
            crate::metrics::erasure_ended("done");
        }
    }
    record.job.updated_at = Timestamp::now();
    // Another leader's write first: it recorded the same step's outcome,
    // or a later one; the next pass reads it.
    erasures.put(&record, revision).await?;
    Ok(())
}

/// Closes the user's connections on every gateway. A failure is only
/// logged: the next pass asks again.
async fn end_sessions(ctx: &Ctx, tenant: &TenantId, user: &UserId) {
    let event = match end_sessions_event(SessionsEnd::Erased) {
        Ok(event) => event,
        Err(e) => {
            tracing::warn!(error = %e, "cannot encode the end of the user's sessions");
            return;
        }
    };
    let users = [user.clone()];
    if let Err(e) = ctx.sessions.publish(tenant, &users, &event).await {
        tracing::warn!(error = %e, "ending the user's sessions failed; the next pass tries again");
    }
}

async fn fail(
    erasures: &Erasures,
    mut record: ErasureRecord,
    revision: u64,
    why: String,
) -> Result<(), StepError> {
    tracing::error!(%why, "erasure failed");
    crate::metrics::erasure_ended("failed");
    record.job.state = JobState::Failed;
    record.job.error = Some(why);
    record.job.finished_at = Some(Timestamp::now());
    erasures.put(&record, revision).await?;
    Ok(())
}

/// Every report of the tenant that names the user, rewritten.
async fn rewrite_reports(
    ctx: &Ctx,
    record: &ErasureRecord,
    e: Erasure<'_>,
) -> Result<(), StepError> {
    let now = Timestamp::now();
    for status in [ReportStatus::Open, ReportStatus::Resolved] {
        let mut before = None;
        loop {
            let page = ctx
                .store
                .reports(&record.tenant, status, before, REPORTS_PAGE)
                .await?;
            let full = page.len() == REPORTS_PAGE;
            before = page.last().map(|r| r.report_id);
            let mut changed = Vec::new();
            for mut r in page {
                if e.report(&mut r, now) {
                    changed.push(Mutation::PutReport {
                        tenant: record.tenant.clone(),
                        report: Box::new(r),
                    });
                }
            }
            ctx.store.commit(changed).await?;
            if !full {
                break;
            }
        }
    }
    Ok(())
}

/// The user's keys in every bucket that keeps some under their name,
/// purged from the bucket's stream with their history (a KV delete would
/// leave the old revisions and a marker naming the key).
async fn purge_buckets(
    ctx: &Ctx,
    tenant: &switchboard_protocol::TenantId,
    user: &UserId,
) -> Result<(), StepError> {
    let (t, u) = (part(tenant.as_str()), part(user.as_str()));
    let subjects = [
        ("sb_keys", format!("{t}.{u}")),
        ("sb_keys", format!("{t}.{u}.>")),
        ("sb_push_tokens", format!("{t}.{u}")),
        ("sb_last_seen", format!("{t}.{u}")),
        ("sb_presence", format!("{t}.{u}.>")),
        ("sb_push_collapse", format!("{t}.{u}.>")),
        ("sb_refused", format!("{t}.*.{u}.>")),
    ];
    for (bucket, key) in subjects {
        let subject = format!("$KV.{bucket}.{key}");
        let purge = async {
            let stream = ctx.js.get_stream(format!("KV_{bucket}")).await?;
            stream.purge().filter(subject.clone()).await?;
            Ok::<_, async_nats::Error>(())
        };
        purge.await.map_err(|source| StepError::Purge {
            subject: subject.clone(),
            source,
        })?;
    }
    // Their messages waiting for their time (v1.2).
    switchboard_nats::scheduled::Schedules::new(ctx.js.clone())
        .forget(tenant, user)
        .await
        .map_err(|e| StepError::Purge {
            subject: "sb.sched.*".to_owned(),
            source: Box::new(e),
        })?;
    Ok(())
}
