//! JSON rows and storage errors.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::StoreError;

pub(super) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Corrupt(format!("encode: {e}")))
}

pub(super) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("decode: {e}")))
}

/// Every storage failure (I/O, a poisoned database) is reported as
/// `Unavailable`: the write did not happen and retrying is safe.
pub(super) fn storage<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Unavailable(e.to_string())
}
