//! `GET /v1/users/{user}/presence`: whether a user is online, or when they
//! were last seen (the lookup itself is `crate::presence`).

use axum::Json;
use axum::extract::State;
use switchboard_protocol::{ErrorCode, PresenceInfo, UserId};

use super::extract::PathParams;
use super::extract::Shared;
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

/// `GET /v1/users/{user}/presence`
pub(super) fn show_op() -> Operation {
    Operation::get("A user's presence")
        .describe("For oneself, and for the other member of a direct conversation that the user opened or has sent in (the scope of presence frames); 403 otherwise. Opening a direct conversation with someone does not show their presence until they answer.")
        .path::<UserId>("user", "The user.")
        .reply::<PresenceInfo>(200, "Where the user stands.")
}

/// Presence of oneself, or of a user whose presence concerns the caller:
/// the same scope the `presence` frames have (`Read::Contacts` of the
/// user looked up, not of the caller).
pub(super) async fn show(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<UserId>,
) -> Result<Json<PresenceInfo>, ApiError> {
    let user = path.get()?;
    if user != id.user
        && !gw
            .store
            .contacts(&id.tenant, &user)
            .await?
            .contains(&id.user)
    {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "presence is visible to the user's direct contacts who they have answered or contacted",
        ));
    }
    Ok(Json(gw.hub.presence().lookup(&id.tenant, &user).await))
}
