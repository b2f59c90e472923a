//! Blobs in a local directory (the single-machine default, D4), served by
//! the gateway at `/v1/blobs/{token}` through URLs signed here.
//!
//! Layout: `<dir>/<tenant as hex>/<blob_ref>` holds the bytes and
//! `<blob_ref>.json` what is known of them; the second is written last, so
//! a blob exists once both are on disk. `<blob_ref>.claim` marks an upload
//! begun, so a blob is written once even by two uploads at the same time. Every file is written to a
//! temporary name, synced and renamed. Tenant ids are hex in paths, so no
//! id can name a directory outside `dir`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use switchboard_protocol::{TenantId, Timestamp};
use tokio::io::AsyncWriteExt;

use crate::token::{Claims, Op, Signer};
use crate::{BlobError, BlobInfo, BlobRef, BlobStore, SignedUrl, UploadGrant};

/// Where the gateway serves local blobs; a signed token follows.
pub const SERVE_PATH: &str = "/v1/blobs/";

pub struct LocalBlobs {
    dir: PathBuf,
    signer: Signer,
}

fn io(e: std::io::Error) -> BlobError {
    BlobError::Backend(e.to_string())
}

impl LocalBlobs {
    pub fn new(dir: PathBuf, signer: Signer) -> Self {
        Self { dir, signer }
    }

    fn tenant_dir(&self, tenant: &TenantId) -> PathBuf {
        let hex: String = tenant
            .as_str()
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.dir.join(hex)
    }

    fn paths(&self, tenant: &TenantId, blob_ref: &BlobRef) -> (PathBuf, PathBuf) {
        let dir = self.tenant_dir(tenant);
        (
            dir.join(blob_ref.as_str()),
            dir.join(format!("{}.json", blob_ref.as_str())),
        )
    }

    fn url(&self, claims: &Claims) -> Result<SignedUrl, BlobError> {
        Ok(SignedUrl {
            url: format!("{SERVE_PATH}{}", self.signer.sign(claims)?),
            expires_at: Timestamp::from_unix_ms(claims.exp),
            headers: claims
                .mime
                .iter()
                .map(|m| ("content-type".to_owned(), m.clone()))
                .collect(),
        })
    }

    /// Stores an upload made to a URL of [`BlobStore::upload_url`]: the
    /// content type and size must be the ones granted.
    pub async fn accept_upload(
        &self,
        token: &str,
        content_type: &str,
        bytes: Bytes,
    ) -> Result<BlobInfo, BlobError> {
        let claims = self.signer.verify(token, Op::Put, Timestamp::now())?;
        let (Some(mime), Some(size), Some(uploader)) = (claims.mime, claims.size, claims.uploader)
        else {
            return Err(BlobError::BadUrl("not an upload grant".into()));
        };
        if content_type != mime {
            return Err(BlobError::Mismatch(format!(
                "Content-Type is {content_type:?}, the upload was granted for {mime:?}"
            )));
        }
        if bytes.len() as u64 != size {
            return Err(BlobError::Mismatch(format!(
                "{} bytes sent, the upload was granted for {size}",
                bytes.len()
            )));
        }
        let (data, meta) = self.paths(&claims.tenant, &claims.blob_ref);
        if let Some(parent) = data.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(io)?;
        }
        // Claimed by creating `<blob_ref>.claim` exclusively: of two
        // uploads to one URL at once, one writes and the other is refused.
        let claim = data.with_extension("claim");
        match tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&claim)
            .await
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(BlobError::Exists);
            }
            Err(e) => return Err(io(e)),
        }
        let info = BlobInfo {
            mime,
            size,
            uploaded_by: uploader,
            uploaded_at: Timestamp::now(),
        };
        let json = serde_json::to_vec(&info).map_err(|e| BlobError::Backend(e.to_string()))?;
        let written = async {
            write_synced(&data, &bytes).await?;
            write_synced(&meta, &json).await
        }
        .await;
        if written.is_err() {
            // Nothing usable was stored: let the grant be used again.
            let _ = tokio::fs::remove_file(&claim).await;
        }
        written.map(|()| info)
    }

    /// The blob a URL of [`BlobStore::download_url`] names.
    pub async fn open_download(&self, token: &str) -> Result<(BlobInfo, Vec<u8>), BlobError> {
        let claims = self.signer.verify(token, Op::Get, Timestamp::now())?;
        let info = self
            .info(&claims.tenant, &claims.blob_ref)
            .await?
            .ok_or(BlobError::NotFound)?;
        let (data, _) = self.paths(&claims.tenant, &claims.blob_ref);
        let bytes = match tokio::fs::read(&data).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BlobError::NotFound),
            Err(e) => return Err(io(e)),
        };
        Ok((info, bytes))
    }
}

