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

use switchboard_protocol::{TenantId, Timestamp, UserId};
use tokio::io::AsyncWriteExt;

use crate::token::{Claims, Op, Signer};
use crate::{
    BlobError, BlobInfo, BlobRef, BlobStore, MediaWalk, SignedUrl, StoredMedia, UploadGrant,
};

/// Where the gateway serves local blobs; a signed token follows.
pub const SERVE_PATH: &str = "/v1/blobs/";

pub struct LocalBlobs {
    dir: PathBuf,
    signer: Signer,
    /// The largest object written or read whole (`put_object`,
    /// `get_object`).
    max_object_bytes: u64,
}

fn io(e: std::io::Error) -> BlobError {
    BlobError::backend(e)
}

impl LocalBlobs {
    pub fn new(dir: PathBuf, signer: Signer) -> Self {
        Self {
            dir,
            signer,
            max_object_bytes: crate::DEFAULT_MAX_OBJECT_BYTES,
        }
    }

    /// Sets the largest object written or read whole.
    pub fn with_max_object_bytes(mut self, max: u64) -> Self {
        self.max_object_bytes = max;
        self
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

    /// Starts an upload made to a URL of [`BlobStore::upload_url`], before
    /// a byte of its body is read: the token must verify, and the content
    /// type and the declared length (when the request has one) must be
    /// the ones granted. The body then goes to [`Upload::write`] chunk by
    /// chunk, straight to disk.
    pub async fn begin_upload(
        &self,
        token: &str,
        content_type: &str,
        declared_len: Option<u64>,
    ) -> Result<Upload, BlobError> {
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
        if let Some(len) = declared_len
            && len != size
        {
            return Err(BlobError::Mismatch(format!(
                "Content-Length is {len}, the upload was granted for {size} bytes"
            )));
        }
        let (data, meta) = self.paths(&claims.tenant, &claims.blob_ref);
        if let Some(parent) = data.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(io)?;
        }
        // Claimed by creating `<blob_ref>.claim` exclusively: of two
        // uploads to one URL at once, one writes and the other is refused.
        let claim = data.with_extension(CLAIM);
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
        let part = data.with_extension(PART);
        let file = match tokio::fs::File::create(&part).await {
            Ok(f) => f,
            Err(e) => {
                let _ = tokio::fs::remove_file(&claim).await;
                return Err(io(e));
            }
        };
        Ok(Upload {
            file: Some(file),
            written: 0,
            info: BlobInfo {
                mime,
                size,
                uploaded_by: uploader,
                uploaded_at: Timestamp::now(),
            },
            data,
            meta,
            part,
            claim,
            done: false,
        })
    }

