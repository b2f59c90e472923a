//! What one push says (F15, v1.3): its title and body, from the tenant's
//! preview mode and, where it set them, its templates per kind (a
//! reaction's push is of kind `reaction`, its `{sender}` the reactor and
//! its `{text}` the emoji); and its badge, the recipient's unread total.

use switchboard_nats::records::tenants::{PreviewMode, TenantRecord};
use switchboard_protocol::push_templates::{PushKind, PushTemplates, PushValues};
use switchboard_protocol::{Content, ConversationKind, Message, MessageId, TenantId, UserId};
use switchboard_store::{ConversationKey, ListQuery, MessageKey, Store, StoreResult};

/// The conversations whose unread counts make a badge: the recipient's
/// most recently active (each count is itself at most 999). Older ones
/// rarely hold unread messages, and the sum is read for every push.
pub const BADGE_CONVERSATIONS: usize = 100;

/// What "New message" reads.
const GENERIC: &str = "New message";
/// `{sender}` where the preview shows no sender.
const SOMEONE: &str = "Someone";

/// What a push is about: its message, or a reaction to it by `by`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum About<'a> {
    Message,
    Reaction { by: &'a UserId, emoji: &'a str },
}

/// What a reaction's push shows by default: the reactor and the emoji
/// (v1.3), within the preview mode.
pub fn reaction_preview(mode: PreviewMode, by: &UserId, emoji: &str) -> (String, Option<String>) {
    match mode {
        PreviewMode::Off => ("New reaction".to_owned(), None),
        PreviewMode::Sender | PreviewMode::Text => (
            by.to_string(),
            Some(format!("reacted {emoji} to your message")),
        ),
    }
}

/// What a push shows by default (no template for its kind).
pub fn preview(mode: PreviewMode, message: &Message) -> (String, Option<String>) {
    let generic = GENERIC.to_owned();
    match mode {
        PreviewMode::Off => (generic, None),
        PreviewMode::Sender => (message.sender_id.to_string(), Some(generic)),
        PreviewMode::Text => (message.sender_id.to_string(), Some(text_of(message))),
    }
}

/// The message's one-line preview, never ciphertext's.
fn text_of(message: &Message) -> String {
    match &message.content {
        // The server cannot read it, and must not pretend to.
        Some(Content::Ciphertext { .. }) | None => None,
        Some(c) => c.preview(),
    }
    .unwrap_or_else(|| GENERIC.to_owned())
}

/// The wording of one message's pushes, read once for all its recipients.
pub(crate) struct Wording {
    default: (String, Option<String>),
    /// With the tenant's templates: what fills them, and whose messages
    /// this one answers (for `reply`).
    templated: Option<Templated>,
}

struct Templated {
    templates: PushTemplates,
    values: PushValues,
    /// The author of the message it replies to, and of its thread's root.
    answers: Vec<UserId>,
    /// A reaction's push: of kind `reaction` whoever gets it.
    reaction: bool,
}

impl Wording {
    /// Reads what the tenant's templates need, if it has any: the
    /// sender's display name, the conversation's title and the authors
    /// of the messages this one answers.
    pub(crate) async fn of(
        store: &dyn Store,
        record: &TenantRecord,
        mode: PreviewMode,
        message: &Message,
        about: About<'_>,
    ) -> StoreResult<Self> {
        let (default, from, emoji) = match about {
            About::Message => (preview(mode, message), &message.sender_id, None),
            About::Reaction { by, emoji } => (reaction_preview(mode, by, emoji), by, Some(emoji)),
        };
        let Some(templates) = record.push_templates.clone().filter(|t| !t.is_empty()) else {
            return Ok(Self {
                default,
                templated: None,
            });
        };
        let tenant = &record.id;
        let key = ConversationKey::new(tenant.clone(), message.conversation_id.clone());
        let sender = store
            .profiles(tenant, vec![from.clone()])
            .await?
            .into_iter()
            .flatten()
            .find_map(|p| p.display_name)
            .unwrap_or_else(|| from.to_string());
        let title = store
            .sequencer_states(vec![key])
            .await?
            .into_iter()
            .flatten()
            .find(|s| s.kind != ConversationKind::Direct)
            .and_then(|s| s.title);
        let answers = match emoji {
            Some(_) => Vec::new(),
            None => authors(store, tenant, message).await?,
        };
        let values = match mode {
            PreviewMode::Off => PushValues {
                sender: SOMEONE.into(),
                conversation: String::new(),
                text: GENERIC.into(),
            },
            PreviewMode::Sender | PreviewMode::Text => PushValues {
                conversation: title.unwrap_or_else(|| sender.clone()),
                sender,
                text: match emoji {
                    // A reaction's text is its emoji.
                    Some(emoji) => emoji.to_owned(),
                    None if mode == PreviewMode::Text => text_of(message),
                    None => GENERIC.into(),
                },
            },
        };
        Ok(Self {
            default,
            templated: Some(Templated {
                templates,
                values,
                answers,
                reaction: emoji.is_some(),
            }),
        })
    }

