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
use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use switchboard_blob::local::LocalBlobs;
use switchboard_blob::{BlobError, BlobInfo, BlobRef, BlobStore, SignedUrl, UploadGrant};
use switchboard_protocol::content::Media;
use switchboard_protocol::{ErrorCode, Timestamp};

use crate::Gateway;
use crate::auth::Identity;
use tokio::io::AsyncReadExt;

use crate::error::ApiError;
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
    let mut router = axum::Router::new()
        .route("/v1/media", post(grant_upload))
        .route("/v1/media/{blob_ref}", get(download));
    if gw.media.local.is_some() {
        // Uploads are streamed to disk, never buffered: the body limit is
        // the grant's own size, checked in `accept_blob`.
        router = router.route(
            "/v1/blobs/{token}",
            get(serve_blob)
                .put(accept_blob)
                .layer(DefaultBodyLimit::disable()),
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
    gw.take_upload(&id, body.size)?;
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
    let Some(info) = gw.readable(&id, &blob_ref).await? else {
        return Err(not_found());
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
        .await
        .map_err(blob_error)?;
    let url = absolute(url, &headers);
    let location = HeaderValue::from_str(&url)
        .map_err(|_| ApiError::new(ErrorCode::Internal, "download URL is not a header value"))?;
    let body = Json(serde_json::json!({ "download_url": url, "expires_at": expires_at }));
    Ok((StatusCode::FOUND, [(header::LOCATION, location)], body).into_response())
}

/// `PUT /v1/blobs/{token}`: the token, content type and declared length
/// are checked before a byte of the body is read; the body then streams to
/// disk, and more or fewer bytes than granted leave nothing behind.
async fn accept_blob(
    State(gw): State<Shared>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Some(local) = &gw.media.local else {
        return Err(ApiError::new(ErrorCode::NotFound, "no such endpoint"));
    };
    let Path(token) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let declared = match headers.get(header::CONTENT_LENGTH) {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| ApiError::invalid("Content-Length is not a number"))?,
        ),
    };
    let mut upload = local
        .begin_upload(&token, &content_type, declared)
        .await
        .map_err(blob_error)?;
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::invalid(format!("the upload body broke off or stalled: {e}")))?;
        upload.write(&chunk).await.map_err(blob_error)?;
    }
    let info = upload.finish().await.map_err(blob_error)?;
    Ok(Json(
        serde_json::json!({ "mime": info.mime, "size": info.size }),
    ))
}

/// Read size of a streamed download.
const DOWNLOAD_CHUNK: usize = 64 * 1024;

/// `GET /v1/blobs/{token}`: the blob, streamed, with headers that keep a
/// browser from running anything in it: `nosniff`, a sandboxing CSP, and
/// `attachment` for every type not known to be inert (`served_inline`).
async fn serve_blob(
    State(gw): State<Shared>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Some(local) = &gw.media.local else {
        return Err(ApiError::new(ErrorCode::NotFound, "no such endpoint"));
    };
    let Path(token) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let (info, file) = local.open_download(&token).await.map_err(blob_error)?;
    let content_type = HeaderValue::from_str(&info.mime)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    let disposition = if switchboard_blob::served_inline(&info.mime) {
        "inline"
    } else {
        "attachment"
    };
    let chunks = futures::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; DOWNLOAD_CHUNK];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    Ok((
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_LENGTH, HeaderValue::from(info.size)),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static(disposition),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("sandbox; default-src 'none'; style-src 'unsafe-inline'"),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, max-age=300"),
            ),
        ],
        Body::from_stream(chunks),
    )
        .into_response())
}

/// Blobs listed per step of the collector.
const GC_STEP: usize = 500;

