//! A message sent by a member's device.

use super::*;

impl Batch<'_> {
    pub(super) fn send(&mut self, c: &SendCommand) -> Result<(), SequenceError> {
        let key = key(&c.tenant, &c.conversation_id);
        let skey = SentKey {
            tenant: c.tenant.clone(),
            conversation_id: c.conversation_id.clone(),
            sender: c.sender.clone(),
            client_msg_id: c.client_msg_id.clone(),
        };
        if let Some(existing) = self.sent.get(&skey) {
            // A retry: the original answers it, to its sender alone. The
            // members had it when it was stored (a crash before its
            // fan-out left them its inbox entries and a `seq` gap to pull
            // by), so fanning it out again would show it to them twice.
            self.outcomes.push(Outcome::Answer {
                tenant: c.tenant.clone(),
                message: existing.clone(),
            });
            return Ok(());
        }
        let members = match self.states.get(&key) {
            Some(Some(state)) => state.members.clone(),
            _ => BTreeSet::new(),
        };
        let refusal = match self.states.get(&key) {
            None | Some(None) => Some((ErrorCode::NotFound, "no such conversation")),
            Some(Some(s)) if !s.members.contains(&c.sender) => Some((
                ErrorCode::NotAMember,
                "you are not a member of this conversation",
            )),
            Some(Some(_)) => None,
        };
        if let Some((code, message)) = refusal {
            self.outcomes.push(Outcome::Reject {
                tenant: c.tenant.clone(),
                sender: c.sender.clone(),
                rejection: Rejection {
                    device: c.device.clone(),
                    request_type: request_type::SEND_MESSAGE.into(),
                    client_msg_id: Some(c.client_msg_id.clone()),
                    conversation_id: c.conversation_id.clone(),
                    code,
                    message: message.to_owned(),
                },
            });
            return Ok(());
        }
        self.append(
            &key,
            &c.sender,
            &c.device,
            c.client_msg_id.clone(),
            c.content.clone(),
            members.into_iter().collect(),
        )
    }
}
