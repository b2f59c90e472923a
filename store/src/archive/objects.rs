//! Where archive objects live, as the archive knows them: by name.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::{StoreError, StoreResult};

/// Where archive objects live (an S3 bucket or a local directory).
#[async_trait]
pub trait ArchiveObjects: Send + Sync + 'static {
    /// Writes (or overwrites) one object.
    async fn put(&self, object: &str, bytes: Vec<u8>) -> StoreResult<()>;
    /// Reads one object; [`StoreError::ArchiveUnreadable`] when it is
    /// missing.
    async fn get(&self, object: &str) -> StoreResult<Vec<u8>>;
}

/// Archive objects in memory: for tests, and for a store without a blob
/// store to archive to.
#[derive(Default)]
pub struct MemoryObjects(Mutex<HashMap<String, Vec<u8>>>);

impl MemoryObjects {
    pub fn remove(&self, object: &str) -> bool {
        self.0
            .lock()
            .map(|mut m| m.remove(object).is_some())
            .unwrap_or(false)
    }
}

#[async_trait]
impl ArchiveObjects for MemoryObjects {
    async fn put(&self, object: &str, bytes: Vec<u8>) -> StoreResult<()> {
        self.0
            .lock()
            .map_err(|_| StoreError::Unavailable("archive map poisoned".into()))?
            .insert(object.to_owned(), bytes);
        Ok(())
    }

    async fn get(&self, object: &str) -> StoreResult<Vec<u8>> {
        self.0
            .lock()
            .map_err(|_| StoreError::Unavailable("archive map poisoned".into()))?
            .get(object)
            .cloned()
            .ok_or_else(|| StoreError::ArchiveUnreadable {
                object: object.to_owned(),
                reason: "the object is missing".into(),
            })
    }
}
