//! Compare-and-set writes to a KV bucket: the way every read-change-write
//! of shared records here (key directory, push tokens) stays correct with
//! several gateways writing at once.

use async_nats::jetstream::kv;
use bytes::Bytes;

/// Writes `value` at `key` if the key is still at `revision` (0: absent or
/// never written). `Ok(false)` when another writer got there first: read
/// again and retry. Any other failure is the client's error, kept whole
/// for the caller's error type.
pub async fn write_if(
    kv: &kv::Store,
    key: &str,
    value: Bytes,
    revision: u64,
) -> Result<bool, crate::Cause> {
    if revision == 0 {
        match kv.create(key, value).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(crate::cause(e)),
        }
    } else {
        match kv.update(key, value, revision).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(false),
            Err(e) => Err(crate::cause(e)),
        }
    }
}
