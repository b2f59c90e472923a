//! A new conversation.

use super::batch::Batch;
use super::prelude::*;

impl Batch<'_> {
    pub(super) fn create(
        &mut self,
        c: &CreateConversationCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let key = key(&c.tenant, &c.conversation_id);
        let members: BTreeSet<UserId> = c.members.iter().cloned().collect();
        if c.kind == ConversationKind::Direct
            && let Some(why) = self.direct_blocked(&key, &c.tenant, &c.actor, &members)
        {
            self.refuse(reply_to, ErrorCode::Forbidden, why);
            return Ok(());
        }
        if let Some(Some(existing)) = self.states.get(&key) {
            // A retried command, or a direct conversation that already
            // exists between the same two users: both are the same answer.
            if existing.kind == c.kind
                && (c.kind != ConversationKind::Direct || existing.members == members)
            {
                self.done(reply_to, &c.conversation_id, false);
            } else {
                self.refuse(
                    reply_to,
                    ErrorCode::Conflict,
                    "a conversation with this id exists",
                );
            }
            return Ok(());
        }
        if let Err(why) = self.policies.check_members(&c.tenant, members.len()) {
            self.refuse(reply_to, ErrorCode::QuotaExceeded, why);
            return Ok(());
        }
        let unsolicited = if c.kind == ConversationKind::Direct || c.actor_is_admin {
            None
        } else {
            let added: Vec<UserId> = members.iter().cloned().collect();
            match self.unsolicited_adds(&c.tenant, &c.actor, &added) {
                Ok(adds) => adds,
                Err(why) => {
                    self.refuse(reply_to, ErrorCode::Forbidden, why);
                    return Ok(());
                }
            }
        };
        let record = ConversationRecord {
            tenant: c.tenant.clone(),
            conversation_id: c.conversation_id.clone(),
            kind: c.kind,
            title: c.title.clone(),
            created_at: c.at,
            created_by: c.actor.clone(),
            last_seq: 0,
            last_message: None,
            last_activity: c.at,
            policy: Default::default(),
            custom: Default::default(),
            channel: Default::default(),
            mutes: Vec::new(),
        };
        self.log.push_other(
            &key,
            Mutation::CreateConversation {
                record: Box::new(record),
                members: members.iter().cloned().collect(),
                unsolicited,
            },
        );
        self.states.insert(
            key.clone(),
            Some(SequencerState {
                kind: c.kind,
                title: c.title.clone(),
                created_by: c.actor.clone(),
                last_seq: 0,
                // The rule every reader applies: the creator of a group
                // or channel owns it.
                roles: switchboard_store::roles::effective(
                    c.kind,
                    &c.actor,
                    &members
                        .iter()
                        .map(|u| switchboard_store::roles::Joined {
                            user: u.clone(),
                            at: c.at,
                            given: None,
                        })
                        .collect::<Vec<_>>(),
                ),
                members,
                states: Default::default(),
                policy: Default::default(),
                custom: Default::default(),
                channel: Default::default(),
                blocked_by: Default::default(),
                mutes: Vec::new(),
            }),
        );
        if self.mode(&key) == FanOut::Read {
            let everyone = c.members.clone();
            self.listen(&key, everyone, true);
        }
        self.touched.insert(key);
        self.done(reply_to, &c.conversation_id, true);
        Ok(())
    }
}