/// Writes `bytes` to a temporary file beside `path`, syncs it and renames
/// it into place.
async fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), BlobError> {
    let tmp = path.with_extension("part");
    let mut f = tokio::fs::File::create(&tmp).await.map_err(io)?;
    f.write_all(bytes).await.map_err(io)?;
    f.sync_all().await.map_err(io)?;
    drop(f);
    tokio::fs::rename(&tmp, path).await.map_err(io)
}

fn expiry(ttl: Duration) -> i64 {
    Timestamp::now().unix_ms() + ttl.as_millis() as i64
}

#[async_trait::async_trait]
impl BlobStore for LocalBlobs {
    async fn upload_url(&self, grant: &UploadGrant, ttl: Duration) -> Result<SignedUrl, BlobError> {
        self.url(&Claims {
            op: Op::Put,
            tenant: grant.tenant.clone(),
            blob_ref: grant.blob_ref.clone(),
            mime: Some(grant.mime.clone()),
            size: Some(grant.size),
            uploader: Some(grant.uploader.clone()),
            exp: expiry(ttl),
        })
    }

    async fn download_url(
        &self,
        tenant: &TenantId,
        blob_ref: &BlobRef,
        ttl: Duration,
    ) -> Result<SignedUrl, BlobError> {
        self.url(&Claims {
            op: Op::Get,
            tenant: tenant.clone(),
            blob_ref: blob_ref.clone(),
            mime: None,
            size: None,
            uploader: None,
            exp: expiry(ttl),
        })
    }

    async fn info(
        &self,
        tenant: &TenantId,
        blob_ref: &BlobRef,
    ) -> Result<Option<BlobInfo>, BlobError> {
        let (_, meta) = self.paths(tenant, blob_ref);
        match tokio::fs::read(&meta).await {
            Ok(json) => serde_json::from_slice(&json)
                .map(Some)
                .map_err(|e| BlobError::Backend(format!("{}: {e}", meta.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(e)),
        }
    }

    /// Objects live under `archive/` in the directory, beside the tenants'
    /// hex-named media directories (a hex name is never `archive`).
    async fn put_object(&self, name: &str, bytes: Vec<u8>) -> Result<(), BlobError> {
        crate::check_object_name(name)?;
        let path = self.dir.join(name);
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(io)?;
        }
        write_synced(&path, &bytes).await
    }

    async fn get_object(&self, name: &str) -> Result<Vec<u8>, BlobError> {
        crate::check_object_name(name)?;
        match tokio::fs::read(self.dir.join(name)).await {
            Ok(bytes) => Ok(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BlobError::NotFound),
            Err(e) => Err(io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use switchboard_protocol::UserId;

    #[tokio::test]
    async fn concurrent_uploads_to_one_url_write_once() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = std::sync::Arc::new(LocalBlobs::new(dir.path().to_owned(), Signer::new(b"k")));
        let grant = UploadGrant {
            tenant: TenantId::new("acme").unwrap(),
            blob_ref: BlobRef::generate().unwrap(),
            mime: "text/plain".into(),
            size: 3,
            uploader: UserId::new("alice").unwrap(),
        };
        let url = blobs
            .upload_url(&grant, Duration::from_secs(60))
            .await
            .unwrap();
        let token = url.url.trim_start_matches(SERVE_PATH).to_owned();
        let uploads = ["abc", "xyz"].map(|body| {
            let (blobs, token) = (blobs.clone(), token.clone());
            tokio::spawn(async move {
                blobs
                    .accept_upload(&token, "text/plain", Bytes::from_static(body.as_bytes()))
                    .await
            })
        });
        let mut ok = 0;
        for u in uploads {
            match u.await.unwrap() {
                Ok(_) => ok += 1,
                Err(BlobError::Exists) => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(ok, 1, "exactly one upload wins");
        let info = blobs
            .info(&grant.tenant, &grant.blob_ref)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((info.mime.as_str(), info.size), ("text/plain", 3));
    }
}
