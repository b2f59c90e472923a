//! Reports (v1.2): `POST /v1/conversations/{id}/messages/{message_id}/reports`
//! (members), and for tenant admins `GET /v1/admin/reports` and
//! `POST /v1/admin/reports/{report_id}/resolve`. A report is a command
//! the conversation's writer checks and stores; a resolution goes to the
//! same writer, which carries its action out as the matching command
//! would (a deletion, a ban) and closes the report.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_nats::envelope::{Command, ReportCommand, ResolveCommand};
use switchboard_plugin_host::{Hook, Moderation, ModerationInput};
use switchboard_protocol::reports::{
    Report, ReportAction, ReportCreated, ReportList, ReportRequest, ReportStatus, ResolveReport,
};
use switchboard_protocol::{ConversationId, ErrorCode, MessageId, UserId};

use super::conversations::done;
use super::extract::{Admin, JsonBody, PathParams, Shared};
use super::openapi::Operation;
use super::roles::actor;
use crate::auth::Identity;
use crate::error::ApiError;

/// Reports on one page of the list, by default and at most.
const PAGE: usize = 50;
const MAX_PAGE: usize = 200;

/// `POST /v1/conversations/{id}/messages/{message_id}/reports`
pub(super) fn create_op() -> Operation {
    Operation::post("Report a message")
        .describe("Members report a message of the conversation to the tenant's admins (a system message: 409), with a `reason` and an optional `note` (at most 1000 characters). The report keeps the message as it was (not ciphertext). At most `reports_per_minute` per user (10 by default; 429 past it).")
        .path::<ConversationId>("id", "The conversation.")
        .path::<MessageId>("message_id", "The message.")
        .json_body::<ReportRequest>()
        .reply::<ReportCreated>(201, "The report's id.")
        .errors(&[400, 404, 409, 429])
}

pub(super) async fn create(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<(ConversationId, MessageId)>,
    JsonBody(body): JsonBody<ReportRequest>,
) -> Result<(StatusCode, Json<ReportCreated>), ApiError> {
    let (conversation, message_id) = path.get()?;
    body.check().map_err(ApiError::invalid)?;
    gw.rates.report(&id)?;
    let by = actor(&gw, &id, conversation.clone())?;
    let report_id = by.command_id;
    let command = Command::Report(ReportCommand {
        by,
        message_id,
        reason: body.reason,
        note: body.note,
    });
    // `report.created` for webhooks comes from the writer, with the
    // stored report (`worker/src/writer/webhook_events.rs`).
    done(gw.run_command(command).await?)?;
    tokio::spawn(review(gw.clone(), id, report_id));
    Ok((StatusCode::CREATED, Json(ReportCreated { report_id })))
}

/// Who resolves the reports the moderation plugin rejects: what a
/// resolution's `resolved_by` says.
pub(crate) const REVIEWER: &str = "moderation-plugin";

/// The tenant's moderation plugin on a new report, if it asked to be
/// consulted (`review_reports = "true"` in its configuration): one
/// ordinary moderation call on the message as reported, within the
/// plugin's limits. A rejection resolves the report with
/// `delete_message` by [`REVIEWER`], through the conversation's writer
/// as an admin's resolution goes; anything else (allowed, rewritten,
/// failed, ciphertext) leaves it open for the tenant's admins.
async fn review(gw: Shared, reporter: Identity, report_id: MessageId) {
    let tenant = &reporter.tenant;
    if !gw.plugins.wants(tenant, Hook::Moderation) {
        return;
    }
    let report = match gw.store.report(tenant, report_id).await {
        Ok(Some(report)) => report,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(error = %e, "a report was not reviewed: it cannot be read");
            return;
        }
    };
    let Some((message, content)) = report
        .message
        .as_ref()
        .and_then(|m| m.content.as_ref().map(|c| (m, c)))
    else {
        return;
    };
    let conversation = &report.conversation_id;
    let Ok((kind, member_count)) = gw
        .shapes
        .get(&*gw.store, tenant, conversation, &reporter.user)
        .await
    else {
        return;
    };
    let options = message.send_options();
    let input = ModerationInput {
        tenant,
        conversation_id: conversation,
        kind,
        member_count,
        sender: &message.sender_id,
        content,
        options: &options,
    };
    let limits = &gw.config.limits.content;
    let Some(Moderation::Reject(reason)) = gw.plugins.review_report(&input, limits) else {
        return;
    };
    let resolved = async {
        let reviewer = Identity {
            user: UserId::new(REVIEWER).map_err(|e| ApiError::invalid(e.to_string()))?,
            admin: true,
            ..reporter.clone()
        };
        let command = Command::ResolveReport(ResolveCommand {
            by: actor(&gw, &reviewer, conversation.clone())?,
            report_id,
            message_id: report.message_id,
            action: ReportAction::DeleteMessage,
        });
        done(gw.run_command(command).await?)
    };
    match resolved.await {
        Ok(_) => tracing::info!(%report_id, %reason, "the moderation plugin resolved a report"),
        Err(e) => {
            tracing::warn!(%report_id, error = %e.message, "the moderation plugin's resolution failed")
        }
    }
}

