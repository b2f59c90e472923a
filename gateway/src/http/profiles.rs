//! Profiles (v1.3): `GET /v1/users/{user}` and `GET /v1/users?ids=`
//! read them from the store; `PATCH /v1/me/profile` (the caller's own)
//! and `PATCH /v1/admin/users/{user}/profile` (a tenant admin's `custom`
//! fields) are commands for the writer of the user's profile route,
//! which stores the change and sends `profile_updated`.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::Deserialize;
use switchboard_blob::BlobRef;
use switchboard_nats::envelope::{Command, ProfileCommand, profile_route_id};
use switchboard_protocol::profile::{
    CustomPatch, MAX_PROFILE_IDS, Profile, ProfileList, ProfilePatch,
};
use switchboard_protocol::{ErrorCode, Timestamp, UserId};

use super::conversations::done;
use super::extract::{Admin, JsonBody, PathParams, Shared};
use super::openapi::Operation;
use crate::auth::Identity;
use crate::commands::actor;
use crate::error::ApiError;

/// The query of `GET /v1/users`.
#[derive(Deserialize, schemars::JsonSchema)]
pub(super) struct UsersQuery {
    /// Comma-separated user ids: 1 to 100 of them.
    #[schemars(regex(pattern = r"^[A-Za-z0-9._:@-]{1,128}(,[A-Za-z0-9._:@-]{1,128}){0,99}$"))]
    ids: String,
}

/// `GET /v1/users/{user}`
pub(super) fn show_op() -> Operation {
    Operation::get("A user's profile")
        .describe("Any user of the caller's tenant. A user who never set a profile has every field empty and `updated_at: null`; a status past its `expires_at` is null.")
        .path::<UserId>("user", "The user.")
        .reply::<Profile>(200, "The profile.")
}

pub(super) async fn show(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<UserId>,
) -> Result<Json<Profile>, ApiError> {
    read_one(&gw, &id, path.get()?).await
}

/// `GET /v1/users?ids=`
pub(super) fn list_op() -> Operation {
    Operation::get("Several users' profiles")
        .describe("Profiles of the users named in `ids` (comma-separated, 1 to 100, a repeated id once), in the order named, users of the caller's tenant; as `GET /v1/users/{user}` has each.")
        .query_fields::<UsersQuery>()
        .reply::<ProfileList>(200, "The profiles.")
        .errors(&[400])
}

pub(super) async fn list(
    State(gw): State<Shared>,
    id: Identity,
    query: Result<Query<UsersQuery>, QueryRejection>,
) -> Result<Json<ProfileList>, ApiError> {
    let Query(query) = query?;
    let mut users: Vec<UserId> = Vec::new();
    for raw in query.ids.split(',') {
        let user =
            UserId::new(raw.trim()).map_err(|e| ApiError::invalid(format!("ids: {raw:?}: {e}")))?;
        if !users.contains(&user) {
            users.push(user);
        }
        if users.len() > MAX_PROFILE_IDS {
            return Err(ApiError::invalid(format!(
                "ids names more than {MAX_PROFILE_IDS} users"
            )));
        }
    }
    Ok(Json(ProfileList {
        users: read(&gw, &id, users).await?,
    }))
}

/// The profiles of `users`, in that order, as readers see them now.
async fn read(gw: &Shared, id: &Identity, users: Vec<UserId>) -> Result<Vec<Profile>, ApiError> {
    let found = gw.store.profiles(&id.tenant, users.clone()).await?;
    let now = Timestamp::now();
    Ok(users
        .into_iter()
        .zip(found)
        .map(|(user, p)| p.unwrap_or_else(|| Profile::empty(user)).seen_at(now))
        .collect())
}

/// One user's profile, as readers see it now.
async fn read_one(gw: &Shared, id: &Identity, user: UserId) -> Result<Json<Profile>, ApiError> {
    read(gw, id, vec![user])
        .await?
        .pop()
        .map(Json)
        .ok_or_else(|| ApiError::new(ErrorCode::Internal, "the store answered no profile"))
}

