//! Media (F13): `POST /v1/media` grants an upload and answers with a
//! signed URL; the client PUTs the bytes there (for the local blob store,
//! `PUT /v1/blobs/{token}` here; for S3, S3 itself); a message carries
//! the `blob_ref`; `GET /v1/media/{blob_ref}` redirects the uploader, and
//! members of a conversation with a message that references the blob, to
//! a short-lived signed download URL. Anyone else gets 404, as for a blob
//! that does not exist: nothing tells them it does.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use switchboard_blob::local::LocalBlobs;
use switchboard_blob::{BlobError, BlobRef, BlobStore, SignedUrl, UploadGrant};
use switchboard_protocol::content::Media;
use switchboard_protocol::{ErrorCode, Timestamp};

use crate::Gateway;
use crate::auth::Identity;
use crate::error::{ApiError, upload_rejection};
use crate::rest::JsonBody;

type Shared = Arc<Gateway>;

/// Where a gateway keeps media: a blob store, and when it is the local
/// one, the same store to serve its signed URLs from.
pub struct MediaStore {
    pub blobs: Arc<dyn BlobStore>,
    pub local: Option<Arc<LocalBlobs>>,
}

impl MediaStore {
    /// A store whose URLs something else serves (S3).
    pub fn remote(blobs: Arc<dyn BlobStore>) -> Self {
        Self { blobs, local: None }
    }

    pub fn local(blobs: LocalBlobs) -> Self {
        let local = Arc::new(blobs);
        Self {
            blobs: local.clone(),
            local: Some(local),
        }
    }
}

pub(crate) fn routes(gw: &Shared) -> axum::Router<Shared> {
    let upload_limit = usize::try_from(gw.config.media.max_bytes)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    let mut router = axum::Router::new()
        .route("/v1/media", post(grant_upload))
        .route("/v1/media/{blob_ref}", get(download));
    if gw.media.local.is_some() {
        router = router.route(
            "/v1/blobs/{token}",
            get(serve_blob)
                .put(accept_blob)
                .layer(DefaultBodyLimit::max(upload_limit)),
        );
    }
    router
}

fn blob_error(e: BlobError) -> ApiError {
    let code = match &e {
        BlobError::NotFound => ErrorCode::NotFound,
        BlobError::Exists => ErrorCode::Conflict,
        BlobError::Mismatch(_) => ErrorCode::InvalidRequest,
        BlobError::BadUrl(_) | BlobError::Expired => ErrorCode::Forbidden,
        BlobError::Backend(_) => ErrorCode::Unavailable,
    };
    if code == ErrorCode::Unavailable {
        tracing::warn!(error = %e, "blob storage");
    }
    ApiError::new(code, e.to_string())
}

