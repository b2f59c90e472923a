//! The moderation hook over a link preview (v1.3, package 0.4.0): a
//! stored message's card, before the members see it, kept, dropped or
//! rewritten. Older moderators are not asked.

use std::collections::BTreeMap;
use std::sync::Arc;

use switchboard_protocol::previews::LinkPreview;

use crate::compiled::{CallError, Compiled, Pre};
use crate::hook::PreviewInput;
use crate::host::PluginHost;
use crate::wit;

/// What a moderator decided of a card, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreviewVerdict {
    Allow,
    Drop,
    /// Show this card instead: the message's link, the plugin's texts
    /// within their bounds, and the card's own image if it kept one.
    Rewrite(LinkPreview),
}

impl PluginHost {
    /// Runs the moderation hook over a link preview: `Ok(None)` where the
    /// plugin sees no previews (a moderator of 0.3.0 or older).
    pub fn moderate_preview(
        &self,
        compiled: &Compiled,
        config: &Arc<BTreeMap<String, String>>,
        input: &PreviewInput<'_>,
    ) -> Result<Option<PreviewVerdict>, CallError> {
        use wit::v4::exports::switchboard::plugin::moderation as m;
        let pre = match &compiled.pre {
            Pre::ModerationV4(pre) => pre,
            Pre::ModerationV3(_) | Pre::ModerationV2(_) | Pre::Moderation(_) => return Ok(None),
            _ => return Err(CallError::Instantiate("not a moderation plugin".into())),
        };
        let card = input.card;
        let preview = m::Preview {
            tenant: input.tenant.as_str().to_owned(),
            conversation_id: input.conversation_id.as_str().to_owned(),
            conversation_kind: wit::kind_v4(input.kind),
            member_count: u32::try_from(input.member_count).unwrap_or(u32::MAX),
            sender: input.sender.as_str().to_owned(),
            message_id: input.message_id.to_string(),
            card: m::LinkPreview {
                url: card.url.clone(),
                title: card.title.clone(),
                description: card.description.clone(),
                site_name: card.site_name.clone(),
                image: card.image.as_ref().map(|i| m::PreviewImage {
                    mime: i.mime.clone(),
                    size: i.size,
                }),
            },
        };
        let verdict = self.call(compiled, input.tenant, config, |store| {
            let instance = pre.instantiate(&mut *store)?;
            instance
                .switchboard_plugin_moderation()
                .call_moderate_preview(&mut *store, &preview)
        })?;
        Ok(Some(match verdict {
            m::PreviewVerdict::Allow => PreviewVerdict::Allow,
            m::PreviewVerdict::Drop => PreviewVerdict::Drop,
            m::PreviewVerdict::Rewrite(r) => {
                let rewritten = LinkPreview {
                    url: card.url.clone(),
                    title: r.title,
                    description: r.description,
                    site_name: r.site_name,
                    image: r.image.and(card.image.clone()),
                }
                .bounded();
                if rewritten.is_empty() {
                    PreviewVerdict::Drop
                } else {
                    PreviewVerdict::Rewrite(rewritten)
                }
            }
        }))
    }
}
