//! A message sent by a member's device.

use super::batch::Batch;
use super::channels::posting_refusal;
use super::moderation::silenced;
use super::prelude::*;
use super::safety::blocked_refusal;
use switchboard_nats::push_jobs::PreviewJob;
use switchboard_nats::records::bans::BanKind;
use switchboard_protocol::message::SendOptions;

impl Batch<'_> {
    /// `reply_to`: a send over REST waits there for its outcome (a
    /// socket's sends are answered through their device's session).
    pub(super) fn send(
        &mut self,
        c: &SendCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
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
            let existing = existing.clone();
            self.sent_reply(reply_to, &existing);
            self.outcomes.push(Outcome::Answer {
                tenant: c.tenant.clone(),
                message: existing,
            });
            return Ok(());
        }
        let members = match self.states.get(&key) {
            Some(Some(state)) => state.members.clone(),
            _ => BTreeSet::new(),
        };
        let mut retry_after_ms = None;
        let refusal = match self.states.get(&key) {
            None | Some(None) => Some((ErrorCode::NotFound, "no such conversation".to_owned())),
            Some(Some(s)) if !s.members.contains(&c.sender) => Some((
                ErrorCode::NotAMember,
                "you are not a member of this conversation".to_owned(),
            )),
            // Banned from the tenant (v1.3): their tokens are refused, so
            // this is a send scheduled before the ban, or in flight.
            Some(Some(_))
                if self
                    .policies
                    .bans
                    .holding(BanKind::Tenant, &c.tenant, &c.sender, self.now)
                    .is_some() =>
            {
                Some((ErrorCode::Banned, "you are banned from this app".to_owned()))
            }
            Some(Some(s)) => {
                let in_thread = c.options.thread_id.is_some();
                if let Some(why) = silenced(s, &c.sender, false, self.now) {
                    Some((ErrorCode::Forbidden, why))
                } else if let Some(why) = blocked_refusal(s, &c.sender)
                    .or_else(|| posting_refusal(s, &c.sender, in_thread))
                {
                    Some((ErrorCode::Forbidden, why.to_owned()))
                } else if let Some(wait) = self.slow_mode_wait(&key, s, &c.sender) {
                    retry_after_ms = Some(wait);
                    Some((
                        ErrorCode::RateLimited,
                        format!(
                            "slow mode: one message per {} s here; send again (with a new client_msg_id) in {wait} ms",
                            s.policy.slow_mode_secs
                        ),
                    ))
                } else {
                    self.options_refusal(&key, s, c)
                }
            }
        };
        if let Some((code, message)) = refusal {
            self.reply(
                reply_to,
                CommandReply::Refused {
                    code,
                    message: message.clone(),
                    retry_after_ms,
                },
            );
            self.outcomes.push(Outcome::Reject {
                tenant: c.tenant.clone(),
                sender: c.sender.clone(),
                rejection: Rejection {
                    device: c.device.clone(),
                    request_type: request_type::SEND_MESSAGE.into(),
                    client_msg_id: Some(c.client_msg_id.clone()),
                    conversation_id: c.conversation_id.clone(),
                    code,
                    message,
                    message_id: None,
                    retry_after_ms,
                },
            });
            return Ok(());
        }
        let mut options = c.options.clone();
        options.mentions = users_where(&options.mentions, |_| true);
        let stored = self.append_with(
            &key,
            &c.sender,
            &c.device,
            c.client_msg_id.clone(),
            c.content.clone(),
            members.into_iter().collect(),
            &options,
        )?;
        if let Some(m) = &stored {
            self.sent_now(&key, &c.sender);
            self.sent_reply(reply_to, m);
            self.unfurl(&key, m, &options);
        }
        // A reply in a thread counts on its root (the root's summary, the
        // thread's index, who takes part): right after its append.
        // A shadow-banned sender's reply leaves the root as the others
        // see it.
        if let (Some(m), Some(root_id)) = (stored.filter(|m| !m.shadow), options.thread_id)
            && let Some(root) = self.messages.get(&(key.clone(), root_id)).cloned()
        {
            self.log.push_other(
                &key,
                Mutation::ThreadReply {
                    key: key.clone(),
                    root_seq: root.seq,
                    seq: m.seq,
                    sender: c.sender.clone(),
                    at: m.created_at,
                },
            );
            let mut root = root;
            root.thread = Some(switchboard_protocol::ThreadSummary::after_reply(
                root.thread.as_ref(),
                &c.sender,
                m.created_at,
            ));
            self.messages.insert((key, root_id), root);
        }
        Ok(())
    }

    /// A job for the previews stage (v1.3), for a text with links, unless
    /// the send or its tenant says no. A shadow-banned sender's links are
    /// fetched for nobody: the fetch is seen from outside.
    fn unfurl(&mut self, key: &ConversationKey, m: &Message, options: &SendOptions) {
        let Some(Content::Text { text }) = &m.content else {
            return;
        };
        if options.previews == Some(false)
            || m.shadow
            || !self.policies.link_previews
            || !self.policies.tenants.link_previews(&key.tenant)
        {
            return;
        }
        let urls = switchboard_protocol::previews::links(text);
        if urls.is_empty() {
            return;
        }
        let (conversation_kind, member_count) = match self.states.get(key) {
            Some(Some(s)) => (Some(s.kind), s.members.len()),
            _ => (None, 0),
        };
        self.outcomes.push(Outcome::Unfurl(PreviewJob {
            tenant: key.tenant.clone(),
            conversation_id: key.conversation_id.clone(),
            message_id: m.message_id,
            urls,
            sender: Some(m.sender_id.clone()),
            conversation_kind,
            member_count,
        }));
    }

    fn sent_reply(&mut self, reply_to: Option<&str>, message: &Message) {
        self.reply(
            reply_to,
            CommandReply::Sent {
                message: Box::new(message.clone().for_client()),
            },
        );
    }

    /// Why a send's reply, thread or mentions cannot stand, if they
    /// cannot: each names a live message, or members, of the
    /// conversation; a thread's root is not itself in a thread; only
    /// owners and admins mention all.
    fn options_refusal(
        &self,
        key: &ConversationKey,
        state: &SequencerState,
        c: &SendCommand,
    ) -> Option<(ErrorCode, String)> {
        let invalid = |why: String| Some((ErrorCode::InvalidRequest, why));
        // A message from before the sender joined is none of theirs to
        // quote or reply to (v1.3): as if it did not exist.
        let live = |id: MessageId| {
            self.messages.get(&(key.clone(), id)).filter(|m| {
                m.deleted_at.is_none() && state.reads(&c.sender, m.seq) && m.seen_by(&c.sender)
            })
        };
        if let Some(id) = c.options.reply_to
            && live(id).is_none()
        {
            return invalid(format!(
                "reply_to {id} names no live message of this conversation"
            ));
        }
        if let Some(id) = c.options.thread_id {
            match live(id) {
                None => {
                    return invalid(format!(
                        "thread_id {id} names no live message of this conversation"
                    ));
                }
                Some(m) if m.thread_id.is_some() => {
                    return invalid(format!(
                        "thread_id {id} is a reply in a thread: name the thread's root"
                    ));
                }
                Some(_) => {}
            }
        }
        if let Some(stranger) = c
            .options
            .mentions
            .iter()
            .find(|u| !state.members.contains(u))
        {
            return invalid(format!(
                "mentions: {stranger} is not a member of this conversation"
            ));
        }
        if c.options.mention_all && !state.role_of(&c.sender).moderates() {
            return Some((
                ErrorCode::Forbidden,
                "only owners and admins mention all".to_owned(),
            ));
        }
        None
    }
}
