//! Blobs in an S3-compatible bucket (AWS S3, MinIO, Ceph, R2): uploads and
//! downloads go straight between the client and the bucket through URLs
//! presigned here (SigV4), so the bytes never pass through Switchboard.
//!
//! An upload URL signs the content type, the length, the uploader (as
//! `x-amz-meta-uploaded-by`) and `If-None-Match: *`: the client must send
//! them as granted, the bucket refuses any other size or type, and a blob
//! is written once where the bucket supports conditional writes. Objects
//! are `media/<tenant as hex>/<blob_ref>`; message archives (written by
//! Switchboard itself, not through URLs) are `archive/...`.
//!
//! What this code reads of the bucket's answers is bounded: an object
//! read whole at most `max_object_bytes` (refused past it, also when the
//! declared length lies), a listing page at most `limit` keys (1000 at
//! most). The SDK parses the small XML answers (listings, errors) and
//! the HEAD answer's headers itself.

use std::time::Duration;

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::operation::head_object::HeadObjectOutput;
use aws_sdk_s3::presigning::{PresignedRequest, PresigningConfig};
use futures::StreamExt;
use serde::Deserialize;
use switchboard_protocol::{TenantId, Timestamp, UserId};

use crate::{
    BlobError, BlobInfo, BlobRef, BlobStore, MediaWalk, SignedUrl, StoredMedia, UploadGrant,
};

/// Where the bucket is and how to reach it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Config {
    pub bucket: String,
    /// `us-east-1` unless the provider says otherwise.
    #[serde(default = "default_region")]
    pub region: String,
    /// The service's URL, for anything but AWS (MinIO, Ceph, R2, a local
    /// test server).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Bucket in the path (`https://host/bucket/key`) rather than the host
    /// name: what MinIO and most self-hosted services need.
    #[serde(default)]
    pub path_style: bool,
    /// Credentials; the binary fills them from `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY` when the file leaves them out.
    #[serde(default)]
    pub access_key_id: String,
    #[serde(default)]
    pub secret_access_key: String,
}

fn default_region() -> String {
    "us-east-1".into()
}

pub struct S3Blobs {
    client: aws_sdk_s3::Client,
    bucket: String,
    /// The largest object written or read whole (`put_object`,
    /// `get_object`).
    max_object_bytes: u64,
}

const UPLOADED_BY: &str = "uploaded-by";

/// HEAD requests of one walk page at once (each blob's uploader is only
/// in its metadata, which listings do not carry).
const HEADS_AT_ONCE: usize = 16;

/// The uploader an object's metadata names.
fn uploader(head: &HeadObjectOutput) -> Option<UserId> {
    head.metadata()
        .and_then(|m| m.get(UPLOADED_BY))
        .and_then(|u| UserId::new(u.as_str()).ok())
}

fn backend(e: impl std::error::Error + Send + Sync + 'static) -> BlobError {
    BlobError::backend(e)
}

/// An SDK error, shown with its whole chain (the SDK's own Display says
/// little more than "service error"), and kept as the source.
fn sdk(e: impl std::error::Error + Send + Sync + 'static) -> BlobError {
    let message = aws_sdk_s3::error::DisplayErrorContext(&e).to_string();
    BlobError::backend_shown_as(message, e)
}

impl S3Blobs {
    pub fn new(config: &S3Config) -> Self {
        use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let credentials = Credentials::new(
            &config.access_key_id,
            &config.secret_access_key,
            None,
            None,
            "switchboard-config",
        );
        let mut s3 = aws_sdk_s3::config::Builder::new()
            .behavior_version(BehaviorVersion::latest())
            .http_client(http)
            .region(Region::new(config.region.clone()))
            .credentials_provider(credentials)
            .force_path_style(config.path_style);
        if let Some(endpoint) = &config.endpoint {
            s3 = s3.endpoint_url(endpoint);
        }
        Self {
            client: aws_sdk_s3::Client::from_conf(s3.build()),
            bucket: config.bucket.clone(),
            max_object_bytes: crate::DEFAULT_MAX_OBJECT_BYTES,
        }
    }

    /// Sets the largest object written or read whole.
    pub fn with_max_object_bytes(mut self, max: u64) -> Self {
        self.max_object_bytes = max;
        self
    }

