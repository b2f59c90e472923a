//! `/v1/media` (F13): `POST` grants an upload and answers with a signed URL
//! for its bytes; `GET /v1/media/{blob_ref}` redirects the uploader,
//! members of a conversation with a message that references the blob, and
//! for an avatar every user of the tenant, to a short-lived signed
//! download URL. Anyone else gets 404, as for a blob
//! that does not exist: nothing tells them it does.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use switchboard_blob::{BlobRef, SignedUrl, UploadGrant};
use switchboard_protocol::{ErrorCode, Timestamp};

use super::extract::Shared;
use super::extract::{JsonBody, PathParam, PathParams};
use super::openapi::Operation;
use super::public::PublicBase;
use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::media::OverQuota;

/// The refusal for a blob that does not exist and for one the caller may
/// not read alike.
fn no_such_media() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such media")
}

/// A blob reference in the path; a malformed one is as unknown as any.
impl PathParam for BlobRef {
    type Raw = String;

    fn from_path(raw: String) -> Result<Self, ApiError> {
        BlobRef::parse(&raw).map_err(|_| no_such_media())
    }
}

/// What to upload: the document's `mime` pattern and `size` maximum are
/// the deployment's `[media]` allow-list and limit.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UploadRequest {
    /// `type/subtype`, one of the deployment's allowed types.
    #[schemars(length(max = 255))]
    mime: String,
    /// Bytes.
    #[schemars(range(min = 1))]
    size: u64,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct UploadTicket {
    /// Goes into image, file or voice content once the bytes are up.
    #[schemars(with = "String")]
    blob_ref: BlobRef,
    /// Where to send the bytes.
    upload_url: String,
    expires_at: Timestamp,
    /// The method and headers the upload must use, as they are (additions
    /// to docs/protocol.md): at least `content-type`; an S3 URL signs more.
    #[schemars(extend("const" = "PUT"))]
    method: &'static str,
    headers: std::collections::BTreeMap<String, String>,
}

/// The body of the download redirect.
#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct DownloadLink {
    download_url: String,
    expires_at: Timestamp,
}

/// `type/subtype`, nothing else (no parameters, no spaces).
fn well_formed_mime(mime: &str) -> bool {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    mime.len() <= 255
        && mime
            .split_once('/')
            .is_some_and(|(t, s)| token(t) && token(s))
}

/// `POST /v1/media`
pub(super) fn grant_upload_op() -> Operation {
    Operation::post("Grant an upload")
        .describe("Answers with a signed URL to PUT exactly `size` bytes of `mime` to (with that Content-Type), valid for a limited time (15 minutes by default). The blob_ref then goes into image, file or voice content. Sizes and types are limited by the [media] configuration. What a user and a tenant keep stored is limited too (the tenant's quotas max_media_bytes_per_user and max_media_bytes, or [media] max_stored_bytes_per_user and max_stored_bytes_per_tenant): a grant past either gets 429 quota_exceeded. An upload no message references, or whose messages were all deleted, is removed after a grace period.")
        .json_body::<UploadRequest>()
        .reply::<UploadTicket>(201, "The grant.")
}

pub(super) async fn grant_upload(
    State(gw): State<Shared>,
    id: Identity,
    Extension(base): Extension<PublicBase>,
    JsonBody(body): JsonBody<UploadRequest>,
) -> Result<(StatusCode, Json<UploadTicket>), ApiError> {
    let media = &gw.config.media;
    if body.size == 0 {
        return Err(ApiError::invalid("size must be at least 1 byte"));
    }
    if body.size > media.max_bytes {
        // The declared size is a field the schema bounds: invalid (the
        // bytes themselves never come here).
        return Err(ApiError::invalid(format!(
            "uploads are at most {} bytes",
            media.max_bytes
        )));
    }
    let mime = body.mime.to_ascii_lowercase();
    if !well_formed_mime(&mime) {
        return Err(ApiError::invalid("mime must look like type/subtype"));
    }
    if !media.allows(&mime) {
        return Err(ApiError::invalid(format!(
            "{mime} may not be uploaded; allowed: {}",
            media.allowed_mime.join(", ")
        )));
    }
    gw.rates.upload_grant(&id, body.size)?;
    let blob_ref = BlobRef::generate()?;
    let grant = UploadGrant {
        tenant: id.tenant.clone(),
        blob_ref: blob_ref.clone(),
        mime: mime.clone(),
        size: body.size,
        uploader: id.user.clone(),
    };
    let SignedUrl {
        url,
        expires_at,
        headers: signed_headers,
    } = gw
        .media
        .blobs
        .upload_url(&grant, Duration::from_secs(media.upload_url_secs))
        .await?;
    gw.take_storage(&id, &blob_ref, body.size, expires_at)?;
    crate::metrics::upload_granted(body.size);
    Ok((
        StatusCode::CREATED,
        Json(UploadTicket {
            blob_ref,
            upload_url: base.absolute(url),
            expires_at,
            method: "PUT",
            headers: signed_headers.into_iter().collect(),
        }),
    ))
}

/// `GET /v1/media/{blob_ref}`
pub(super) fn download_op() -> Operation {
    Operation::get("Download media")
        .describe("For the uploader, members of a conversation with a message that references the blob, and (for a blob that is its uploader's profile `avatar`, v1.3) every user of the tenant: a redirect to a download URL valid for a few minutes (5 by default). Anyone else gets 404, as for a blob that does not exist.")
        .path::<String>("blob_ref", "The blob, as its grant named it.")
        .reply::<DownloadLink>(302, "Location: the download URL; the body repeats it.")
        .errors(&[404])
}

pub(super) async fn download(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<BlobRef>,
    Extension(base): Extension<PublicBase>,
) -> Result<Response, ApiError> {
    let blob_ref = path.get()?;
    let Some(info) = gw.readable(&id, &blob_ref).await? else {
        return Err(no_such_media());
    };
    let SignedUrl {
        url, expires_at, ..
    } = gw
        .media
        .blobs
        .download_url(
            &id.tenant,
            &blob_ref,
            &info.mime,
            Duration::from_secs(gw.config.media.download_url_secs),
        )
        .await?;
    let url = base.absolute(url);
    let location = HeaderValue::from_str(&url)
        .map_err(|_| ApiError::new(ErrorCode::Internal, "download URL is not a header value"))?;
    let body = Json(DownloadLink {
        download_url: url,
        expires_at,
    });
    Ok((StatusCode::FOUND, [(header::LOCATION, location)], body).into_response())
}

impl Gateway {
    /// Counts the grant against what the user and the tenant may keep
    /// stored (`media/usage.rs` says how exactly it is counted).
    fn take_storage(
        &self,
        id: &Identity,
        blob_ref: &BlobRef,
        size: u64,
        expires_at: Timestamp,
    ) -> Result<(), ApiError> {
        let limits = self.storage_limits(&id.tenant);
        let counted = self
            .media
            .usage
            .grant(&id.tenant, &id.user, blob_ref, size, expires_at, limits);
        counted.map_err(|over| {
            let message = match over {
                OverQuota::User { stored, limit } => format!(
                    "this user stores {stored} bytes of media; {size} more would pass the {limit} bytes allowed"
                ),
                OverQuota::Tenant { stored, limit } => format!(
                    "the tenant stores {stored} bytes of media; {size} more would pass the {limit} bytes allowed"
                ),
            };
            ApiError::new(ErrorCode::QuotaExceeded, message)
        })
    }
}
