//! Search (v1.2) on the backbone: the index feed writers publish, and the
//! query service the `switchboard search` role answers.
//!
//! | subject | kind | carries |
//! |---|---|---|
//! | `sb.index.<worker>` | JetStream, stream `SB_INDEX` | one JSON [`IndexOp`] per line: what a worker's writers' commits changed of searchable text, each partition's in order |
//! | `sb.search.<shard>` | core request/reply, queue group `search-<shard>` | a [`SearchRequest`]; the answer a [`SearchReply`] |
//!
//! Only text is fed: the text of text messages and media captions.
//! Ciphertext never is.

use serde::{Deserialize, Serialize};
use switchboard_protocol::{ConversationId, Message, MessageId, TenantId, Timestamp, UserId};

use crate::subject::token;

pub const INDEX_PREFIX: &str = "sb.index";
pub const SEARCH_PREFIX: &str = "sb.search";

/// The feed subject of a worker, whose feed carries its partitions'
/// changes together.
pub fn index_subject(worker: &str) -> String {
    format!("{INDEX_PREFIX}.{}", token(worker))
}

/// The query subject of a shard.
pub fn search_subject(shard: u16) -> String {
    format!("{SEARCH_PREFIX}.{shard}")
}

/// The shard that holds a tenant's messages: FNV-1a of its id, modulo the
/// shard count (the same in every process, unlike std's hasher).
pub fn shard_of(tenant: &TenantId, shards: u16) -> u16 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in token(tenant.as_str()).bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % u64::from(shards.max(1))) as u16
}

/// One change to the index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum IndexOp {
    /// A message's searchable text as it is now (sent or edited).
    Put {
        tenant: TenantId,
        conversation_id: ConversationId,
        seq: u64,
        message_id: MessageId,
        sender: UserId,
        created_at: Timestamp,
        text: String,
        /// When the message expires (v1.2 retention and disappearing
        /// messages): the feed keeps its text no longer than that.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at: Option<Timestamp>,
    },
    /// Messages that went (deleted, expired, erased): by `seq`.
    Remove {
        tenant: TenantId,
        conversation_id: ConversationId,
        seqs: Vec<u64>,
    },
    /// Every message of the conversation created before `before`
    /// (retention by age, archived days included).
    RemoveBefore {
        tenant: TenantId,
        conversation_id: ConversationId,
        before: Timestamp,
    },
    /// Every message `sender` sent in the conversation (an erasure).
    RemoveSender {
        tenant: TenantId,
        conversation_id: ConversationId,
        sender: UserId,
    },
}

impl IndexOp {
    pub fn tenant(&self) -> &TenantId {
        match self {
            Self::Put { tenant, .. }
            | Self::Remove { tenant, .. }
            | Self::RemoveBefore { tenant, .. }
            | Self::RemoveSender { tenant, .. } => tenant,
        }
    }

    /// What of a message is searched: a text, a media caption, a custom
    /// message's `fallback_text` or a poll's question and options (v1.3);
    /// never ciphertext or a
    /// system message. `None` for a deleted message.
    pub fn put_of(tenant: &TenantId, message: &Message) -> Option<Self> {
        use switchboard_protocol::Content;
        if message.deleted_at.is_some() {
            return None;
        }
        let text = match message.content.as_ref()? {
            Content::Text { text } => text.clone(),
            Content::Image(m) | Content::File(m) | Content::Voice(m) => m.caption.clone()?,
            Content::Custom(c) => c.fallback_text.clone()?,
            Content::Poll(p) => p.text(),
            Content::Ciphertext { .. } | Content::System(_) => return None,
        };
        Some(Self::Put {
            tenant: tenant.clone(),
            conversation_id: message.conversation_id.clone(),
            seq: message.seq,
            message_id: message.message_id,
            sender: message.sender_id.clone(),
            created_at: message.created_at,
            text,
            expires_at: message.expires_at,
        })
    }
}

/// A query, for the shard of `tenant`: `q` in the conversations named
/// (those the asker is a member of, as the gateway found them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchRequest {
    pub tenant: TenantId,
    /// Who asks: the replica bounds each user's queries at once. Absent
    /// from gateways of older releases.
    #[serde(default)]
    pub user: Option<UserId>,
    pub conversations: Vec<ConversationId>,
    pub q: String,
    pub limit: usize,
    /// Hits to skip (the previous page's `next_offset`).
    pub offset: usize,
}

/// One hit: the message it names, best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    pub conversation_id: ConversationId,
    pub seq: u64,
    pub message_id: MessageId,
    pub score: f32,
    /// Fragments of the text around the matches, matched terms in
    /// `<b>...</b>` (the rest escaped as HTML).
    pub highlights: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchReply {
    Hits {
        hits: Vec<SearchHit>,
        /// Whether there may be more after these.
        more: bool,
    },
    Refused {
        message: String,
    },
    /// Too many queries of the asker (or its tenant) run already: ask
    /// again in a moment (the gateway answers 429 `rate_limited`).
    Busy {
        message: String,
    },
    /// The query ran out of time, waiting for its turn or computing, and
    /// stopped (the gateway answers 503 `unavailable`).
    TimedOut {
        message: String,
    },
}
