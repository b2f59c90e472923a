//! Between the store's records and CQL column values.

use serde::Serialize;
use serde::de::DeserializeOwned;
use switchboard_protocol::{
    ConversationId, ConversationKind, Message, MessageId, TenantId, Timestamp, UserId,
};
use switchboard_store::{ConversationKey, ConversationRecord, StoreError, StoreResult};

use crate::statements::{BucketRow, ConversationRow};

/// A `seq` as bigint. Seqs stay far below 2^63; an unbounded query end
/// (`u64::MAX`) becomes the largest bigint.
pub(crate) fn seq_db(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

pub(crate) fn seq_of(v: i64) -> StoreResult<u64> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative seq {v}")))
}

/// A UTC day as int (days since 1970 stay far below 2^31).
pub(crate) fn day_db(day: u32) -> i32 {
    i32::try_from(day).unwrap_or(i32::MAX)
}

pub(crate) fn day_of(v: i32) -> StoreResult<u32> {
    u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative day {v}")))
}

/// A message id as bigint, bit for bit (ids may use the top bit).
pub(crate) fn id_db(id: MessageId) -> i64 {
    id.as_u64() as i64
}

/// A `LIMIT` bind value.
pub(crate) fn limit_db(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX).max(1)
}

pub(crate) fn encode<T: Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("encode: {e}")))
}

pub(crate) fn decode<T: DeserializeOwned>(text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("decode: {e}")))
}

pub(crate) fn kind_of(text: &str) -> StoreResult<ConversationKind> {
    match text {
        "direct" => Ok(ConversationKind::Direct),
        "group" => Ok(ConversationKind::Group),
        "channel" => Ok(ConversationKind::Channel),
        other => Err(StoreError::Corrupt(format!(
            "unknown conversation kind {other:?}"
        ))),
    }
}

pub(crate) fn user_id(raw: String) -> StoreResult<UserId> {
    UserId::new(raw).map_err(StoreError::from)
}

pub(crate) fn conversation_id(raw: String) -> StoreResult<ConversationId> {
    ConversationId::new(raw).map_err(StoreError::from)
}

pub(crate) fn tenant_id(raw: String) -> StoreResult<TenantId> {
    TenantId::new(raw).map_err(StoreError::from)
}

/// What a commit needs of a conversation row.
#[derive(Debug, Clone)]
pub(crate) struct Conv {
    pub kind: ConversationKind,
    pub title: Option<String>,
    pub created_at: i64,
    pub created_by: String,
    pub last_seq: u64,
    pub last_message: Option<Message>,
    pub last_activity: i64,
}

impl Conv {
    pub fn from_row(row: ConversationRow) -> StoreResult<Self> {
        let (kind, title, created_at, created_by, last_seq, last_message, last_activity) = row;
        Ok(Self {
            kind: kind_of(&kind)?,
            title,
            created_at,
            created_by,
            last_seq: seq_of(last_seq)?,
            last_message: last_message.as_deref().map(decode).transpose()?,
            last_activity,
        })
    }

    pub fn of_record(record: &ConversationRecord) -> Self {
        Self {
            kind: record.kind,
            title: record.title.clone(),
            created_at: record.created_at.unix_ms(),
            created_by: record.created_by.as_str().to_owned(),
            last_seq: record.last_seq,
            last_message: record.last_message.clone(),
            last_activity: record.last_activity.unix_ms(),
        }
    }

    pub fn record(self, key: &ConversationKey) -> StoreResult<ConversationRecord> {
        Ok(ConversationRecord {
            tenant: key.tenant.clone(),
            conversation_id: key.conversation_id.clone(),
            kind: self.kind,
            title: self.title,
            created_at: Timestamp::from_unix_ms(self.created_at),
            created_by: user_id(self.created_by)?,
            last_seq: self.last_seq,
            last_message: self.last_message,
            last_activity: Timestamp::from_unix_ms(self.last_activity),
            policy: Default::default(),
            custom: Default::default(),
            channel: Default::default(),
            mutes: Vec::new(),
        })
    }
}