/// A URL a backend gave as a path, made absolute on this gateway's origin
/// as the client reached it.
fn absolute(url: String, headers: &HeaderMap) -> String {
    if !url.starts_with('/') {
        return url;
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .filter(|p| *p == "https")
        .unwrap_or("http");
    format!("{scheme}://{host}{url}")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UploadRequest {
    mime: String,
    size: u64,
}

#[derive(Serialize)]
struct UploadTicket {
    blob_ref: BlobRef,
    upload_url: String,
    expires_at: Timestamp,
    /// The method and headers the upload must use, as they are (additions
    /// to PROTOCOL.md): at least `content-type`; an S3 URL signs more.
    method: &'static str,
    headers: std::collections::BTreeMap<String, String>,
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

async fn grant_upload(
    State(gw): State<Shared>,
    id: Identity,
    headers: HeaderMap,
    JsonBody(body): JsonBody<UploadRequest>,
) -> Result<(StatusCode, Json<UploadTicket>), ApiError> {
    let media = &gw.config.media;
    if body.size == 0 {
        return Err(ApiError::invalid("size must be at least 1 byte"));
    }
    if body.size > media.max_bytes {
        return Err(ApiError::new(
            ErrorCode::TooLarge,
            format!("uploads are at most {} bytes", media.max_bytes),
        ));
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
    let blob_ref = BlobRef::generate().map_err(blob_error)?;
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
        .await
        .map_err(blob_error)?;
    Ok((
        StatusCode::CREATED,
        Json(UploadTicket {
            blob_ref,
            upload_url: absolute(url, &headers),
            expires_at,
            method: "PUT",
            headers: signed_headers.into_iter().collect(),
        }),
    ))
}

async fn download(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::new(ErrorCode::NotFound, "no such media");
    let Path(raw) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let blob_ref = BlobRef::parse(&raw).map_err(|_| not_found())?;
    if !gw.may_read(&id, &blob_ref).await? {
        return Err(not_found());
    }
    let SignedUrl {
        url, expires_at, ..
    } = gw
        .media
        .blobs
        .download_url(
            &id.tenant,
            &blob_ref,
            Duration::from_secs(gw.config.media.download_url_secs),
        )
        .await
        .map_err(blob_error)?;
    let url = absolute(url, &headers);
    let location = HeaderValue::from_str(&url)
        .map_err(|_| ApiError::new(ErrorCode::Internal, "download URL is not a header value"))?;
    let body = Json(serde_json::json!({ "download_url": url, "expires_at": expires_at }));
    Ok((StatusCode::FOUND, [(header::LOCATION, location)], body).into_response())
}

async fn accept_blob(
    State(gw): State<Shared>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Some(local) = &gw.media.local else {
        return Err(ApiError::new(ErrorCode::NotFound, "no such endpoint"));
    };
    let Path(token) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let body = body.map_err(upload_rejection)?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let info = local
        .accept_upload(&token, &content_type, body)
        .await
        .map_err(blob_error)?;
    Ok(Json(
        serde_json::json!({ "mime": info.mime, "size": info.size }),
    ))
}

async fn serve_blob(
    State(gw): State<Shared>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Some(local) = &gw.media.local else {
        return Err(ApiError::new(ErrorCode::NotFound, "no such endpoint"));
    };
    let Path(token) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let (info, bytes) = local.open_download(&token).await.map_err(blob_error)?;
    let content_type = HeaderValue::from_str(&info.mime)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    Ok((
        [
            (header::CONTENT_TYPE, content_type),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, max-age=300"),
            ),
        ],
        bytes,
    )
        .into_response())
}

impl Gateway {
    /// Whether the caller uploaded the blob or is a member of a
    /// conversation with a message that references it.
    async fn may_read(&self, id: &Identity, blob_ref: &BlobRef) -> Result<bool, ApiError> {
        let Some(info) = self
            .media
            .blobs
            .info(&id.tenant, blob_ref)
            .await
            .map_err(blob_error)?
        else {
            return Ok(false);
        };
        if info.uploaded_by == id.user {
            return Ok(true);
        }
        Ok(self
            .store
            .media_readable(&id.tenant, blob_ref.as_str(), &id.user)
            .await?)
    }

    /// Checks media content a client sends: the blob was uploaded, by the
    /// sender or into a conversation the sender can read (forwarding), and
    /// the message describes it as it is.
    pub(crate) async fn check_media(
        &self,
        id: &Identity,
        media: &Media,
    ) -> Result<(), (ErrorCode, String)> {
        let missing = || {
            (
                ErrorCode::NotFound,
                format!("no upload {} to refer to", media.blob_ref),
            )
        };
        let blob_ref = BlobRef::parse(&media.blob_ref).map_err(|_| missing())?;
        let info = match self.media.blobs.info(&id.tenant, &blob_ref).await {
            Ok(Some(info)) => info,
            Ok(None) => return Err(missing()),
            Err(e) => return Err((ErrorCode::Unavailable, e.to_string())),
        };
        let readable = info.uploaded_by == id.user
            || self
                .store
                .media_readable(&id.tenant, blob_ref.as_str(), &id.user)
                .await
                .map_err(|e| (crate::error::store_error_code(&e), e.to_string()))?;
        if !readable {
            return Err(missing());
        }
        if info.mime != media.mime || info.size != media.size {
            return Err((
                ErrorCode::InvalidFrame,
                format!(
                    "the upload is {} of {} bytes, not {} of {}",
                    info.mime, info.size, media.mime, media.size
                ),
            ));
        }
        Ok(())
    }
}
