//! `GET /v1/scheduled` and `DELETE /v1/scheduled/{scheduled_id}` (v1.2):
//! the caller's messages waiting for their `send_at`, and cancelling one.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_nats::scheduled::is_scheduled_id;
use switchboard_protocol::ErrorCode;
use switchboard_protocol::scheduled::ScheduledList;

use super::extract::{PathParams, Shared};
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

/// `GET /v1/scheduled`
pub(super) fn list_op() -> Operation {
    Operation::get("The caller's scheduled messages")
        .describe("Messages sent with `send_at` that wait for it, soonest first (at most 100). One that was sent, or cancelled, is not here.")
        .reply::<ScheduledList>(200, "The waiting messages.")
}

pub(super) async fn list(
    State(gw): State<Shared>,
    id: Identity,
) -> Result<Json<ScheduledList>, ApiError> {
    let sends = gw.schedules.list(&id.tenant, &id.user).await?;
    Ok(Json(ScheduledList {
        scheduled: sends.iter().map(|s| s.view()).collect(),
    }))
}

/// `DELETE /v1/scheduled/{scheduled_id}`
pub(super) fn cancel_op() -> Operation {
    Operation::delete("Cancel a scheduled message")
        .describe("It will not be sent. 404 when it is not waiting: sent already, cancelled, or not the caller's.")
        .path::<String>("scheduled_id", "The `scheduled_id` of its `ack`.")
        .reply_empty(204, "Cancelled.")
        .errors(&[404])
}

pub(super) async fn cancel(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<String>,
) -> Result<StatusCode, ApiError> {
    let scheduled_id = path.get()?;
    let not_waiting = || ApiError::new(ErrorCode::NotFound, "no such scheduled message waits");
    if !is_scheduled_id(&scheduled_id) {
        return Err(not_waiting());
    }
    if gw
        .schedules
        .cancel(&id.tenant, &id.user, &scheduled_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_waiting())
    }
}
