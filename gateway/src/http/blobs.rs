//! `/v1/blobs/{token}`: the signed URLs of the local blob store, routed
//! only when media is kept on this machine (with S3, the bucket serves its
//! own). The token in the path is the whole authorization: the blob
//! store checks its signature, its expiry and what it grants.

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::io::AsyncReadExt;

use super::extract::PathParams;
use super::extract::{Shared, no_such_endpoint};
use super::openapi::Operation;
use crate::error::ApiError;

/// `PUT /v1/blobs/{token}`
pub(super) fn accept_op() -> Operation {
    Operation::put("Upload to a signed URL (local blob store)")
        .describe("No bearer token: the URL is the grant. Content-Type and length must be the granted ones; a blob is written once.")
        .for_anyone()
        .path::<String>("token", "The signed grant.")
        .bytes_body("*/*")
        .reply::<StoredBlob>(200, "Stored.")
        .errors(&[409])
}

/// `PUT /v1/blobs/{token}`: the token, content type and declared length
/// are checked before a byte of the body is read; the body then streams to
/// disk, and more or fewer bytes than granted leave nothing behind.
pub(super) async fn accept(
    State(gw): State<Shared>,
    path: PathParams<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<StoredBlob>, ApiError> {
    let Some(local) = &gw.media.local else {
        return Err(no_such_endpoint());
    };
    let token = path.get()?;
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
    let mut upload = local.begin_upload(&token, &content_type, declared).await?;
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::invalid(format!("the upload body broke off or stalled: {e}")))?;
        upload.write(&chunk).await?;
    }
    let info = upload.finish().await?;
    Ok(Json(StoredBlob {
        mime: info.mime,
        size: info.size,
    }))
}

/// What a signed upload stored.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(super) struct StoredBlob {
    mime: String,
    size: u64,
}

/// Read size of a streamed download.
const DOWNLOAD_CHUNK: usize = 64 * 1024;

/// `GET /v1/blobs/{token}`
pub(super) fn serve_op() -> Operation {
    Operation::get("Download from a signed URL (local blob store)")
        .for_anyone()
        .path::<String>("token", "The signed download.")
        .reply_text(200, "The bytes, with their Content-Type.", "*/*")
        .errors(&[404])
}

/// `GET /v1/blobs/{token}`: the blob, streamed, with headers that keep a
/// browser from running anything in it: `nosniff`, a sandboxing CSP, and
/// `attachment` for every type not known to be inert (`served_inline`).
pub(super) async fn serve(
    State(gw): State<Shared>,
    path: PathParams<String>,
) -> Result<Response, ApiError> {
    let Some(local) = &gw.media.local else {
        return Err(no_such_endpoint());
    };
    let token = path.get()?;
    let (info, file) = local.open_download(&token).await?;
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