    fn key(tenant: &TenantId, blob_ref: &BlobRef) -> String {
        let hex: String = tenant
            .as_str()
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("media/{hex}/{blob_ref}")
    }

    /// The object's HEAD answer; `None` when it is not there.
    async fn head(
        &self,
        tenant: &TenantId,
        blob_ref: &BlobRef,
    ) -> Result<Option<HeadObjectOutput>, BlobError> {
        let head = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(Self::key(tenant, blob_ref))
            .send()
            .await;
        match head {
            Ok(h) => Ok(Some(h)),
            Err(e) => {
                let e = e.into_service_error();
                if e.is_not_found() {
                    return Ok(None);
                }
                Err(sdk(e))
            }
        }
    }

    fn signed(request: PresignedRequest, ttl: Duration) -> SignedUrl {
        SignedUrl {
            url: request.uri().to_owned(),
            expires_at: Timestamp::from_unix_ms(
                Timestamp::now().unix_ms() + ttl.as_millis() as i64,
            ),
            headers: request
                .headers()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
                .collect(),
        }
    }
}

#[async_trait::async_trait]
impl BlobStore for S3Blobs {
    async fn upload_url(&self, grant: &UploadGrant, ttl: Duration) -> Result<SignedUrl, BlobError> {
        let size = i64::try_from(grant.size).map_err(backend)?;
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(Self::key(&grant.tenant, &grant.blob_ref))
            .content_type(&grant.mime)
            .content_length(size)
            .metadata(UPLOADED_BY, grant.uploader.as_str())
            .if_none_match("*")
            .presigned(PresigningConfig::expires_in(ttl).map_err(backend)?)
            .await
            .map_err(backend)?;
        Ok(Self::signed(request, ttl))
    }

    /// S3 answers with the disposition and type the URL signs: an
    /// attachment, unless `served_inline` says the type is safe to show.
    async fn download_url(
        &self,
        tenant: &TenantId,
        blob_ref: &BlobRef,
        mime: &str,
        ttl: Duration,
    ) -> Result<SignedUrl, BlobError> {
        let disposition = if crate::served_inline(mime) {
            "inline"
        } else {
            "attachment"
        };
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(Self::key(tenant, blob_ref))
            .response_content_disposition(disposition)
            .response_content_type(mime)
            .presigned(PresigningConfig::expires_in(ttl).map_err(backend)?)
            .await
            .map_err(backend)?;
        Ok(Self::signed(request, ttl))
    }

    async fn info(
        &self,
        tenant: &TenantId,
        blob_ref: &BlobRef,
    ) -> Result<Option<BlobInfo>, BlobError> {
        let Some(head) = self.head(tenant, blob_ref).await? else {
            return Ok(None);
        };
        let uploaded_by = uploader(&head)
            .ok_or_else(|| BlobError::backend_fault("the object has no uploader"))?;
        Ok(Some(BlobInfo {
            mime: head
                .content_type()
                .unwrap_or("application/octet-stream")
                .to_owned(),
            size: head
                .content_length()
                .and_then(|l| u64::try_from(l).ok())
                .unwrap_or(0),
            uploaded_by,
            uploaded_at: head
                .last_modified()
                .and_then(|t| t.to_millis().ok())
                .map_or_else(Timestamp::now, Timestamp::from_unix_ms),
        }))
    }

    async fn put_media(
        &self,
        tenant: &TenantId,
        uploader: &UserId,
        mime: &str,
        bytes: Vec<u8>,
    ) -> Result<(BlobRef, BlobInfo), BlobError> {
        let blob_ref = BlobRef::generate()?;
        let size = bytes.len() as u64;
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(Self::key(tenant, &blob_ref))
            .content_type(mime)
            .metadata(UPLOADED_BY, uploader.as_str())
            .if_none_match("*")
            .body(aws_sdk_s3::primitives::ByteStream::from(bytes))
            .send()
            .await
            .map_err(sdk)?;
        let info = BlobInfo {
            mime: mime.to_owned(),
            size,
            uploaded_by: uploader.clone(),
            uploaded_at: Timestamp::now(),
        };
        Ok((blob_ref, info))
    }

