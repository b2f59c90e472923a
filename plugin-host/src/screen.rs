//! The screening every send passes, whichever way it comes in (a
//! socket's send, a REST send, a scheduled send at its time) and every
//! edit's new content: one rule, so that no way in lets through what
//! another refuses.
//!
//! 1. The content is within the tenant's content limits (the
//!    deployment's, lowered by the tenant's `max_message_bytes`), its
//!    mentions within theirs, its `custom` fields within 4096 bytes; a
//!    poll closes after it goes.
//! 2. The tenant's word list (v1.3, moderation without code), if it has
//!    one, refuses the content or masks its words.
//! 3. The tenant's moderator, if one is deployed, decides on what the
//!    list left; a rewrite must be within the same limits, or the call
//!    counts as failed and the plugin's `on_failure` decides (`open`:
//!    the content as it came).
//!
//! What is not the content's (rates, membership, blocks, slow mode,
//! media ownership) is checked by the way in and by the conversation's
//! writer.

use std::future::Future;

use switchboard_protocol::content::{ContentError, ContentLimits};
use switchboard_protocol::custom::{MAX_CUSTOM_BYTES, json_len};
use switchboard_protocol::message::{MAX_MENTIONS, SendOptions};
use switchboard_protocol::moderation::{Applied, Blocklist};
use switchboard_protocol::{
    Content, ConversationId, ConversationKind, ErrorCode, TenantId, UserId,
};

use crate::hook::{Hook, Moderation, ModerationInput};
use crate::registry::Plugins;

/// A send (or an edit's content) to screen.
#[derive(Debug)]
pub struct Submitted<'a> {
    pub tenant: &'a TenantId,
    pub conversation_id: &'a ConversationId,
    pub sender: &'a UserId,
    pub content: Content,
    /// Its reply, thread and mentions (an edit's are empty).
    pub options: &'a SendOptions,
    /// The tenant's content limits.
    pub limits: &'a ContentLimits,
    /// The tenant's word list, if it has one.
    pub blocklist: Option<&'a Blocklist>,
}

/// The content to store.
#[derive(Debug, Clone, PartialEq)]
pub struct Screened {
    pub content: Content,
    /// The word list or the moderator changed it: the sender must be
    /// shown what is stored.
    pub rewritten: bool,
}

/// Why a send does not pass. `E` is the error of looking up the
/// conversation's shape (kind and member count), which only a tenant
/// with a moderator needs.
#[derive(Debug, thiserror::Error)]
pub enum Refused<E> {
    #[error(transparent)]
    Content(#[from] ContentError),
    #[error("a message mentions at most {MAX_MENTIONS} members")]
    Mentions,
    #[error("a message's custom fields are at most {MAX_CUSTOM_BYTES} bytes of JSON")]
    Custom,
    /// The tenant's word list refused it.
    #[error("the message contains a word this app does not allow")]
    Blocked,
    /// The moderator refused it; the reason is the plugin's.
    #[error("{0}")]
    Rejected(String),
    /// The moderator failed and fails closed: a retry may pass.
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    Shape(E),
}

impl<E> Refused<E> {
    /// The protocol's code for it; `None` for a shape look-up's error,
    /// which the way in maps itself.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Refused::Content(e) => Some(e.code()),
            Refused::Mentions => Some(ErrorCode::InvalidRequest),
            Refused::Custom => Some(ErrorCode::TooLarge),
            Refused::Blocked | Refused::Rejected(_) => Some(ErrorCode::RejectedByPolicy),
            Refused::Failed(_) => Some(ErrorCode::Unavailable),
            Refused::Shape(_) => None,
        }
    }
}

/// What a send must be whenever it goes (now, or when it is scheduled):
/// content within the tenant's limits, mentions within theirs.
pub fn check_shape<E>(
    content: &Content,
    options: &SendOptions,
    limits: &ContentLimits,
) -> Result<(), Refused<E>> {
    content.validate_from_client(limits)?;
    // A poll goes out taking votes (v1.3).
    if let Content::Poll(poll) = content {
        poll.check_closes_at(switchboard_protocol::Timestamp::now())
            .map_err(ContentError::from)?;
    }
    if options.mentions.len() > MAX_MENTIONS {
        return Err(Refused::Mentions);
    }
    if options
        .custom
        .as_ref()
        .is_some_and(|c| json_len(c) > MAX_CUSTOM_BYTES)
    {
        return Err(Refused::Custom);
    }
    Ok(())
}

/// Screens `send`: its shape, the tenant's word list, then its
/// moderator. `shape` gives the conversation's kind and member count,
/// asked only when the tenant has a moderator (it costs a read).
pub async fn screen<E, F>(
    plugins: Option<&Plugins>,
    mut send: Submitted<'_>,
    shape: impl FnOnce() -> F,
) -> Result<Screened, Refused<E>>
where
    F: Future<Output = Result<(ConversationKind, usize), E>>,
{
    check_shape(&send.content, send.options, send.limits)?;
    let listed = match send.blocklist.map(|list| list.apply(&mut send.content)) {
        Some(Applied::Rejected) => return Err(Refused::Blocked),
        Some(Applied::Masked) => true,
        Some(Applied::Unchanged) | None => false,
    };
    let Some(plugins) = plugins.filter(|p| p.wants(send.tenant, Hook::Moderation)) else {
        return Ok(Screened {
            content: send.content,
            rewritten: listed,
        });
    };
    let (kind, member_count) = shape().await.map_err(Refused::Shape)?;
    let input = ModerationInput {
        tenant: send.tenant,
        conversation_id: send.conversation_id,
        kind,
        member_count,
        sender: send.sender,
        content: &send.content,
        options: send.options,
    };
    match plugins.moderate(&input, send.limits) {
        Moderation::Allow => Ok(Screened {
            content: send.content,
            rewritten: listed,
        }),
        Moderation::Rewrite(content) => Ok(Screened {
            rewritten: listed || content != send.content,
            content,
        }),
        Moderation::Reject(reason) => Err(Refused::Rejected(reason)),
        Moderation::Failed(why) => Err(Refused::Failed(why)),
    }
}
