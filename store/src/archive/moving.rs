//! Moving one bucket to the archive (F14): read its rows in parts, write
//! its object, and hand back the mark to commit.

use super::format::{encode, object_name};
use super::objects::ArchiveObjects;
use crate::{BucketContents, BucketKey, Mutation, Store, StoreError, StoreResult};

/// Messages the archiver reads from the store per part.
const READ_PART: usize = 512;

/// Moves one bucket to the archive. Returns how many messages moved.
/// Safe to repeat: a bucket archived already is left alone, and an object
/// written by an attempt that did not commit is overwritten by the next.
pub async fn archive_bucket(
    store: &dyn Store,
    objects: &dyn ArchiveObjects,
    bucket: &BucketKey,
) -> StoreResult<usize> {
    let (mark, moved) = prepare_archive(store, objects, bucket).await?;
    store.commit(vec![mark]).await?;
    Ok(moved)
}

/// The first half of [`archive_bucket`]: reads the bucket and writes its
/// object. Returns the mark to commit (a writer checks its lease first)
/// and how many messages it moves.
pub async fn prepare_archive(
    store: &dyn Store,
    objects: &dyn ArchiveObjects,
    bucket: &BucketKey,
) -> StoreResult<(Mutation, usize)> {
    let contents = read_bucket(store, bucket).await?;
    let object = object_name(bucket);
    objects.put(&object, encode(&contents)?).await?;
    let mark = Mutation::Archive {
        bucket: bucket.clone(),
        first_seq: contents.first_seq,
        last_seq: contents.last_seq,
        object,
    };
    Ok((mark, contents.messages.len()))
}

/// All of one bucket, read in parts (smaller ones when a part does not fit
/// the transport).
async fn read_bucket(store: &dyn Store, bucket: &BucketKey) -> StoreResult<BucketContents> {
    let mut whole: Option<BucketContents> = None;
    let mut after = 0;
    let mut part = READ_PART;
    loop {
        let next = match store.bucket_contents(bucket, after, part).await {
            Ok(next) => next,
            Err(StoreError::AnswerTooLarge { .. }) if part > 1 => {
                part /= 2;
                continue;
            }
            Err(e) => return Err(e),
        };
        let short = next.messages.len() < part;
        if let Some(last) = next.messages.last() {
            after = last.seq;
        }
        match &mut whole {
            None => whole = Some(next),
            Some(w) => {
                if (w.first_seq, w.last_seq) != (next.first_seq, next.last_seq) {
                    return Err(StoreError::Conflict(
                        "the bucket changed while it was read".into(),
                    ));
                }
                w.messages.extend(next.messages);
                w.versions.extend(next.versions);
            }
        }
        if short {
            break;
        }
    }
    whole.ok_or(StoreError::NotFound)
}