/// One day bucket of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bucket {
    pub day: u32,
    pub first: u64,
    /// The last seq and the archive object, once archived.
    pub archived: Option<(u64, String)>,
}

impl Bucket {
    pub fn from_row(row: BucketRow) -> StoreResult<Self> {
        let (day, first, last, object) = row;
        let archived = match (last, object) {
            (Some(last), Some(object)) => Some((seq_of(last)?, object)),
            (None, None) => None,
            _ => {
                return Err(StoreError::Corrupt(format!(
                    "bucket of day {day} is half archived"
                )));
            }
        };
        Ok(Self {
            day: day_of(day)?,
            first: seq_of(first)?,
            archived,
        })
    }
}

/// Where each bucket ends: the next (newer) bucket's first seq minus one,
/// or `newest` for the newest bucket. `buckets` is newest first.
pub(crate) fn bucket_last(buckets: &[Bucket], index: usize, newest: u64) -> u64 {
    if let Some((last, _)) = &buckets[index].archived {
        return *last;
    }
    match index.checked_sub(1).and_then(|i| buckets.get(i)) {
        Some(newer) => newer.first.saturating_sub(1),
        None => newest,
    }
}

/// The highest delivered (mark 0) and read (mark 1) seq among mark rows.
pub(crate) fn marks(rows: impl IntoIterator<Item = (i8, i64)>) -> StoreResult<(u64, u64)> {
    let (mut delivered, mut read) = (0, 0);
    for (mark, seq) in rows {
        let seq = seq_of(seq)?;
        match mark {
            DELIVERED => delivered = delivered.max(seq),
            READ => read = read.max(seq),
            other => return Err(StoreError::Corrupt(format!("unknown mark {other}"))),
        }
    }
    Ok((delivered, read))
}

pub(crate) const DELIVERED: i8 = 0;
pub(crate) const READ: i8 = 1;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A message's `body` column holds the same JSON as the embedded
    /// store's rows and the archive objects (the golden fixture).
    #[test]
    fn message_bodies_keep_their_format() {
        use switchboard_store::golden;
        assert_eq!(encode(&golden::message()).unwrap(), golden::MESSAGE_JSON);
        assert_eq!(
            decode::<Message>(golden::MESSAGE_JSON).unwrap(),
            golden::message()
        );
        assert_eq!(
            encode(&golden::original_version()).unwrap(),
            golden::VERSION_JSON
        );
    }

    #[test]
    fn values_round_trip_and_bad_ones_are_corrupt() {
        assert_eq!(seq_db(u64::MAX), i64::MAX);
        assert_eq!(seq_of(seq_db(42)).unwrap(), 42);
        assert!(seq_of(-1).is_err());
        let id = MessageId::from_u64(u64::MAX - 5);
        assert_eq!(id_db(id) as u64, id.as_u64());
        assert_eq!(limit_db(0), 1);
        assert_eq!(limit_db(usize::MAX), i32::MAX);
        assert!(kind_of("nope").is_err());
        assert!(Bucket::from_row((1, 1, Some(3), None)).is_err());
        assert_eq!(marks([(0, 3), (1, 2), (0, 5)]).unwrap(), (5, 2));
        assert!(marks([(7, 1)]).is_err());
    }

    #[test]
    fn a_bucket_ends_where_the_next_begins() {
        let b = |day, first| Bucket {
            day,
            first,
            archived: None,
        };
        let newest_first = vec![
            b(12, 20),
            Bucket {
                day: 11,
                first: 10,
                archived: Some((19, "x".into())),
            },
            b(10, 1),
        ];
        assert_eq!(bucket_last(&newest_first, 0, 25), 25);
        assert_eq!(bucket_last(&newest_first, 1, 25), 19);
        assert_eq!(bucket_last(&newest_first, 2, 25), 9);
    }
}
