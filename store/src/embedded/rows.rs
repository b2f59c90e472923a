//! Row shapes of the embedded store that are not protocol objects.

use serde::{Deserialize, Serialize};
use switchboard_protocol::{ConversationKind, Message, Timestamp, UserId};

use super::keys::{read_words, words};
use crate::{ConversationRecord, MemberRecord, StoreResult};

/// The `conversations` row: what rarely changes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ConversationMeta {
    pub kind: ConversationKind,
    pub title: Option<String>,
    pub created_at: Timestamp,
    pub created_by: UserId,
}

impl ConversationMeta {
    pub fn of(record: &ConversationRecord) -> Self {
        Self {
            kind: record.kind,
            title: record.title.clone(),
            created_at: record.created_at,
            created_by: record.created_by.clone(),
        }
    }

    /// The full record, from this row, the state row and the last message.
    pub fn record(
        self,
        key: &crate::ConversationKey,
        state: StateRow,
        last_message: Option<Message>,
    ) -> ConversationRecord {
        let StateRow {
            last_seq,
            last_activity,
        } = state;
        ConversationRecord {
            tenant: key.tenant.clone(),
            conversation_id: key.conversation_id.clone(),
            kind: self.kind,
            title: self.title,
            created_at: self.created_at,
            created_by: self.created_by,
            last_seq,
            last_message,
            last_activity: Timestamp::from_unix_ms(last_activity),
            policy: Default::default(),
            custom: Default::default(),
            channel: Default::default(),
            mutes: Vec::new(),
        }
    }
}

/// A member: joined at (Unix ms) from `members`, marks from `member_marks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MemberRow {
    pub joined: i64,
    pub delivered: u64,
    pub read: u64,
}

impl MemberRow {
    pub fn encode_joined(self) -> Vec<u8> {
        words([self.joined as u64])
    }

    pub fn encode_marks(self) -> Vec<u8> {
        words([self.delivered, self.read])
    }

    pub fn decode(joined: &[u8], marks: Option<&[u8]>) -> StoreResult<Self> {
        let [joined] = read_words::<1>(joined)?;
        let [delivered, read] = match marks {
            Some(m) => read_words::<2>(m)?,
            None => [0, 0],
        };
        Ok(Self {
            joined: joined as i64,
            delivered,
            read,
        })
    }

    pub fn record(self, user: UserId) -> MemberRecord {
        MemberRecord {
            user_id: user,
            joined_at: Timestamp::from_unix_ms(self.joined),
            delivered_seq: self.delivered,
            read_seq: self.read,
            role: Default::default(),
            settings: Default::default(),
        }
    }
}

/// A conversation's position: last seq and last activity (Unix ms),
/// derived from its newest message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StateRow {
    pub last_seq: u64,
    pub last_activity: i64,
}

impl StateRow {
    /// From the newest message, or the creation time while there is none.
    pub fn derive(last: Option<&Message>, created_at: Timestamp) -> Self {
        match last {
            Some(m) => Self {
                last_seq: m.seq,
                last_activity: m.created_at.unix_ms(),
            },
            None => Self {
                last_seq: 0,
                last_activity: created_at.unix_ms(),
            },
        }
    }
}

/// A `buckets` row: the first seq stored on that day and, once archived,
/// the last seq and the archive object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BucketRow {
    pub first: u64,
    pub archived: Option<(u64, String)>,
}

impl BucketRow {
    pub fn live(first: u64) -> Vec<u8> {
        words([first])
    }

    pub fn encode(&self) -> Vec<u8> {
        match &self.archived {
            None => Self::live(self.first),
            Some((last, object)) => {
                let mut out = words([self.first, *last]);
                out.extend_from_slice(object.as_bytes());
                out
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> StoreResult<Self> {
        if bytes.len() == 8 {
            let [first] = read_words::<1>(bytes)?;
            return Ok(Self {
                first,
                archived: None,
            });
        }
        let (head, object) = bytes
            .split_at_checked(16)
            .ok_or_else(|| crate::StoreError::Corrupt("malformed bucket row".into()))?;
        let [first, last] = read_words::<2>(head)?;
        let object = std::str::from_utf8(object)
            .map_err(|_| crate::StoreError::Corrupt("malformed bucket row".into()))?;
        Ok(Self {
            first,
            archived: Some((last, object.to_owned())),
        })
    }
}
