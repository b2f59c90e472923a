//! Blobs: uploaded media (F13) and message archives (F14).
//!
//! A blob is named by its tenant and a `blob_ref` Switchboard makes up
//! (`m` and 32 hex digits of randomness, unguessable). Clients never send
//! bytes through the API: `POST /v1/media` hands out a signed upload URL,
//! the client PUTs the bytes to it, and downloads go through short-lived
//! signed URLs handed out only to those allowed. [`BlobStore`] is that
//! contract; [`local::LocalBlobs`] keeps blobs in a directory and signs URLs
//! that the gateway itself serves (the single-machine default, D4); an S3
//! backend signs URLs that S3 serves.
//!
//! **Architecture invariant:** a blob is stored only through a URL this
//! process signed for that tenant, blob, content type and size, and read
//! only through one signed after the caller's access was checked.

pub mod local;
pub mod s3;
pub mod token;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchboard_protocol::{TenantId, Timestamp, UserId};

/// A blob's name within its tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BlobRef(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a blob_ref: Switchboard makes them up as m and 32 hex digits")]
pub struct BadBlobRef;

impl BlobRef {
    /// A fresh, unguessable reference.
    pub fn generate() -> Result<Self, BlobError> {
        use ring::rand::{SecureRandom, SystemRandom};
        let mut bytes = [0u8; 16];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| BlobError::backend_fault("no randomness available"))?;
        let mut s = String::with_capacity(33);
        s.push('m');
        for b in bytes {
            s.push_str(&format!("{b:02x}"));
        }
        Ok(Self(s))
    }

    pub fn parse(s: &str) -> Result<Self, BadBlobRef> {
        let ok = s.len() == 33
            && s.starts_with('m')
            && s[1..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(BadBlobRef)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for BlobRef {
    type Error = BadBlobRef;
    fn try_from(s: String) -> Result<Self, BadBlobRef> {
        Self::parse(&s)
    }
}

impl From<BlobRef> for String {
    fn from(r: BlobRef) -> String {
        r.0
    }
}

impl fmt::Display for BlobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Types a browser may show inline from a download URL: they run no
/// script. Anything else (SVG, HTML, XML, PDF, unknown types) is served
/// as an attachment, so opening a download URL never renders active
/// content on an origin that matters.
pub fn served_inline(mime: &str) -> bool {
    const INLINE: &[&str] = &[
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/avif",
        "audio/mpeg",
        "audio/ogg",
        "audio/wav",
        "audio/webm",
        "audio/aac",
        "audio/mp4",
        "video/mp4",
        "video/webm",
        "video/ogg",
        "text/plain",
    ];
    INLINE.contains(&mime)
}

/// What is known of a stored blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobInfo {
    pub mime: String,
    pub size: u64,
    pub uploaded_by: UserId,
    pub uploaded_at: Timestamp,
}

/// An upload the caller may make: exactly this type and size, by this user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadGrant {
    pub tenant: TenantId,
    pub blob_ref: BlobRef,
    pub mime: String,
    pub size: u64,
    pub uploader: UserId,
}

/// A signed URL. A backend may give a path (`/v1/blobs/...`) for the
/// gateway that serves it to make absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedUrl {
    pub url: String,
    pub expires_at: Timestamp,
    /// Headers the request must carry as they are (they are signed).
    pub headers: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("no such blob")]
    NotFound,
    #[error("the blob exists already; blobs are written once")]
    Exists,
    #[error("the upload does not match what was granted: {0}")]
    Mismatch(String),
    #[error("the URL is not valid: {0}")]
    BadUrl(String),
    #[error("the URL has expired")]
    Expired,
    /// The storage backend failed. `message` is what is shown, as before
    /// (for S3 the whole chain of the SDK's error); `source` is the error
    /// itself where there is one, and absent where the backend found a
    /// fault of its own (no randomness, an upload finished twice).
    #[error("blob storage: {message}")]
    Backend {
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl BlobError {
    /// The backend's error, shown as it displays itself.
    pub(crate) fn backend(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::backend_shown_as(e.to_string(), e)
    }

    /// The backend's error, shown as `message` (its text with more context).
    pub(crate) fn backend_shown_as(
        message: String,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Backend {
            message,
            source: Some(Box::new(e)),
        }
    }

    /// A fault the backend found itself: there is no underlying error.
    pub(crate) fn backend_fault(message: &str) -> Self {
        Self::Backend {
            message: message.to_owned(),
            source: None,
        }
    }
}

#[async_trait::async_trait]
pub trait BlobStore: Send + Sync + 'static {
    /// A URL the client PUTs the granted bytes to, valid for `ttl`.
    async fn upload_url(&self, grant: &UploadGrant, ttl: Duration) -> Result<SignedUrl, BlobError>;

    /// A URL that reads the blob, valid for `ttl`. The caller has checked
    /// that whoever gets it may read it.
    async fn download_url(
        &self,
        tenant: &TenantId,
        blob_ref: &BlobRef,
        mime: &str,
        ttl: Duration,
    ) -> Result<SignedUrl, BlobError>;

    /// The stored blob's type, size and uploader; `None` before its upload.
    async fn info(
        &self,
        tenant: &TenantId,
        blob_ref: &BlobRef,
    ) -> Result<Option<BlobInfo>, BlobError>;

    /// Stores a media blob Switchboard itself fetched (a link preview's
    /// image, v1.3) under a fresh `blob_ref`, as an upload by `uploader`
    /// would have: it is read, counted and collected like any upload.
    async fn put_media(
        &self,
        tenant: &TenantId,
        uploader: &UserId,
        mime: &str,
        bytes: Vec<u8>,
    ) -> Result<(BlobRef, BlobInfo), BlobError>;

    /// Writes (or overwrites) an object Switchboard itself makes, such as
    /// a message archive, under `name` (checked by [`object_name_ok`]).
    /// One over the store's maximum object size is refused: it could not
    /// be read back.
    async fn put_object(&self, name: &str, bytes: Vec<u8>) -> Result<(), BlobError>;

    /// Reads an object written by [`BlobStore::put_object`]; `NotFound`
    /// when it is missing. At most the store's maximum object size is
    /// read: a larger object is refused without being read whole.
    async fn get_object(&self, name: &str) -> Result<Vec<u8>, BlobError>;

    /// A walk over every uploaded blob, in pages: what the blob collector
    /// runs. The walk keeps its place itself (an open directory, a
    /// listing's continuation), so each page costs the same, however far
    /// in it is.
    fn walk_media(&self) -> Box<dyn MediaWalk + '_>;

    /// Removes an uploaded blob; one that is not there is not an error.
    async fn delete_media(&self, tenant: &TenantId, blob_ref: &BlobRef) -> Result<(), BlobError>;
}

