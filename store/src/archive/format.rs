//! An archive object: where it lives and its bytes (versioned JSON,
//! LZ4-framed), read back within a bound.

use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::{BucketContents, BucketKey, StoreError, StoreResult};

/// The largest archive object read back, decompressed: a bound against a
/// corrupt or hostile object, far above any real day of one conversation.
pub const MAX_OBJECT_BYTES: u64 = 1 << 30;

/// The object a bucket is archived to. Ids are `[A-Za-z0-9._:@-]`, all
/// safe in S3 keys and file names.
pub fn object_name(bucket: &BucketKey) -> String {
    format!(
        "archive/{}/{}/{}.json.lz4",
        bucket.tenant, bucket.conversation_id, bucket.day
    )
}

/// The object's format: versioned JSON, LZ4-framed.
#[derive(Serialize, Deserialize)]
struct ArchiveFile {
    format: u32,
    #[serde(flatten)]
    contents: BucketContents,
}

const FORMAT: u32 = 1;

pub fn encode(contents: &BucketContents) -> StoreResult<Vec<u8>> {
    let file = ArchiveFile {
        format: FORMAT,
        contents: contents.clone(),
    };
    let json = serde_json::to_vec(&file)
        .map_err(|e| StoreError::Corrupt(format!("encode archive: {e}")))?;
    let mut out = lz4_flex::frame::FrameEncoder::new(Vec::with_capacity(json.len() / 3));
    std::io::Write::write_all(&mut out, &json)
        .map_err(|e| StoreError::Corrupt(format!("compress archive: {e}")))?;
    out.finish()
        .map_err(|e| StoreError::Corrupt(format!("compress archive: {e}")))
}

pub fn decode(object: &str, bytes: &[u8]) -> StoreResult<BucketContents> {
    let unreadable = |reason: String| StoreError::ArchiveUnreadable {
        object: object.to_owned(),
        reason,
    };
    let mut json = Vec::new();
    lz4_flex::frame::FrameDecoder::new(bytes)
        .take(MAX_OBJECT_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| unreadable(format!("not LZ4: {e}")))?;
    if json.len() as u64 > MAX_OBJECT_BYTES {
        return Err(unreadable(format!("over {MAX_OBJECT_BYTES} bytes")));
    }
    let file: ArchiveFile =
        serde_json::from_slice(&json).map_err(|e| unreadable(format!("not an archive: {e}")))?;
    if file.format != FORMAT {
        return Err(unreadable(format!("unknown format {}", file.format)));
    }
    Ok(file.contents)
}
