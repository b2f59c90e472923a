//! Erasure (v1.2), for tenant admins: `DELETE /v1/admin/users/{user}`
//! asks a worker for the job (`sb.erasures.request`; workers alone write
//! `sb_erasures`), and `GET /v1/admin/jobs/{job_id}` reads the job's
//! progress from the bucket. A tenant admin names users of their own
//! tenant only: the token says which, and a user the tenant has no trace
//! of is 404, whatever another tenant holds under that id. Another
//! tenant's job is 404 as well.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_nats::records::erasures::{
    ErasureAnswer, ErasureRequest, Erasures, REQUEST_SUBJECT, is_job_id,
};
use switchboard_protocol::jobs::Job;
use switchboard_protocol::{ErrorCode, UserId};

use super::extract::{Admin, PathParams, Shared};
use super::openapi::Operation;
use crate::error::ApiError;

/// How long a worker has to answer an erasure request.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// `DELETE /v1/admin/users/{user}`
pub(super) fn erase_op() -> Operation {
    Operation::delete("Erase a user")
        .describe("Tenant admins only (403 otherwise). Starts erasing the user from the tenant, live and archived history alike: the content of every message they sent (the rows stay, with `deleted_at` and a pseudonym for `sender_id`), their reactions, devices, keys, push tokens, settings, blocks (theirs and others' of them), memberships and reports' copies of them; elsewhere their id becomes the pseudonym. Answers 202 with the job, which `GET /v1/admin/jobs/{job_id}` follows. A second request while it runs answers the same job; one after it finished runs it again, harmlessly. 404 when the tenant has no trace of the user.")
        .path::<UserId>("user", "The user to erase.")
        .reply::<Job>(202, "The job.")
        .errors(&[403, 404, 503])
}

pub(super) async fn erase(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<UserId>,
) -> Result<(StatusCode, Json<Job>), ApiError> {
    let user = path.get()?;
    let request = ErasureRequest {
        tenant: id.tenant.clone(),
        user,
    };
    let body = serde_json::to_vec(&request)
        .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let unavailable = |why: String| {
        ApiError::new(
            ErrorCode::Unavailable,
            format!("no worker took the erasure request ({why}); try again"),
        )
    };
    // A worker that is starting has not subscribed yet: with none
    // there, ask again until the time is up.
    let body = bytes::Bytes::from(body);
    let ask = async {
        loop {
            match gw.client.request(REQUEST_SUBJECT, body.clone()).await {
                Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                answer => return answer,
            }
        }
    };
    let reply = tokio::time::timeout(ANSWER_WITHIN, ask)
        .await
        .map_err(|_| unavailable("no answer in time".into()))?
        .map_err(|e| unavailable(e.to_string()))?;
    match serde_json::from_slice::<ErasureAnswer>(&reply.payload) {
        Ok(ErasureAnswer::Job(job)) => Ok((StatusCode::ACCEPTED, Json(job))),
        Ok(ErasureAnswer::UnknownUser) => Err(ApiError::new(
            ErrorCode::NotFound,
            "the tenant has no such user",
        )),
        Ok(ErasureAnswer::Failed(why)) => Err(unavailable(why)),
        Err(e) => Err(unavailable(format!("an answer that does not decode: {e}"))),
    }
}

/// `GET /v1/admin/jobs/{job_id}`
pub(super) fn job_op() -> Operation {
    Operation::get("A job")
        .describe("Tenant admins only (403 otherwise). The job's `state` (`running`, `done` or `failed`) and progress. A finished erasure's job names nobody. 404 for an unknown job or another tenant's.")
        .path::<String>("job_id", "The job's id, as its start answered.")
        .reply::<Job>(200, "The job.")
        .errors(&[403, 404, 503])
}

pub(super) async fn job(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<String>,
) -> Result<Json<Job>, ApiError> {
    let job_id = path.get()?;
    let no_such = || ApiError::new(ErrorCode::NotFound, "no such job");
    if !is_job_id(&job_id) {
        return Err(no_such());
    }
    let unreadable =
        |e: switchboard_nats::BackboneError| ApiError::new(ErrorCode::Unavailable, e.to_string());
    let erasures = Erasures::open(&gw.js).await.map_err(unreadable)?;
    match erasures.get(&job_id).await.map_err(unreadable)? {
        Some((record, _)) if record.tenant == id.tenant => Ok(Json(record.job)),
        _ => Err(no_such()),
    }
}
