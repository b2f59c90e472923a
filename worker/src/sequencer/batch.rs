//! The working state of one batch, and what its commands share: how a
//! conversation fans out, new message ids, appending a message, replies.

use super::*;

/// Per-batch working state.
pub(super) struct Batch<'a> {
    pub(super) ids: &'a dyn IdSource,
    /// When this batch's edits and deletes happen.
    pub(super) now: Timestamp,
    pub(super) policies: &'a Policies,
    /// Messages edits and deletes of this batch refer to, as they are now
    /// (from the store, and as this batch stores or changes them).
    pub(super) messages: HashMap<(ConversationKey, MessageId), Message>,
    /// Conversation states as the batch goes (`None`: does not exist).
    pub(super) states: HashMap<ConversationKey, Option<SequencerState>>,
    /// Messages already stored, by idempotency key (from the store, and
    /// those this batch stores).
    pub(super) sent: HashMap<SentKey, Message>,
    pub(super) log: MutationLog,
    pub(super) outcomes: Vec<Outcome>,
    pub(super) touched: HashSet<ConversationKey>,
    /// What the store says of each (tenant, user added, actor) of the
    /// batch's creates and adds (`consent.rs`).
    pub(super) consent: HashMap<consent::ConsentKey, switchboard_store::Consent>,
    /// Unsolicited adds this batch made so far, per tenant and user.
    pub(super) unsolicited: HashMap<(TenantId, UserId), u32>,
}

impl Batch<'_> {
    /// How the conversation fans out now.
    pub(super) fn mode(&self, key: &ConversationKey) -> FanOut {
        match self.states.get(key) {
            Some(Some(s)) => self.policies.fan_out(&key.tenant, s.kind, s.members.len()),
            _ => FanOut::Write,
        }
    }

    pub(super) fn route(&self, key: &ConversationKey) -> Route {
        match self.mode(key) {
            FanOut::Write => Route::Users,
            FanOut::Read => Route::Conversation,
        }
    }

    pub(super) fn listen(&mut self, key: &ConversationKey, users: Vec<UserId>, listen: bool) {
        if users.is_empty() {
            return;
        }
        self.outcomes.push(Outcome::Listen {
            tenant: key.tenant.clone(),
            conversation_id: key.conversation_id.clone(),
            users,
            listen,
        });
    }

    pub(super) fn new_id(&self) -> Result<(MessageId, Timestamp), SequenceError> {
        let id = self.ids.next_id()?;
        // created_at is the id's own timestamp, so the two always agree.
        let at = Timestamp::from_unix_ms(decompose(id).unix_ms as i64);
        Ok((id, at))
    }

    pub(super) fn reply(&mut self, to: Option<&str>, reply: CommandReply) {
        if let Some(subject) = to {
            self.outcomes.push(Outcome::Reply {
                subject: subject.to_owned(),
                reply,
            });
        }
    }

    /// The command took effect (`created`), or found it already in place.
    pub(super) fn done(&mut self, to: Option<&str>, conversation: &ConversationId, created: bool) {
        self.reply(
            to,
            CommandReply::Done {
                conversation_id: conversation.clone(),
                created,
            },
        );
    }

    pub(super) fn refuse(&mut self, to: Option<&str>, code: ErrorCode, message: impl Into<String>) {
        self.reply(
            to,
            CommandReply::Refused {
                code,
                message: message.into(),
            },
        );
    }

    /// Stores a new message as the conversation's next `seq`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn append(
        &mut self,
        key: &ConversationKey,
        sender: &UserId,
        device: &DeviceId,
        client_msg_id: ClientMsgId,
        content: Content,
        recipients: Vec<UserId>,
    ) -> Result<(), SequenceError> {
        let (message_id, created_at) = self.new_id()?;
        let Some(Some(state)) = self.states.get_mut(key) else {
            return Ok(());
        };
        let expected = state.last_seq;
        state.last_seq += 1;
        let message = Message {
            message_id,
            conversation_id: key.conversation_id.clone(),
            seq: state.last_seq,
            sender_id: sender.clone(),
            sender_device: device.clone(),
            client_msg_id: client_msg_id.clone(),
            content: Some(content),
            created_at,
            edited_at: None,
            deleted_at: None,
        };
        self.touched.insert(key.clone());
        self.sent.insert(
            SentKey {
                tenant: key.tenant.clone(),
                conversation_id: key.conversation_id.clone(),
                sender: sender.clone(),
                client_msg_id,
            },
            message.clone(),
        );
        let inbox = self.mode(key) == FanOut::Write;
        self.log.push_message(key, expected, message.clone(), inbox);
        self.messages
            .insert((key.clone(), message.message_id), message.clone());
        // Membership changes go to each member concerned even where the
        // conversation fans out on read: a new member's gateway may not
        // listen to the conversation yet.
        let route = if matches!(message.content, Some(Content::System(_))) {
            Route::Users
        } else {
            self.route(key)
        };
        self.outcomes.push(Outcome::Deliver {
            tenant: key.tenant.clone(),
            message,
            recipients,
            route,
        });
        Ok(())
    }
}
