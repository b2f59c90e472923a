//! The tenant admin API for plugins (F22, docs/protocol.md): list, remove and
//! roll back the tenant's plugin for each hook, its shadow, replays over
//! history (deploys: `plugin_deploys.rs`). Only tokens with `role:
//! "admin"` may call it (`Admin`, checked from the head before any
//! upload is read), and only for their own tenant.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use switchboard_plugin_host::deploy::{Listing, ShadowListing, VersionEntry};
use switchboard_plugin_host::host::{CallError, Verdict};
use switchboard_plugin_host::registry::Slot;
use switchboard_plugin_host::{Hook, ModerationInput};
use switchboard_protocol::{Content, ConversationId, ErrorCode, MessageId, UserId};
use switchboard_store::HistoryQuery;

use super::extract::Shared;
use super::extract::{Admin, JsonBody, PathParam, PathParams};
use super::openapi::Operation;
use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;

/// How long a change waits to be running on this gateway before the
/// response (every other process follows within about the same time).
const CONVERGE_WAIT: Duration = Duration::from_secs(5);

/// A hook named in the path; one that does not exist is not found.
impl PathParam for Hook {
    type Raw = String;

    fn from_path(raw: String) -> Result<Self, ApiError> {
        Hook::parse(&raw).ok_or_else(|| {
            ApiError::new(
                ErrorCode::NotFound,
                format!("no hook {raw:?}; the hooks are moderation, edit_policy and fan_out"),
            )
        })
    }
}

/// `GET /v1/admin/plugins/{hook}`
pub(super) fn list_op() -> Operation {
    Operation::get("The hook's active version and version list")
        .describe("Admin role.")
        .path::<Hook>("hook", "The hook.")
        .reply::<Listing>(200, "The listing.")
        .errors(&[404])
}

pub(super) async fn list(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<Hook>,
) -> Result<Json<Listing>, ApiError> {
    let hook = path.get()?;
    let listing = gw.deployer.reads().list(&id.tenant, hook).await?;
    Ok(Json(listing))
}

/// `DELETE /v1/admin/plugins/{hook}`
pub(super) fn remove_op() -> Operation {
    Operation::delete("Remove the tenant's plugin for the hook")
        .describe("Admin role. The built-in default applies from now on; the versions stay listed.")
        .path::<Hook>("hook", "The hook.")
        .reply_empty(204, "Removed.")
        .errors(&[404])
}