/// The blob collector: every `gc_every_secs`, deletes uploads older than
/// `gc_grace_secs` that no stored message references (an upload whose
/// message never came, or an abuser filling the disk). Every gateway runs
/// it over the blob store it serves: with local blobs each machine's own
/// directory, with S3 the shared bucket (several gateways then repeat the
/// walk; deleting twice is harmless).
pub(crate) fn start_collector(gw: &Arc<Gateway>) {
    let every = gw.config.media.gc_every_secs;
    if every == 0 {
        return;
    }
    let gw = Arc::downgrade(gw);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(every));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(gw) = gw.upgrade() else { return };
            match gw.collect_unreferenced_media().await {
                Ok((0, _)) => {}
                Ok((removed, kept)) => {
                    tracing::info!(removed, kept, "unreferenced uploads removed")
                }
                Err(e) => {
                    tracing::warn!(error = %e.message, "the blob collector stopped; it tries again later")
                }
            }
        }
    });
}

impl Gateway {
    /// One walk of the collector: how many uploads it removed, and how
    /// many it looked at and kept.
    pub(crate) async fn collect_unreferenced_media(&self) -> Result<(usize, usize), ApiError> {
        let grace_ms =
            i64::try_from(self.config.media.gc_grace_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        let cutoff = Timestamp::now().unix_ms().saturating_sub(grace_ms);
        let (mut removed, mut kept) = (0, 0);
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .media
                .blobs
                .list_media(cursor.as_deref(), GC_STEP)
                .await
                .map_err(blob_error)?;
            let Some(last) = page.last() else { break };
            cursor = Some(last.cursor.clone());
            for m in page {
                let old = m.uploaded_at.unix_ms() < cutoff;
                if old
                    && !self
                        .store
                        .media_referenced(&m.tenant, m.blob_ref.as_str())
                        .await?
                {
                    self.media
                        .blobs
                        .delete_media(&m.tenant, &m.blob_ref)
                        .await
                        .map_err(blob_error)?;
                    removed += 1;
                } else {
                    kept += 1;
                }
            }
        }
        Ok((removed, kept))
    }

    /// Takes one upload of `size` bytes from the user's and the tenant's
    /// upload rates: grants per minute, bytes per hour.
    fn take_upload(&self, id: &Identity, size: u64) -> Result<(), ApiError> {
        let limits = &self.config.limits;
        let user = (id.tenant.clone(), id.user.clone());
        let limited = |what: String| ApiError::new(ErrorCode::RateLimited, what);
        let (rate, burst) = crate::quota::per_minute(limits.uploads_per_minute);
        if !self.quotas.uploads.take(&user, rate, burst, 1.0) {
            return Err(limited(format!(
                "more than {} uploads per minute by this user; retry later",
                limits.uploads_per_minute
            )));
        }
        let bytes = size as f64;
        let (rate, burst) = crate::quota::per_hour(limits.upload_bytes_per_hour_per_user as f64);
        if !self.quotas.upload_bytes.take(&user, rate, burst, bytes) {
            return Err(limited(format!(
                "this user's uploads passed {} bytes in the last hour; retry later",
                limits.upload_bytes_per_hour_per_user
            )));
        }
        let (rate, burst) = crate::quota::per_hour(limits.upload_bytes_per_hour_per_tenant as f64);
        if !self
            .quotas
            .tenant_upload_bytes
            .take(&id.tenant, rate, burst, bytes)
        {
            return Err(limited(format!(
                "the tenant's uploads passed {} bytes in the last hour; retry later",
                limits.upload_bytes_per_hour_per_tenant
            )));
        }
        Ok(())
    }

    /// The blob, if the caller uploaded it or is a member of a
    /// conversation with a message that references it.
    async fn readable(
        &self,
        id: &Identity,
        blob_ref: &BlobRef,
    ) -> Result<Option<BlobInfo>, ApiError> {
        let Some(info) = self
            .media
            .blobs
            .info(&id.tenant, blob_ref)
            .await
            .map_err(blob_error)?
        else {
            return Ok(None);
        };
        let readable = info.uploaded_by == id.user
            || self
                .store
                .media_readable(&id.tenant, blob_ref.as_str(), &id.user)
                .await?;
        Ok(readable.then_some(info))
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
