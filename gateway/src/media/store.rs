//! Where a gateway keeps media.

use std::sync::Arc;

use switchboard_blob::BlobStore;
use switchboard_blob::local::LocalBlobs;

use super::usage::MediaUsage;

/// Where a gateway keeps media: a blob store, and when it is the local
/// one, the same store to serve its signed URLs from.
pub struct MediaStore {
    pub blobs: Arc<dyn BlobStore>,
    pub local: Option<Arc<LocalBlobs>>,
    /// What each user and tenant stores, for the storage quotas.
    pub(crate) usage: MediaUsage,
}

impl MediaStore {
    /// A store whose URLs something else serves (S3).
    pub fn remote(blobs: Arc<dyn BlobStore>) -> Self {
        Self {
            blobs,
            local: None,
            usage: MediaUsage::default(),
        }
    }

    pub fn local(blobs: LocalBlobs) -> Self {
        let local = Arc::new(blobs);
        Self {
            blobs: local.clone(),
            local: Some(local),
            usage: MediaUsage::default(),
        }
    }
}
