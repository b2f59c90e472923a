//! The message object of docs/protocol.md.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::content::Content;
use crate::ids::{ClientMsgId, ConversationId, DeviceId, MessageId, UserId};
use crate::poll::{PollContent, PollResults};
use crate::previews::LinkPreview;
use crate::timestamp::Timestamp;

/// One version of an edited message (`GET .../versions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MessageVersion {
    /// 1 for the original, then 2, 3, ...
    pub version: u32,
    pub content: Content,
    /// When this version was written (`created_at` for the original).
    pub at: Timestamp,
    pub editor: UserId,
}

/// Body of `GET /v1/conversations/{id}/messages/{message_id}/versions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MessageVersions {
    pub message_id: MessageId,
    pub versions: Vec<MessageVersion>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Message {
    pub message_id: MessageId,
    pub conversation_id: ConversationId,
    /// Per conversation, from 1, without gaps.
    pub seq: u64,
    pub sender_id: UserId,
    pub sender_device: DeviceId,
    pub client_msg_id: ClientMsgId,
    /// `None` (JSON `null`) once the message is deleted.
    pub content: Option<Content>,
    pub created_at: Timestamp,
    pub edited_at: Option<Timestamp>,
    pub deleted_at: Option<Timestamp>,
    /// The message this one replies to, quoted in the main timeline
    /// (v1.1); null for none.
    #[serde(default)]
    pub reply_to: Option<MessageId>,
    /// The root of the thread this message belongs to (v1.1); null when
    /// it is in the main timeline.
    #[serde(default)]
    pub thread_id: Option<MessageId>,
    /// On a thread's root: the thread so far (v1.1). Absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadSummary>,
    /// The reactions, one entry per emoji, in the order they first came
    /// (v1.1); `me` says whether the reader reacted.
    #[serde(default)]
    pub reactions: Vec<Reaction>,
    /// The members the message mentions (v1.1).
    #[serde(default)]
    pub mentions: Vec<UserId>,
    /// Whether the message mentions every member (`@all`, v1.1).
    #[serde(default)]
    pub mention_all: bool,
    /// For the reader only (v1.2): the reader blocked the sender. Never
    /// stored; absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blocked_sender: bool,
    /// When the message goes for good (v1.2): from its conversation's
    /// retention or disappearing messages as they were when it was sent;
    /// absent (or null) when it stays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// The app's own fields (v1.3): a JSON object of at most
    /// [`crate::custom::MAX_CUSTOM_BYTES`] as compact JSON, set by the
    /// send and changed only by an edit; absent when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<Map<String, Value>>,
    /// On a poll (v1.3): its counts, whether it is closed, its latest
    /// voters unless anonymous, and the reader's own choice (`me`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_results: Option<PollResults>,
    /// Cards of the text's first links (v1.3), added by the server after
    /// the send (members get `message_updated`); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previews: Vec<LinkPreview>,
    /// Stored, never shown (v1.3): the sender was shadow-banned when they
    /// sent it, so it is their devices' alone. Every way a message leaves
    /// for a client drops the messages others may not see and clears the
    /// flag on the rest ([`Message::seen_by`], [`Message::for_client`]),
    /// so that the sender never learns of it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub shadow: bool,
}

impl Message {
    /// A message with none of the v1.1 additions set: no reply, thread,
    /// reactions or mentions.
    #[allow(clippy::too_many_arguments)]
    pub fn plain(
        message_id: MessageId,
        conversation_id: ConversationId,
        seq: u64,
        sender_id: UserId,
        sender_device: DeviceId,
        client_msg_id: ClientMsgId,
        content: Option<Content>,
        created_at: Timestamp,
    ) -> Self {
        Self {
            message_id,
            conversation_id,
            seq,
            sender_id,
            sender_device,
            client_msg_id,
            content,
            created_at,
            edited_at: None,
            deleted_at: None,
            reply_to: None,
            thread_id: None,
            thread: None,
            reactions: Vec::new(),
            mentions: Vec::new(),
            mention_all: false,
            blocked_sender: false,
            expires_at: None,
            custom: None,
            poll_results: None,
            previews: Vec::new(),
            shadow: false,
        }
    }

    /// Whether `viewer` may see this message: anyone, unless it is a
    /// shadow-banned sender's, which only they see.
    pub fn seen_by(&self, viewer: &UserId) -> bool {
        self.shadow_reaches(viewer.as_str())
    }

    /// [`Message::seen_by`] for a user id as the stores keep it.
    pub fn shadow_reaches(&self, user: &str) -> bool {
        !self.shadow || self.sender_id.as_str() == user
    }