/// The query of `GET /v1/admin/reports`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct ListQuery {
    /// `open` (the default) or `resolved`.
    #[serde(default)]
    status: ReportStatus,
    /// Reports per page: 50 when absent; at least 1, larger values are
    /// capped at 200.
    limit: Option<usize>,
    /// Where the previous page ended (its `next_cursor`).
    #[schemars(regex(pattern = r"^[0-9]{1,19}$"))]
    cursor: Option<String>,
}

/// `GET /v1/admin/reports`
pub(super) fn list_op() -> Operation {
    Operation::get("The tenant's reports")
        .describe("Tenant admins only (403 otherwise). `status`: `open` (the default) or `resolved`; newest first, `limit` per page (50 by default, at most 200), the next page from `next_cursor`.")
        .query_fields::<ListQuery>()
        .reply::<ReportList>(200, "A page of reports.")
        .errors(&[400, 403])
}

pub(super) async fn list(
    State(gw): State<Shared>,
    Admin(id): Admin,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<ReportList>, ApiError> {
    let Query(query) = query?;
    let limit = query.limit.unwrap_or(PAGE).clamp(1, MAX_PAGE);
    let before = match query.cursor.as_deref() {
        Some(c) => Some(
            c.parse::<MessageId>()
                .map_err(|_| ApiError::invalid("cursor is not one this list gave"))?,
        ),
        None => None,
    };
    let reports: Vec<Report> = gw
        .store
        .reports(&id.tenant, query.status, before, limit)
        .await?;
    let next_cursor = (reports.len() == limit)
        .then(|| reports.last().map(|r| r.report_id.to_string()))
        .flatten();
    Ok(Json(ReportList {
        reports,
        next_cursor,
    }))
}

/// `POST /v1/admin/reports/{report_id}/resolve`
pub(super) fn resolve_op() -> Operation {
    Operation::post("Resolve a report")
        .describe("Tenant admins only (403 otherwise). `dismiss` closes it; `delete_message` deletes the message (the members get `message_updated` with `deleted_at`); `ban_sender` bans its sender from the conversation until lifted (`member_banned`; 403 when the sender is an owner, and the report stays open). A resolved report stays as it was: resolving it again changes nothing.")
        .path::<MessageId>("report_id", "The report.")
        .json_body::<ResolveReport>()
        .reply::<Report>(200, "The report, resolved.")
        .errors(&[403, 404])
}

pub(super) async fn resolve(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<MessageId>,
    JsonBody(body): JsonBody<ResolveReport>,
) -> Result<Json<Report>, ApiError> {
    let report_id = path.get()?;
    let no_such = || ApiError::new(ErrorCode::NotFound, "no such report");
    let report = gw
        .store
        .report(&id.tenant, report_id)
        .await?
        .ok_or_else(no_such)?;
    let command = Command::ResolveReport(ResolveCommand {
        by: actor(&gw, &id, report.conversation_id.clone())?,
        report_id,
        message_id: report.message_id,
        action: body.action,
    });
    done(gw.run_command(command).await?)?;
    let report = gw
        .store
        .report(&id.tenant, report_id)
        .await?
        .ok_or_else(no_such)?;
    Ok(Json(report))
}