    /// The blob a URL of [`BlobStore::download_url`] names, opened to be
    /// streamed.
    pub async fn open_download(
        &self,
        token: &str,
    ) -> Result<(BlobInfo, tokio::fs::File), BlobError> {
        let claims = self.signer.verify(token, Op::Get, Timestamp::now())?;
        let info = self
            .info(&claims.tenant, &claims.blob_ref)
            .await?
            .ok_or(BlobError::NotFound)?;
        let (data, _) = self.paths(&claims.tenant, &claims.blob_ref);
        match tokio::fs::File::open(&data).await {
            Ok(f) => Ok((info, f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BlobError::NotFound),
            Err(e) => Err(io(e)),
        }
    }

    /// Removes what uploads cut short by a crash left behind: `.part`
    /// files, and claims of blobs that were never finished (their grant
    /// may then be used again). Only files untouched for `quiet` are
    /// removed, so an upload running in another process is left alone.
    /// Returns how many files went.
    pub async fn sweep_unfinished(&self, quiet: Duration) -> Result<usize, BlobError> {
        let mut removed = 0;
        let mut tenants = match tokio::fs::read_dir(&self.dir).await {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(io(e)),
        };
        let stale = |m: &std::fs::Metadata| {
            m.modified()
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= quiet)
        };
        while let Some(tenant) = tenants.next_entry().await.map_err(io)? {
            // `archive/` holds objects, not uploads.
            if tenant.file_name() == "archive" || !tenant.file_type().await.map_err(io)?.is_dir() {
                continue;
            }
            let mut files = tokio::fs::read_dir(tenant.path()).await.map_err(io)?;
            while let Some(file) = files.next_entry().await.map_err(io)? {
                let path = file.path();
                let Some(ext) = path.extension().and_then(|e| e.to_str()) else {
                    continue;
                };
                let Ok(meta) = file.metadata().await else {
                    continue;
                };
                let orphan = match ext {
                    PART => stale(&meta),
                    CLAIM => {
                        let finished = tokio::fs::try_exists(path.with_extension("json"))
                            .await
                            .unwrap_or(true);
                        let part_busy = tokio::fs::metadata(path.with_extension(PART))
                            .await
                            .is_ok_and(|m| !stale(&m));
                        !finished && !part_busy && stale(&meta)
                    }
                    _ => false,
                };
                if orphan && tokio::fs::remove_file(&path).await.is_ok() {
                    tracing::info!(file = %path.display(), "removed what an interrupted upload left");
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }
}

const PART: &str = "part";
const CLAIM: &str = "claim";

/// An upload being written: its body goes to `<blob_ref>.part`, and
/// [`Upload::finish`] makes it the blob once every granted byte is there.
/// Dropped unfinished (a mismatch, a client gone, an error), it leaves
/// nothing behind and the grant can be used again.
pub struct Upload {
    file: Option<tokio::fs::File>,
    written: u64,
    info: BlobInfo,
    data: PathBuf,
    meta: PathBuf,
    part: PathBuf,
    claim: PathBuf,
    done: bool,
}

impl Upload {
    /// Appends a chunk of the body; more bytes than granted is a mismatch.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), BlobError> {
        let size = self.info.size;
        let written = self.written.saturating_add(chunk.len() as u64);
        if written > size {
            return Err(BlobError::Mismatch(format!(
                "more than the {size} bytes the upload was granted for"
            )));
        }
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| BlobError::backend_fault("upload already finished"))?;
        file.write_all(chunk).await.map_err(io)?;
        self.written = written;
        Ok(())
    }

    /// Makes the blob: every granted byte must have arrived.
    pub async fn finish(mut self) -> Result<BlobInfo, BlobError> {
        let size = self.info.size;
        if self.written != size {
            return Err(BlobError::Mismatch(format!(
                "{} bytes sent, the upload was granted for {size}",
                self.written
            )));
        }
        let mut file = self
            .file
            .take()
            .ok_or_else(|| BlobError::backend_fault("upload already finished"))?;
        file.flush().await.map_err(io)?;
        file.sync_all().await.map_err(io)?;
        drop(file);
        tokio::fs::rename(&self.part, &self.data)
            .await
            .map_err(io)?;
        let json = serde_json::to_vec(&self.info).map_err(BlobError::backend)?;
        write_synced(&self.meta, &json).await?;
        self.done = true;
        Ok(self.info.clone())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Blocking, but two unlinks: cheaper than a task, and sure to run.
        let _ = std::fs::remove_file(&self.part);
        let _ = std::fs::remove_file(&self.data);
        let _ = std::fs::remove_file(&self.claim);
    }
}

/// Writes `bytes` to a temporary file beside `path`, syncs it and renames
/// it into place.
async fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), BlobError> {
    let tmp = path.with_extension(PART);
    let mut f = tokio::fs::File::create(&tmp).await.map_err(io)?;
    f.write_all(bytes).await.map_err(io)?;
    f.sync_all().await.map_err(io)?;
    drop(f);
    tokio::fs::rename(&tmp, path).await.map_err(io)
}

/// A walk over the directory: the tenants' directories one after the
/// other, each read once from an open handle, so that a page costs its
/// own entries only (rescanning the directory for each page made a walk
/// quadratic in the blobs).
struct LocalWalk<'a> {
    blobs: &'a LocalBlobs,
    /// The root's entries; `None` before the walk begins.
    tenants: Option<tokio::fs::ReadDir>,
    /// The tenant being walked and its directory's entries.
    current: Option<(TenantId, tokio::fs::ReadDir)>,
    done: bool,
    /// Directory entries read so far: what a walk costs.
    entries_read: u64,
}