    async fn put_object(&self, name: &str, bytes: Vec<u8>) -> Result<(), BlobError> {
        crate::check_object_name(name)?;
        if bytes.len() as u64 > self.max_object_bytes {
            return Err(crate::object_too_large(
                name,
                bytes.len() as u64,
                self.max_object_bytes,
            ));
        }
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(name)
            .content_type("application/octet-stream")
            .body(aws_sdk_s3::primitives::ByteStream::from(bytes))
            .send()
            .await
            .map_err(sdk)?;
        Ok(())
    }

    async fn get_object(&self, name: &str) -> Result<Vec<u8>, BlobError> {
        crate::check_object_name(name)?;
        let object = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(name)
            .send()
            .await
        {
            Ok(o) => o,
            Err(e) => {
                let e = e.into_service_error();
                if e.is_no_such_key() {
                    return Err(BlobError::NotFound);
                }
                return Err(sdk(e));
            }
        };
        // Read chunk by chunk, never past the maximum: the declared
        // length may lie.
        let max = self.max_object_bytes;
        let declared = object
            .content_length()
            .and_then(|l| u64::try_from(l).ok())
            .unwrap_or(0);
        if declared > max {
            return Err(crate::object_too_large(name, declared, max));
        }
        let mut body = object.body;
        let mut bytes = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(backend)?;
            if (bytes.len() + chunk.len()) as u64 > max {
                return Err(crate::object_too_large(
                    name,
                    (bytes.len() + chunk.len()) as u64,
                    max,
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    fn walk_media(&self) -> Box<dyn MediaWalk + '_> {
        Box::new(S3Walk {
            blobs: self,
            continuation: None,
            done: false,
        })
    }

    async fn delete_media(&self, tenant: &TenantId, blob_ref: &BlobRef) -> Result<(), BlobError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(Self::key(tenant, blob_ref))
            .send()
            .await
            .map_err(sdk)?;
        Ok(())
    }
}

/// A walk over `media/` with a listing's continuation token: S3 resumes
/// where the last page ended. Each page is one listing and a HEAD per
/// blob (for its uploader).
struct S3Walk<'a> {
    blobs: &'a S3Blobs,
    continuation: Option<String>,
    done: bool,
}

#[async_trait::async_trait]
impl MediaWalk for S3Walk<'_> {
    async fn next_page(&mut self, limit: usize) -> Result<Option<Vec<StoredMedia>>, BlobError> {
        if self.done {
            return Ok(None);
        }
        let mut found = Vec::new();
        let max_keys = i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000);
        let mut request = self
            .blobs
            .client
            .list_objects_v2()
            .bucket(&self.blobs.bucket)
            .prefix("media/")
            .max_keys(max_keys);
        if let Some(token) = &self.continuation {
            request = request.continuation_token(token);
        }
        let listed = request.send().await.map_err(sdk)?;
        self.continuation = listed
            .next_continuation_token()
            .filter(|_| listed.is_truncated() == Some(true))
            .map(str::to_owned);
        self.done = self.continuation.is_none();
        // Never more than asked for, whatever the endpoint answers.
        let keys: Vec<(TenantId, BlobRef, u64, Timestamp)> = listed
            .contents()
            .iter()
            .take(limit.max(1))
            .filter_map(|object| {
                let mut parts = object.key()?.splitn(3, '/').skip(1);
                let tenant = crate::tenant_from_hex(parts.next()?)?;
                let blob_ref = BlobRef::parse(parts.next()?).ok()?;
                let size = object
                    .size()
                    .and_then(|s| u64::try_from(s).ok())
                    .unwrap_or(0);
                let uploaded_at = object
                    .last_modified()
                    .and_then(|t| t.to_millis().ok())
                    .map_or_else(Timestamp::now, Timestamp::from_unix_ms);
                Some((tenant, blob_ref, size, uploaded_at))
            })
            .collect();
        let blobs = self.blobs;
        let mut heads = futures::stream::iter(keys)
            .map(|(tenant, blob_ref, size, uploaded_at)| async move {
                let head = blobs.head(&tenant, &blob_ref).await;
                head.map(|h| {
                    h.map(|h| StoredMedia {
                        uploaded_by: uploader(&h),
                        tenant,
                        blob_ref,
                        uploaded_at,
                        size,
                    })
                })
            })
            .buffered(HEADS_AT_ONCE);
        while let Some(head) = heads.next().await {
            // Removed since it was listed: not there to count.
            if let Some(m) = head? {
                found.push(m);
            }
        }
        Ok(Some(found))
    }
}
