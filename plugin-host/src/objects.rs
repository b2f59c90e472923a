//! Reading a component out of a JetStream object store within bounds.
//!
//! A version record's `size` and an object's own description come from
//! the backbone, which any process with write access to it could forge:
//! neither sizes an allocation. At most `max_component_bytes` (and one
//! more byte, to tell a larger object) is read, whatever either claims.

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::host;
use crate::record::VersionRecord;
use crate::version::LoadError;

/// Why a component could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("the object holds {claimed} bytes or more, over max_component_bytes ({max})")]
    TooLarge { claimed: u64, max: usize },
    #[error("reading the object: {0}")]
    Io(#[source] std::io::Error),
}

/// Reads a whole object that claims to hold `claimed` bytes, refusing one
/// that claims or turns out to hold more than `max`.
pub async fn read_bounded(
    object: impl AsyncRead + Unpin,
    claimed: u64,
    max: usize,
) -> Result<Vec<u8>, ReadError> {
    if claimed > max as u64 {
        return Err(ReadError::TooLarge { claimed, max });
    }
    let mut bytes = Vec::with_capacity(claimed as usize);
    object
        .take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(ReadError::Io)?;
    if bytes.len() > max {
        return Err(ReadError::TooLarge {
            claimed: bytes.len() as u64,
            max,
        });
    }
    Ok(bytes)
}

/// The component a version record names, from its object: read within
/// `max` whatever the record's `size` claims, and checked against its
/// digest.
pub async fn read_component(
    object: impl tokio::io::AsyncRead + Unpin,
    record: &VersionRecord,
    max: usize,
) -> Result<Vec<u8>, LoadError> {
    let bytes = read_bounded(object, record.size, max)
        .await
        .map_err(|e| match e {
            ReadError::TooLarge { .. } => LoadError::TooLarge { max },
            ReadError::Io(e) => LoadError::Read(e),
        })?;
    if host::digest(&bytes) != record.digest {
        return Err(LoadError::DigestMismatch);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn a_claimed_size_never_sizes_the_read() {
        let data = vec![7u8; 100];
        // A record that claims 2^50 bytes is refused before any allocation.
        assert!(matches!(
            read_bounded(data.as_slice(), 1 << 50, 1000).await,
            Err(ReadError::TooLarge { .. })
        ));
        // One that claims less than it holds reads no more than the bound.
        assert!(matches!(
            read_bounded(data.as_slice(), 10, 50).await,
            Err(ReadError::TooLarge { claimed: 51, .. })
        ));
        // At the bound, and under a claim that was too small, it reads all.
        assert_eq!(
            read_bounded(data.as_slice(), 100, 100).await.unwrap().len(),
            100
        );
        assert_eq!(
            read_bounded(data.as_slice(), 1, 100).await.unwrap().len(),
            100
        );
    }
}
