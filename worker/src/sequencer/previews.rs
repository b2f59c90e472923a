//! Link previews (v1.3): the cards the previews stage unfurled for a
//! message, stored where the message still has their links (an edit may
//! have taken one away; a deletion takes them all), then a
//! `message_updated` for the members, as after an edit.

use switchboard_nats::envelope::PreviewsCommand;
use switchboard_protocol::previews::links;

use super::batch::Batch;
use super::prelude::*;

impl Batch<'_> {
    pub(super) fn previews(&mut self, c: &PreviewsCommand) {
        let key = key(&c.tenant, &c.conversation_id);
        let Some(Some(state)) = self.states.get(&key) else {
            return;
        };
        let members: Vec<UserId> = state.members.iter().cloned().collect();
        let Some(current) = self.messages.get(&(key.clone(), c.message_id)).cloned() else {
            return;
        };
        let Some(Content::Text { text }) = &current.content else {
            return;
        };
        if current.deleted_at.is_some() {
            return;
        }
        let still = links(text);
        let kept: Vec<_> = c
            .previews
            .iter()
            .filter(|p| still.contains(&p.url))
            .cloned()
            .collect();
        if kept == current.previews {
            return;
        }
        let route = self.route(&key);
        self.log.push_other(
            &key,
            Mutation::SetPreviews {
                key: key.clone(),
                seq: current.seq,
                previews: kept.clone(),
                at: self.now,
                inbox: self.mode(&key) == FanOut::Write,
            },
        );
        self.touched.insert(key.clone());
        let mut updated = current;
        updated.previews = kept;
        self.messages
            .insert((key.clone(), c.message_id), updated.clone());
        let (recipients, route) = if updated.shadow {
            (vec![updated.sender_id.clone()], Route::Users)
        } else {
            (members, route)
        };
        self.outcomes.push(Outcome::Update {
            tenant: c.tenant.clone(),
            message: updated,
            recipients,
            route,
        });
    }
}