    /// The message as a client gets it: the stored-only flag cleared.
    pub fn for_client(mut self) -> Self {
        self.shadow = false;
        self
    }

    /// The message as its deletion at `at` leaves it: it shows nothing of
    /// what it was, neither content nor reactions nor whom it mentioned.
    /// The store and the writer's `message_updated` both take it from
    /// here.
    pub fn mark_deleted(&mut self, at: Timestamp) {
        self.content = None;
        self.reactions.clear();
        self.poll_results = None;
        self.previews.clear();
        self.mentions.clear();
        self.mention_all = false;
        self.deleted_at = Some(at);
    }

    /// Every blob this message references: its media, and its previews'
    /// images (v1.3).
    pub fn blob_refs(&self) -> Vec<&str> {
        self.content
            .as_ref()
            .and_then(Content::media)
            .map(|m| m.blob_ref.as_str())
            .into_iter()
            .chain(
                self.previews
                    .iter()
                    .filter_map(|p| p.image.as_ref())
                    .map(|i| i.blob_ref.as_str()),
            )
            .collect()
    }

    /// Keeps the link previews whose link its content still has (v1.3;
    /// an edit may take one away, or the text); the images of those that
    /// went, whose references go too.
    pub fn keep_linked_previews(&mut self) -> Vec<String> {
        let links = match &self.content {
            Some(Content::Text { text }) => crate::previews::links(text),
            _ => Vec::new(),
        };
        let (kept, gone): (Vec<_>, Vec<_>) = std::mem::take(&mut self.previews)
            .into_iter()
            .partition(|p| links.contains(&p.url));
        self.previews = kept;
        gone.into_iter()
            .filter_map(|p| p.image.map(|i| i.blob_ref))
            .filter(|b| !self.blob_refs().contains(&b.as_str()))
            .collect()
    }

    /// The poll this message is and its results, taken out to change them
    /// (fresh ones where the message carries none); `None` for a message
    /// that is no poll.
    pub fn take_poll(&mut self) -> Option<(PollContent, PollResults)> {
        let poll = self.poll()?.clone();
        let results = self
            .poll_results
            .take()
            .unwrap_or_else(|| poll.fresh_results());
        Some((poll, results))
    }

    /// The poll this message is, if it is one.
    pub fn poll(&self) -> Option<&PollContent> {
        match &self.content {
            Some(Content::Poll(p)) => Some(p),
            _ => None,
        }
    }

    /// Whether `user` is named by this message: mentioned, or everyone is.
    pub fn mentions_user(&self, user: &UserId) -> bool {
        self.mention_all || self.mentions.contains(user)
    }

    /// What its send said beyond its content: reply, thread, mentions.
    pub fn send_options(&self) -> SendOptions {
        SendOptions {
            reply_to: self.reply_to,
            thread_id: self.thread_id,
            mentions: self.mentions.clone(),
            mention_all: self.mention_all,
            custom: self.custom.clone(),
            previews: None,
        }
    }
}

/// What a send may say beyond its content (v1.1): the message it
/// replies to, the thread it goes into, whom it mentions, and (v1.3) its
/// `custom` fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<MessageId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<MessageId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<UserId>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mention_all: bool,
    /// The message's `custom` fields (v1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<Map<String, Value>>,
    /// `false`: no link previews for this message (v1.3); absent or
    /// `true`: the tenant's choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previews: Option<bool>,
}

impl SendOptions {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// The most members one message may mention by name.
pub const MAX_MENTIONS: usize = 50;

/// A thread as its root shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThreadSummary {
    pub reply_count: u64,
    pub last_reply_at: Timestamp,
    /// Who replied, most recent first (at most
    /// [`ThreadSummary::MAX_PARTICIPANTS`]).
    pub participants: Vec<UserId>,
}

impl ThreadSummary {
    /// The most participants a root lists.
    pub const MAX_PARTICIPANTS: usize = 10;

    /// The summary after a reply of `sender` at `at`.
    pub fn after_reply(previous: Option<&ThreadSummary>, sender: &UserId, at: Timestamp) -> Self {
        let mut participants = vec![sender.clone()];
        if let Some(p) = previous {
            participants.extend(p.participants.iter().filter(|u| *u != sender).cloned());
        }
        participants.truncate(Self::MAX_PARTICIPANTS);
        Self {
            reply_count: previous.map_or(0, |p| p.reply_count) + 1,
            last_reply_at: previous.map_or(at, |p| p.last_reply_at.max(at)),
            participants,
        }
    }
}

/// One emoji's reactions to a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Reaction {
    pub emoji: String,
    pub count: u64,
    /// Whether the reader is among them (always false where no reader is
    /// known, as in stored rows).
    #[serde(default)]
    pub me: bool,
}