/// One walk over the uploaded blobs ([`BlobStore::walk_media`]).
#[async_trait::async_trait]
pub trait MediaWalk: Send {
    /// The next blobs, at most `limit`, found by looking at no more than
    /// a few entries per blob of `limit` (so a page may hold fewer, even
    /// none); `None` once every blob was seen. A blob uploaded or removed
    /// during the walk may or may not be seen.
    async fn next_page(&mut self, limit: usize) -> Result<Option<Vec<StoredMedia>>, BlobError>;
}

/// One uploaded blob, as the collector sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMedia {
    pub tenant: TenantId,
    pub blob_ref: BlobRef,
    pub uploaded_at: Timestamp,
    /// Bytes stored.
    pub size: u64,
    /// Who uploaded it; `None` for an object of the bucket that does not
    /// say (not written through a grant).
    pub uploaded_by: Option<UserId>,
}

/// A tenant id from its hex form in a path or key.
pub(crate) fn tenant_from_hex(hex: &str) -> Option<TenantId> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    TenantId::new(String::from_utf8(bytes?).ok()?).ok()
}

/// The largest object [`BlobStore::put_object`] writes and
/// [`BlobStore::get_object`] reads back whole, unless configured
/// otherwise: a bound against a corrupt or hostile object (or S3
/// endpoint), far above one conversation's day of archived history.
pub const DEFAULT_MAX_OBJECT_BYTES: u64 = 256 << 20;

/// The refusal of an object over the configured size.
pub(crate) fn object_too_large(name: &str, size: u64, max: u64) -> BlobError {
    BlobError::backend_fault(&format!(
        "object {name} is {size} bytes or more, over the {max} bytes of [blobs] max_object_bytes"
    ))
}

/// Whether `name` may name an object of [`BlobStore::put_object`]: relative
/// `/`-separated parts of `[A-Za-z0-9._:@-]`, none empty or `.` or `..`,
/// starting with `archive/` (so that it never meets an uploaded blob).
pub fn object_name_ok(name: &str) -> bool {
    name.starts_with("archive/")
        && name.len() <= 1024
        && name.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".:@_-".contains(&b))
        })
}

pub(crate) fn check_object_name(name: &str) -> Result<(), BlobError> {
    if object_name_ok(name) {
        Ok(())
    } else {
        Err(BlobError::BadUrl(format!("not an object name: {name:?}")))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn object_names_stay_inside_the_archive() {
        assert!(object_name_ok("archive/acme/c1/20412.json.lz4"));
        assert!(object_name_ok("archive/t.x/a@b:c/1.json.lz4"));
        for bad in [
            "media/61/m0",
            "archive/../media/x",
            "archive//x",
            "archive/./x",
            "/archive/x",
            "archive/x/",
            "archive/x y",
            "archive/x\\y",
        ] {
            assert!(!object_name_ok(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn local_objects_are_written_read_and_missed() {
        let dir = tempfile::tempdir().map_err(|e| e.to_string()).unwrap();
        let blobs = local::LocalBlobs::new(
            dir.path().to_owned(),
            token::Signer::new(b"0123456789abcdef"),
        );
        let name = "archive/acme/c1/1.json.lz4";
        assert!(matches!(
            blobs.get_object(name).await,
            Err(BlobError::NotFound)
        ));
        blobs.put_object(name, b"one".to_vec()).await.unwrap();
        blobs.put_object(name, b"two".to_vec()).await.unwrap();
        assert_eq!(blobs.get_object(name).await.ok(), Some(b"two".to_vec()));
        assert!(matches!(
            blobs.put_object("archive/../x", Vec::new()).await,
            Err(BlobError::BadUrl(_))
        ));
    }
}