impl LocalWalk<'_> {
    /// Opens the next tenant's directory; false when there is none.
    async fn next_tenant(&mut self) -> Result<bool, BlobError> {
        if self.tenants.is_none() {
            match tokio::fs::read_dir(&self.blobs.dir).await {
                Ok(d) => self.tenants = Some(d),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(io(e)),
            }
        }
        let Some(tenants) = self.tenants.as_mut() else {
            return Ok(false);
        };
        while let Some(d) = tenants.next_entry().await.map_err(io)? {
            self.entries_read += 1;
            let name = d.file_name().to_string_lossy().into_owned();
            // Hex names only: `archive/` holds objects, not uploads.
            let Some(tenant) = crate::tenant_from_hex(&name) else {
                continue;
            };
            match tokio::fs::read_dir(d.path()).await {
                Ok(files) => {
                    self.current = Some((tenant, files));
                    return Ok(true);
                }
                // Gone meanwhile, or not a directory.
                Err(_) => continue,
            }
        }
        Ok(false)
    }
}

#[async_trait::async_trait]
impl MediaWalk for LocalWalk<'_> {
    async fn next_page(&mut self, limit: usize) -> Result<Option<Vec<StoredMedia>>, BlobError> {
        if self.done {
            return Ok(None);
        }
        let limit = limit.max(1);
        // A blob is three files (its bytes, its record, its claim): a page
        // reads at most that many entries per blob it may hold.
        let budget = self.entries_read + 3 * limit as u64;
        let mut found = Vec::new();
        while found.len() < limit && !self.done && self.entries_read < budget {
            let Some((tenant, files)) = self.current.as_mut() else {
                if !self.next_tenant().await? {
                    self.done = true;
                }
                continue;
            };
            let Some(f) = files.next_entry().await.map_err(io)? else {
                self.current = None;
                continue;
            };
            self.entries_read += 1;
            let name = f.file_name().to_string_lossy().into_owned();
            let Some(blob_ref) = name
                .strip_suffix(".json")
                .and_then(|b| BlobRef::parse(b).ok())
            else {
                continue;
            };
            // Removed since it was listed: not there to count.
            let Some(info) = self.blobs.info(tenant, &blob_ref).await? else {
                continue;
            };
            found.push(StoredMedia {
                tenant: tenant.clone(),
                blob_ref,
                uploaded_at: info.uploaded_at,
                size: info.size,
                uploaded_by: Some(info.uploaded_by),
            });
        }
        Ok(Some(found))
    }
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

    /// The gateway serving the URL sets the disposition from the blob's
    /// own record (`served_inline`), so `mime` is not needed here.
    async fn download_url(
        &self,
        tenant: &TenantId,
        blob_ref: &BlobRef,
        _mime: &str,
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
                .map_err(|e| BlobError::backend_shown_as(format!("{}: {e}", meta.display()), e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(e)),
        }
    }

    async fn put_media(
        &self,
        tenant: &TenantId,
        uploader: &UserId,
        mime: &str,
        bytes: Vec<u8>,
    ) -> Result<(BlobRef, BlobInfo), BlobError> {
        let blob_ref = BlobRef::generate()?;
        let (data, meta) = self.paths(tenant, &blob_ref);
        if let Some(parent) = data.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(io)?;
        }
        let info = BlobInfo {
            mime: mime.to_owned(),
            size: bytes.len() as u64,
            uploaded_by: uploader.clone(),
            uploaded_at: Timestamp::now(),
        };
        // The bytes first, then the metadata that makes it a blob: a
        // crash between them leaves a file the sweep removes.
        write_synced(&data, &bytes).await?;
        let json = serde_json::to_vec(&info).map_err(BlobError::backend)?;
        write_synced(&meta, &json).await?;
        Ok((blob_ref, info))
    }

    /// Objects live under `archive/` in the directory, beside the tenants'
    /// hex-named media directories (a hex name is never `archive`).
    async fn put_object(&self, name: &str, bytes: Vec<u8>) -> Result<(), BlobError> {
        crate::check_object_name(name)?;
        if bytes.len() as u64 > self.max_object_bytes {
            return Err(crate::object_too_large(
                name,
                bytes.len() as u64,
                self.max_object_bytes,
            ));
        }
        let path = self.dir.join(name);
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(io)?;
        }
        write_synced(&path, &bytes).await
    }

    fn walk_media(&self) -> Box<dyn MediaWalk + '_> {
        Box::new(LocalWalk {
            blobs: self,
            tenants: None,
            current: None,
            done: false,
            entries_read: 0,
        })
    }

    async fn delete_media(&self, tenant: &TenantId, blob_ref: &BlobRef) -> Result<(), BlobError> {
        let (data, meta) = self.paths(tenant, blob_ref);
        // The record first: without it the blob is gone to every reader.
        for path in [meta, data.clone(), data.with_extension(CLAIM)] {
            match tokio::fs::remove_file(&path).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(e)),
            }
        }
        Ok(())
    }

    async fn get_object(&self, name: &str) -> Result<Vec<u8>, BlobError> {
        use tokio::io::AsyncReadExt;
        crate::check_object_name(name)?;
        let file = match tokio::fs::File::open(self.dir.join(name)).await {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BlobError::NotFound),
            Err(e) => return Err(io(e)),
        };
        let max = self.max_object_bytes;
        let size = file.metadata().await.map_err(io)?.len();
        if size > max {
            return Err(crate::object_too_large(name, size, max));
        }
        // The file may grow meanwhile: never more than the maximum.
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .await
            .map_err(io)?;
        if bytes.len() as u64 > max {
            return Err(crate::object_too_large(name, bytes.len() as u64, max));
        }
        Ok(bytes)
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
                let mut upload = blobs.begin_upload(&token, "text/plain", Some(3)).await?;
                upload.write(body.as_bytes()).await?;
                upload.finish().await
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

    async fn granted(blobs: &LocalBlobs, size: u64) -> (UploadGrant, String) {
        let grant = UploadGrant {
            tenant: TenantId::new("acme").unwrap(),
            blob_ref: BlobRef::generate().unwrap(),
            mime: "text/plain".into(),
            size,
            uploader: UserId::new("alice").unwrap(),
        };
        let url = blobs
            .upload_url(&grant, Duration::from_secs(60))
            .await
            .unwrap();
        (grant, url.url.trim_start_matches(SERVE_PATH).to_owned())
    }

    fn files_in(dir: &Path) -> Vec<String> {
        let mut names = Vec::new();
        for tenant in std::fs::read_dir(dir).unwrap() {
            for f in std::fs::read_dir(tenant.unwrap().path()).unwrap() {
                names.push(f.unwrap().file_name().to_string_lossy().into_owned());
            }
        }
        names
    }

    #[tokio::test]
    async fn a_refused_upload_reads_nothing_and_a_cut_one_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = LocalBlobs::new(dir.path().to_owned(), Signer::new(b"k"));
        let (grant, token) = granted(&blobs, 4).await;
        // Refused on the headers alone.
        assert!(matches!(
            blobs
                .begin_upload("bogus.token", "text/plain", Some(4))
                .await,
            Err(BlobError::BadUrl(_))
        ));
        assert!(matches!(
            blobs.begin_upload(&token, "text/html", Some(4)).await,
            Err(BlobError::Mismatch(_))
        ));
        assert!(matches!(
            blobs.begin_upload(&token, "text/plain", Some(5)).await,
            Err(BlobError::Mismatch(_))
        ));
        // More bytes than granted, with no length declared: cut off.
        let mut upload = blobs
            .begin_upload(&token, "text/plain", None)
            .await
            .unwrap();
        upload.write(b"abc").await.unwrap();
        assert!(matches!(
            upload.write(b"de").await,
            Err(BlobError::Mismatch(_))
        ));
        drop(upload);
        assert!(
            files_in(dir.path()).is_empty(),
            "{:?}",
            files_in(dir.path())
        );
        // Too few: refused at the end, and the grant still works after.
        let mut upload = blobs
            .begin_upload(&token, "text/plain", None)
            .await
            .unwrap();
        upload.write(b"abc").await.unwrap();
        assert!(matches!(upload.finish().await, Err(BlobError::Mismatch(_))));
        let mut upload = blobs
            .begin_upload(&token, "text/plain", Some(4))
            .await
            .unwrap();
        upload.write(b"ab").await.unwrap();
        upload.write(b"cd").await.unwrap();
        assert_eq!(upload.finish().await.unwrap().size, 4);
        let info = blobs.info(&grant.tenant, &grant.blob_ref).await.unwrap();
        assert_eq!(info.map(|i| i.size), Some(4));
    }

    /// Writes a finished blob as an upload leaves it, without the upload.
    fn stored(dir: &Path, tenant: &str, uploader: &str, size: u64) -> BlobRef {
        let blob_ref = BlobRef::generate().unwrap();
        let hex: String = tenant.bytes().map(|b| format!("{b:02x}")).collect();
        let tenant_dir = dir.join(hex);
        std::fs::create_dir_all(&tenant_dir).unwrap();
        std::fs::write(tenant_dir.join(blob_ref.as_str()), vec![0u8; size as usize]).unwrap();
        let info = BlobInfo {
            mime: "text/plain".into(),
            size,
            uploaded_by: UserId::new(uploader).unwrap(),
            uploaded_at: Timestamp::now(),
        };
        std::fs::write(
            tenant_dir.join(format!("{blob_ref}.json")),
            serde_json::to_vec(&info).unwrap(),
        )
        .unwrap();
        blob_ref
    }

    #[tokio::test]
    async fn a_walk_sees_every_blob_once_and_each_page_costs_its_own_entries() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = LocalBlobs::new(dir.path().to_owned(), Signer::new(b"k"));
        let mut made = std::collections::HashSet::new();
        for i in 0..600 {
            let (tenant, user) = if i % 3 == 0 {
                ("acme", "a")
            } else {
                ("globex", "b")
            };
            made.insert(stored(dir.path(), tenant, user, 5).to_string());
        }
        // Something that is no upload, beside them.
        std::fs::create_dir_all(dir.path().join("archive/acme")).unwrap();
        let mut walk = LocalWalk {
            blobs: &blobs,
            tenants: None,
            current: None,
            done: false,
            entries_read: 0,
        };
        let mut seen = std::collections::HashSet::new();
        let (mut pages, mut read_before) = (0, 0);
        while let Some(page) = walk.next_page(50).await.unwrap() {
            pages += 1;
            assert!(page.len() <= 50);
            for m in &page {
                assert_eq!(m.size, 5);
                assert!(m.uploaded_by.is_some());
                assert!(seen.insert(m.blob_ref.to_string()), "seen twice");
            }
            // At most three entries per blob of the page, and a tenant
            // directory: never the whole directory again.
            let cost = walk.entries_read - read_before;
            assert!(cost <= 3 * 50 + 1, "page {pages} read {cost} entries");
            read_before = walk.entries_read;
        }
        assert_eq!(seen, made);
        // 50 blobs a page at most, and at least 50 of the 1203 entries
        // read by each page but the last.
        assert!((12..=25).contains(&pages), "{pages} pages");
        assert!(walk.next_page(50).await.unwrap().is_none(), "over for good");
    }

    #[tokio::test]
    async fn the_sweep_removes_what_a_crash_left() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = LocalBlobs::new(dir.path().to_owned(), Signer::new(b"k"));
        let (_, token) = granted(&blobs, 2).await;
        let (_, done) = granted(&blobs, 2).await;
        let mut finished = blobs
            .begin_upload(&done, "text/plain", Some(2))
            .await
            .unwrap();
        finished.write(b"ok").await.unwrap();
        finished.finish().await.unwrap();
        let mut upload = blobs
            .begin_upload(&token, "text/plain", Some(2))
            .await
            .unwrap();
        upload.write(b"a").await.unwrap();
        // A crash: the process is gone without dropping the upload.
        std::mem::forget(upload);
        assert_eq!(files_in(dir.path()).len(), 5, "{:?}", files_in(dir.path()));
        // Fresh files are left alone (another process may be writing them).
        assert_eq!(
            blobs
                .sweep_unfinished(Duration::from_secs(60))
                .await
                .unwrap(),
            0
        );
        assert_eq!(blobs.sweep_unfinished(Duration::ZERO).await.unwrap(), 2);
        let mut left = files_in(dir.path());
        left.sort();
        assert_eq!(
            left.len(),
            3,
            "the finished blob, its meta and its claim: {left:?}"
        );
        // The grant of the interrupted upload works again.
        let mut again = blobs
            .begin_upload(&token, "text/plain", Some(2))
            .await
            .unwrap();
        again.write(b"ab").await.unwrap();
        again.finish().await.unwrap();
    }
}