pub(super) async fn remove(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<Hook>,
) -> Result<StatusCode, ApiError> {
    let hook = path.get()?;
    gw.deployer.remove(&id.tenant, hook, &id.user).await?;
    converge(&gw, &id, hook, Slot::Active, None).await;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/admin/plugins/{hook}/rollback`
pub(super) fn rollback_op() -> Operation {
    Operation::post("Roll back to the version before")
        .describe("Admin role. Undoes deploys one by one as far as the history reaches.")
        .path::<Hook>("hook", "The hook.")
        .reply::<VersionEntry>(200, "The version now active.")
        .errors(&[404, 409])
}

pub(super) async fn rollback(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<Hook>,
) -> Result<Json<VersionEntry>, ApiError> {
    let hook = path.get()?;
    let entry = gw.deployer.rollback(&id.tenant, hook, &id.user).await?;
    converge(&gw, &id, hook, Slot::Active, Some(entry.revision)).await;
    Ok(Json(entry))
}

/// `GET /v1/admin/plugins/{hook}/shadow`
pub(super) fn shadow_op() -> Operation {
    Operation::get("The shadow version and how often it agrees")
        .describe("Admin role. Asks every gateway and worker (those that answer within 300 ms) which revisions they run and how the shadow's decisions compared with the live ones there: agree, disagree, failed, skipped, with the latest disagreements by conversation, message or sender id and decision kind, never content. `agreement` is agree / (agree + disagree) over all of them.")
        .path::<Hook>("hook", "The hook.")
        .reply::<ShadowListing>(200, "The shadow and its comparisons.")
        .errors(&[404])
}

pub(super) async fn shadow(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<Hook>,
) -> Result<Json<ShadowListing>, ApiError> {
    let hook = path.get()?;
    Ok(Json(
        gw.deployer.reads().shadow_listing(&id.tenant, hook).await?,
    ))
}

/// `DELETE /v1/admin/plugins/{hook}/shadow`
pub(super) fn remove_shadow_op() -> Operation {
    Operation::delete("Stop the shadow version")
        .describe("Admin role. The active version goes on as it was.")
        .path::<Hook>("hook", "The hook.")
        .reply_empty(204, "Stopped.")
        .errors(&[404])
}

pub(super) async fn remove_shadow(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<Hook>,
) -> Result<StatusCode, ApiError> {
    let hook = path.get()?;
    gw.deployer
        .remove_shadow(&id.tenant, hook, &id.user)
        .await?;
    converge(&gw, &id, hook, Slot::Shadow, None).await;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/admin/plugins/{hook}/shadow/promote`
pub(super) fn promote_op() -> Operation {
    Operation::post("Promote the shadow to the active version")
        .describe("Admin role. A deploy of the shadow's version (a rollback returns to the version before it); the hook has no shadow afterwards. Every process has it compiled already, so the switch is instant.")
        .path::<Hook>("hook", "The hook.")
        .reply::<VersionEntry>(200, "The version now active.")
        .errors(&[404])
}

pub(super) async fn promote(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<Hook>,
) -> Result<Json<VersionEntry>, ApiError> {
    let hook = path.get()?;
    let entry = gw.deployer.promote(&id.tenant, hook, &id.user).await?;
    converge(&gw, &id, hook, Slot::Active, Some(entry.revision)).await;
    Ok(Json(entry))
}

/// `POST /v1/admin/plugins/moderation/replay`: what to replay.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReplayRequest {
    /// A conversation the admin is a member of: a replay reads what its
    /// caller may read, no more.
    conversation_id: ConversationId,
    /// The version to run, a revision from the listing (a kept version or
    /// the shadow); without it, the shadow if there is one, else the
    /// active version.
    revision: Option<u64>,
    /// The newest messages to run it over (default 200, or the maximum
    /// if lower; at most `plugin_replay_max_messages`, 1000 by default).
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

/// What a version would have done with a conversation's stored messages:
/// counts, and the messages it would not have stored as they are, by id.
/// Never content, and never a plugin's reasons (they may quote it).
#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct ReplayReport {
    conversation_id: ConversationId,
    /// The version that ran.
    version: VersionEntry,
    /// Messages read, newest first.
    scanned: usize,
    allowed: usize,
    rejected: usize,
    rewritten: usize,
    /// Messages a moderation plugin never sees: deleted, ciphertext,
    /// system messages.
    not_moderated: usize,
    /// Calls that failed (a trap or a limit).
    failed: usize,
    /// The messages rejected, rewritten or failed, newest first.
    flagged: Vec<ReplayedMessage>,
    /// Whether the budget (`plugin_replay_budget_ms`) ran out before every
    /// message read was run.
    truncated: bool,
    /// Whether the version was quarantined, by this replay's failures or
    /// live ones (`quarantine_after` of its last `quarantine_window` calls
    /// failed), so the replay stopped: the messages after the last one
    /// counted were not run.
    quarantined: bool,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct ReplayedMessage {
    message_id: MessageId,
    seq: u64,
    sender_id: UserId,
    /// `reject`, `rewrite` or `failed`.
    decision: &'static str,
}

/// `POST /v1/admin/plugins/moderation/replay` (moderation only: the
/// other hooks decide nothing a tenant would replay over history).
pub(super) fn replay_op() -> Operation {
    Operation::post("Replay a moderation version over a conversation's history")
        .describe("Admin role. Runs a version (the shadow, the active one, or a kept revision) over the newest stored messages of a conversation the admin is a member of, under the production limits, and reports what it would have rejected or rewritten: counts and message ids, never content or reasons. Calls go through the version's quarantine like live ones: its failures here count toward it, and a replay stops (`quarantined: true`) once it is quarantined. Bounded by `plugin_replay_max_messages` and `plugin_replay_budget_ms`; each tenant may replay `plugin_replays_per_minute` times a minute, one at a time, per gateway (429 `rate_limited`).")
        .json_body::<ReplayRequest>()
        .reply::<ReplayReport>(200, "What the version would have done.")
        .errors(&[404, 409])
}

pub(super) async fn replay(
    State(gw): State<Shared>,
    Admin(id): Admin,
    JsonBody(request): JsonBody<ReplayRequest>,
) -> Result<Json<ReplayReport>, ApiError> {
    let hook = Hook::Moderation;
    let limits = &gw.config.limits;
    let limit = request
        .limit
        .unwrap_or(200.min(limits.plugin_replay_max_messages));
    if limit == 0 || limit > limits.plugin_replay_max_messages {
        return Err(ApiError::invalid(format!(
            "limit must be 1 to {} messages (plugin_replay_max_messages)",
            limits.plugin_replay_max_messages
        )));
    }
    let _running = gw.rates.plugin_replay(&id.tenant)?;
    let (version, compiled) = gw
        .deployer
        .reads()
        .compiled_version(&id.tenant, hook, request.revision)
        .await?;
    let conversation = request.conversation_id;
    // Newest first, in pages, as far as `limit`: the caller's own reads.
    let mut messages = Vec::with_capacity(limit.min(1000));
    let mut before_seq = None;
    while messages.len() < limit {
        let page = gw
            .store
            .history(
                &id.tenant,
                &conversation,
                &id.user,
                HistoryQuery {
                    before_seq,
                    after_seq: None,
                    limit: (limit - messages.len()).min(200),
                    thread_root: None,
                },
            )
            .await?;
        let Some(last) = page.last() else { break };
        before_seq = Some(last.seq);
        messages.extend(page);
    }
    let (kind, member_count) = gw
        .shapes
        .get(&*gw.store, &id.tenant, &conversation, &id.user)
        .await?;
    let Some(record) = version.record.clone() else {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            "no plugin is deployed for this hook",
        ));
    };
    // The version's own guard: the replay's failures count toward its
    // quarantine (the live one's, when it is the active or shadow
    // version), and a quarantined version is not run.
    let replayed = gw
        .plugins
        .replayed(&id.tenant, hook, version.revision, record, compiled);
    let plugins = gw.plugins.clone();
    let content_limits = limits.content;
    let budget = Duration::from_millis(limits.plugin_replay_budget_ms);
    let tenant = id.tenant.clone();
    let report = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut report = ReplayReport {
            conversation_id: conversation.clone(),
            version,
            scanned: messages.len(),
            allowed: 0,
            rejected: 0,
            rewritten: 0,
            not_moderated: 0,
            failed: 0,
            flagged: Vec::new(),
            truncated: false,
            quarantined: false,
        };
        for message in &messages {
            if started.elapsed() >= budget {
                report.truncated = true;
                break;
            }
            let content = match &message.content {
                Some(
                    c @ (Content::Text { .. }
                    | Content::Image { .. }
                    | Content::File { .. }
                    | Content::Voice { .. }),
                ) => c,
                _ => {
                    report.not_moderated += 1;
                    continue;
                }
            };
            let input = ModerationInput {
                tenant: &tenant,
                conversation_id: &conversation,
                kind,
                member_count,
                sender: &message.sender_id,
                content,
                options: &message.send_options(),
            };
            let decision = match plugins.moderate_with(&replayed, &input, &content_limits) {
                Ok(None) => {
                    report.not_moderated += 1;
                    continue;
                }
                Ok(Some(Verdict::Allow)) => {
                    report.allowed += 1;
                    continue;
                }
                Ok(Some(Verdict::Reject(_))) => {
                    report.rejected += 1;
                    "reject"
                }
                Ok(Some(Verdict::Rewrite(_))) => {
                    report.rewritten += 1;
                    "rewrite"
                }
                Err(CallError::Quarantined) => {
                    report.quarantined = true;
                    break;
                }
                Err(_) => {
                    report.failed += 1;
                    "failed"
                }
            };
            report.flagged.push(ReplayedMessage {
                message_id: message.message_id,
                seq: message.seq,
                sender_id: message.sender_id.clone(),
                decision,
            });
        }
        report
    })
    .await
    .map_err(|e| ApiError::new(ErrorCode::Internal, format!("the replay failed: {e}")))?;
    Ok(Json(report))
}

/// Waits (boundedly) until this gateway runs `revision` in `slot`, or runs
/// nothing there for `None`, so an admin's next request here sees the
/// change.
pub(super) async fn converge(
    gw: &Gateway,
    id: &Identity,
    hook: Hook,
    slot: Slot,
    revision: Option<u64>,
) {
    let started = Instant::now();
    loop {
        let running = match slot {
            Slot::Active => gw.plugins.active(&id.tenant, hook),
            Slot::Shadow => gw.plugins.shadow(&id.tenant, hook),
        }
        .map(|l| l.revision);
        let done = match revision {
            Some(r) => running.is_some_and(|running| running >= r),
            None => running.is_none(),
        };
        if done {
            return;
        }
        if started.elapsed() > CONVERGE_WAIT {
            tracing::warn!(tenant = %id.tenant, %hook, ?revision, "plugin change not yet running here");
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