    /// The title and body of `message`'s push to `user`.
    pub(crate) fn for_user(&self, message: &Message, user: &UserId) -> (String, Option<String>) {
        let Some(t) = &self.templated else {
            return self.default.clone();
        };
        let kind = if t.reaction {
            PushKind::Reaction
        } else {
            kind_for(message, user, &t.answers)
        };
        match t.templates.of(kind) {
            Some(template) => template.render(&t.values),
            None => self.default.clone(),
        }
    }
}

/// The kind of `message`'s push to `user`: a mention of them, else a
/// reply to one of theirs (`answers` holds the authors of what it
/// answers), else a message.
pub fn kind_for(message: &Message, user: &UserId, answers: &[UserId]) -> PushKind {
    if message.mentions_user(user) {
        PushKind::Mention
    } else if answers.contains(user) {
        PushKind::Reply
    } else {
        PushKind::Message
    }
}

/// The authors of the messages `message` answers: the one it replies to
/// and its thread's root.
async fn authors(
    store: &dyn Store,
    tenant: &TenantId,
    message: &Message,
) -> StoreResult<Vec<UserId>> {
    let ids: Vec<MessageId> = [message.reply_to, message.thread_id]
        .into_iter()
        .flatten()
        .collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let keys = ids
        .into_iter()
        .map(|message_id| MessageKey {
            tenant: tenant.clone(),
            conversation_id: message.conversation_id.clone(),
            message_id,
        })
        .collect();
    Ok(store
        .find_messages(keys)
        .await?
        .into_iter()
        .flatten()
        .map(|m| m.sender_id)
        .collect())
}

/// `user`'s unread total for a badge: the sum of their unread counts in
/// their [`BADGE_CONVERSATIONS`] most recently active conversations.
pub(crate) async fn badge(store: &dyn Store, tenant: &TenantId, user: &UserId) -> StoreResult<u64> {
    let query = ListQuery {
        after: None,
        limit: BADGE_CONVERSATIONS,
    };
    Ok(store
        .conversation_page(tenant, user, query)
        .await?
        .iter()
        .map(|c| c.unread_count)
        .sum())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use switchboard_protocol::{ClientMsgId, ConversationId, DeviceId, Timestamp};

    fn message(content: Content) -> Message {
        Message::plain(
            MessageId::from_u64(7),
            ConversationId::new("c1").unwrap(),
            1,
            UserId::new("alice").unwrap(),
            DeviceId::new("a").unwrap(),
            ClientMsgId::new("m1").unwrap(),
            Some(content),
            Timestamp::now(),
        )
    }

    #[test]
    fn previews_follow_the_mode_and_never_show_ciphertext() {
        let long = "x".repeat(300);
        let text = message(Content::Text { text: long });
        assert_eq!(
            preview(PreviewMode::Off, &text),
            ("New message".into(), None)
        );
        assert_eq!(
            preview(PreviewMode::Sender, &text),
            ("alice".into(), Some("New message".into()))
        );
        let (_, body) = preview(PreviewMode::Text, &text);
        let body = body.unwrap();
        assert_eq!(body.chars().count(), 101, "100 characters and an ellipsis");
        let secret = message(Content::Ciphertext {
            algorithm: "olm".into(),
            body: "c2VjcmV0".into(),
        });
        assert_eq!(
            preview(PreviewMode::Text, &secret),
            ("alice".into(), Some("New message".into()))
        );
        // A custom message (v1.3) by its fallback text, else its type.
        let custom = |fallback: Option<&str>| {
            message(Content::Custom(
                switchboard_protocol::content::CustomContent {
                    custom_type: "shop.order".into(),
                    data: serde_json::Map::new(),
                    fallback_text: fallback.map(str::to_owned),
                },
            ))
        };
        assert_eq!(
            preview(PreviewMode::Text, &custom(Some("Order #7"))).1,
            Some("Order #7".into())
        );
        assert_eq!(
            preview(PreviewMode::Text, &custom(None)).1,
            Some("[shop.order]".into())
        );
    }

    #[test]
    fn a_reaction_shows_its_reactor_and_emoji_within_the_mode() {
        let bob = UserId::new("bob").unwrap();
        assert_eq!(
            reaction_preview(PreviewMode::Off, &bob, "👍"),
            ("New reaction".into(), None)
        );
        assert_eq!(
            reaction_preview(PreviewMode::Text, &bob, "👍"),
            ("bob".into(), Some("reacted 👍 to your message".into()))
        );
    }

    #[test]
    fn a_mention_comes_before_a_reply_and_a_reply_before_a_message() {
        let bob = UserId::new("bob").unwrap();
        let cal = UserId::new("cal").unwrap();
        let mut m = message(Content::Text { text: "hi".into() });
        let answers = vec![bob.clone()];
        assert_eq!(kind_for(&m, &bob, &answers), PushKind::Reply);
        assert_eq!(kind_for(&m, &cal, &answers), PushKind::Message);
        m.mentions = vec![bob.clone()];
        assert_eq!(kind_for(&m, &bob, &answers), PushKind::Mention);
        m.mention_all = true;
        assert_eq!(kind_for(&m, &cal, &answers), PushKind::Mention);
    }
}