/// `PATCH /v1/me/profile`
pub(super) fn patch_own_op() -> Operation {
    Operation::patch("Change one's own profile")
        .describe("`display_name` (1 to 64 characters), `avatar` (the `blob_ref` of an image the caller uploaded: every user of the tenant may then download it) and `status` (`text` at most 140 characters, `emoji` at most 32 bytes; with neither it clears the status; `expires_at` in the future or null). An absent field stays as it is; null clears it. `custom` is the tenant admins' (403 for anyone else). Everyone who shares a conversation with the caller, and the caller's own devices, get `profile_updated` when something changed. At most `profile_updates_per_minute` per user (10 by default; 429 past it).")
        .json_body::<ProfilePatch>()
        .reply::<Profile>(200, "The profile after the change.")
        .errors(&[400, 403, 404, 429])
}

pub(super) async fn patch_own(
    State(gw): State<Shared>,
    id: Identity,
    JsonBody(patch): JsonBody<ProfilePatch>,
) -> Result<Json<Profile>, ApiError> {
    if patch.custom.is_some() && !id.admin {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "custom fields are set by tenant admins (PATCH /v1/admin/users/{user}/profile)",
        ));
    }
    patch
        .check(Timestamp::now())
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    if let Some(Some(avatar)) = &patch.avatar {
        check_avatar(&gw, &id, avatar).await?;
    }
    let user = id.user.clone();
    change(&gw, &id, user, patch).await
}

/// `PATCH /v1/admin/users/{user}/profile`
pub(super) fn patch_custom_op() -> Operation {
    Operation::patch("Set a user's custom profile fields")
        .describe("Tenant admins only (403 otherwise). Each key of `custom` is set, or removed where its value is null; the whole `custom` object is at most 4096 bytes of JSON (400 past it). The user cannot change these fields. Everyone who shares a conversation with the user gets `profile_updated`. Counts toward the admin's `profile_updates_per_minute`.")
        .path::<UserId>("user", "The user.")
        .json_body::<CustomPatch>()
        .reply::<Profile>(200, "The profile after the change.")
        .errors(&[400, 403, 429])
}

pub(super) async fn patch_custom(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<UserId>,
    JsonBody(body): JsonBody<CustomPatch>,
) -> Result<Json<Profile>, ApiError> {
    let user = path.get()?;
    let patch = ProfilePatch {
        custom: Some(body.custom),
        ..ProfilePatch::default()
    };
    change(&gw, &id, user, patch).await
}

/// Has the writer of `user`'s profile route apply `patch`, then reads
/// the profile back.
async fn change(
    gw: &Shared,
    id: &Identity,
    user: UserId,
    patch: ProfilePatch,
) -> Result<Json<Profile>, ApiError> {
    gw.rates.profile_update(id)?;
    let route = profile_route_id(&user)
        .ok_or_else(|| ApiError::invalid("no profile route for this user id"))?;
    let command = Command::Profile(ProfileCommand {
        by: actor(gw, id, route)?,
        user: user.clone(),
        patch,
    });
    done(gw.run_command(command).await?)?;
    read_one(gw, id, user).await
}

/// An avatar is an image the caller uploaded.
async fn check_avatar(gw: &Shared, id: &Identity, avatar: &str) -> Result<(), ApiError> {
    let missing = || {
        ApiError::new(
            ErrorCode::NotFound,
            format!("no image upload {avatar} of yours to use as an avatar"),
        )
    };
    let blob_ref = BlobRef::parse(avatar).map_err(|_| missing())?;
    let info = gw
        .media
        .blobs
        .info(&id.tenant, &blob_ref)
        .await?
        .ok_or_else(missing)?;
    if info.uploaded_by != id.user || !info.mime.starts_with("image/") {
        return Err(missing());
    }
    Ok(())
}
