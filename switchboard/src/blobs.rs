//! The blob store of this process's own writes: message archives (F14)
//! and the images of link previews (v1.3).

use std::path::Path;
use std::sync::Arc;

use switchboard_blob::BlobStore;
use switchboard_blob::local::LocalBlobs;
use switchboard_blob::s3::S3Blobs;
use switchboard_blob::token::Signer;

use crate::config::{BlobBackend, BlobsConfig, FileConfig};

/// The blob store of `[blobs]` (S3), or `<data_dir>/blobs`: where archives
/// and the images of link previews are written. Its URLs are never
/// handed out from here: the signer is unused.
pub fn blob_store(data_dir: &Path, file: &FileConfig) -> anyhow::Result<Arc<dyn BlobStore>> {
    let max = BlobsConfig::max_object_bytes(file.blobs.as_ref());
    Ok(match &file.blobs {
        Some(blobs) if blobs.backend == BlobBackend::S3 => {
            Arc::new(S3Blobs::new(&blobs.s3()?).with_max_object_bytes(max))
        }
        _ => Arc::new(
            LocalBlobs::new(data_dir.join("blobs"), Signer::random()?).with_max_object_bytes(max),
        ),
    })
}
