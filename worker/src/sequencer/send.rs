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
        let members = match self.states.get(&key) {
            Some(Some(state)) => state.members.clone(),
            _ => BTreeSet::new(),
        };
        if let Some(existing) = self.sent.get(&skey) {
            // A retry: the original answers it. Fan it out again too, in
            // case the crash that caused the retry came before the fan-out.
            let message = existing.clone();
            let route = self.route(&key);
            self.outcomes.push(Outcome::Deliver {
                tenant: c.tenant.clone(),
                message,
                recipients: members.into_iter().collect(),
                route,
            });
            return Ok(());
        }
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
