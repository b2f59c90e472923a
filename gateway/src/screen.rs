//! What a send or an edit passes before it is published, from a socket
//! or over REST: the screening every way in shares
//! (`switchboard_plugin_host::screen`: the tenant's content limits, its
//! word list, then its moderator under the same limits), then the media
//! of what will be stored. Rates are the caller's (`rates.rs`): a
//! connection has its own bucket, REST has not.

use switchboard_plugin_host::screen::{self, Refused, Screened, Submitted};
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::{Content, ConversationId, ErrorCode};
use switchboard_store::StoreError;

use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;

impl Gateway {
    /// Screens a send's content (or an edit's, with empty `options`),
    /// then checks the media of what will be stored. Returns the content
    /// to store.
    pub(crate) async fn screen(
        &self,
        id: &Identity,
        conversation: &ConversationId,
        content: Content,
        options: &SendOptions,
    ) -> Result<Screened, ApiError> {
        let limits = self
            .quotas
            .of(&id.tenant)
            .content_limits(&self.config.limits.content);
        let record = self.quotas.book.get(&id.tenant);
        let send = Submitted {
            tenant: &id.tenant,
            conversation_id: conversation,
            sender: &id.user,
            content,
            options,
            limits: &limits,
            blocklist: record.as_ref().and_then(|r| r.blocklist.as_ref()),
        };
        let shape = || {
            self.shapes
                .get(&*self.store, &id.tenant, conversation, &id.user)
        };
        let screened = screen::screen(Some(&self.plugins), send, shape)
            .await
            .map_err(refusal)?;
        // After moderation: what is checked is what will be stored.
        if let Some(media) = screened.content.media() {
            self.check_media(id, media).await?;
        }
        Ok(screened)
    }

    /// What a send must be whenever it goes (now, or scheduled): content
    /// within the tenant's limits, mentions within theirs.
    pub(crate) fn check_shape(
        &self,
        id: &Identity,
        content: &Content,
        options: &SendOptions,
    ) -> Result<(), ApiError> {
        let limits = self
            .quotas
            .of(&id.tenant)
            .content_limits(&self.config.limits.content);
        screen::check_shape::<StoreError>(content, options, &limits).map_err(refusal)
    }
}

/// The answer to a screening's refusal.
fn refusal(refused: Refused<StoreError>) -> ApiError {
    match refused {
        Refused::Shape(e) => e.into(),
        other => ApiError::new(
            other.code().unwrap_or(ErrorCode::Internal),
            other.to_string(),
        ),
    }
}
