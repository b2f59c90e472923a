//! What every send passes before it is published, from a socket or over
//! REST: one rule, so the two ways in cannot disagree. Rates are the
//! caller's (`rates.rs`): a connection has its own bucket, REST has not.

use switchboard_protocol::message::{MAX_MENTIONS, SendOptions};
use switchboard_protocol::{Content, ConversationId};

use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::quota;
use crate::state::Moderated;

impl Gateway {
    /// Checks a send's content against the tenant's limits and its
    /// mentions against theirs, runs the tenant's moderator, then checks
    /// the media of what will be stored. Returns the content to store.
    pub(crate) async fn screen_send(
        &self,
        id: &Identity,
        conversation: &ConversationId,
        content: Content,
        options: &SendOptions,
    ) -> Result<Moderated, ApiError> {
        self.check_shape(id, &content, options)?;
        let moderated = self.moderate(id, conversation, content, options).await?;
        // After moderation: what is checked is what will be stored.
        if let Some(media) = moderated.content.media() {
            self.check_media(id, media).await?;
        }
        Ok(moderated)
    }

    /// What a send must be whenever it goes (now, or scheduled): content
    /// within the tenant's limits, mentions within theirs.
    pub(crate) fn check_shape(
        &self,
        id: &Identity,
        content: &Content,
        options: &SendOptions,
    ) -> Result<(), ApiError> {
        let q = self.quotas.of(&id.tenant);
        let limits = quota::content_limits(&q, &self.config.limits.content);
        content.validate_from_client(&limits)?;
        if options.mentions.len() > MAX_MENTIONS {
            return Err(ApiError::invalid(format!(
                "a message mentions at most {MAX_MENTIONS} members"
            )));
        }
        Ok(())
    }
}
