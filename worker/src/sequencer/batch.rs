//! The working state of one batch, and what its commands share: how a
//! conversation fans out, new message ids, appending a message, replies.

use switchboard_nats::envelope::Actor;
use switchboard_protocol::message::SendOptions;

use super::prelude::*;

/// Per-batch working state.
pub(super) struct Batch<'a> {
    pub(super) ids: &'a dyn IdSource,
    /// When this batch's edits and deletes happen.
    pub(super) now: Timestamp,
    /// Whether the batch may have been planned and committed before (it
    /// checks idempotency keys): a command that finds its change already
    /// made then records its audit entry again, in case a crash lost it
    /// (JetStream drops the repeat by its id).
    pub(super) replayed: bool,
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
    pub(super) consent: HashMap<ConsentKey, switchboard_store::Consent>,
    /// Unsolicited adds this batch made so far, per tenant and user.
    pub(super) unsolicited: HashMap<(TenantId, UserId), u32>,
    /// The reactors' own emoji on the messages of this batch's reactions.
    pub(super) reactions: UserReactions,
    /// The pins of conversations this batch pins in or unpins from.
    pub(super) pins: HashMap<ConversationKey, Vec<switchboard_store::PinRow>>,
    /// The bans of conversations this batch adds members to, bans or
    /// unbans in, newest first (v1.2).
    pub(super) bans: HashMap<ConversationKey, Vec<switchboard_protocol::safety::Ban>>,
    /// (tenant, user, whom they block) among the users of this batch's
    /// direct conversations that do not exist yet, as this batch changes
    /// them (v1.2).
    pub(super) blocking: HashSet<(TenantId, UserId, UserId)>,
    /// The invites of the conversations this batch joins with one, or
    /// makes or revokes one of, as this batch changes them (v1.3).
    pub(super) invites: HashMap<ConversationKey, Vec<switchboard_protocol::channels::Invite>>,
    /// The reports this batch resolves, as they are now.
    pub(super) reports: HashMap<MessageId, switchboard_protocol::reports::Report>,
    /// The profiles this batch changes, as they are now (v1.3).
    pub(super) profiles: HashMap<(TenantId, UserId), switchboard_protocol::profile::Profile>,
    /// Who hears of each of this batch's profile changes.
    pub(super) audiences: HashMap<(TenantId, UserId), Audience>,
    /// When members last sent where slow mode is on, as committed.
    pub(super) last_sent: &'a LastSent,
    /// This batch's sends that slow mode counts.
    pub(super) sent_at: HashMap<(ConversationKey, UserId), Timestamp>,
}

/// Who hears of a change of one user's profile.
#[derive(Debug, Default)]
pub(super) struct Audience {
    /// The user and every member of their small conversations.
    pub users: Vec<UserId>,
    /// Their large conversations: one event on each one's subject.
    pub conversations: Vec<ConversationId>,
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
                retry_after_ms: None,
            },
        );
    }

    /// The conversation's state for a command of a member, or the reply
    /// that refuses it.
    pub(super) fn member_state_for(
        &mut self,
        by: &Actor,
        reply_to: Option<&str>,
    ) -> Option<(ConversationKey, SequencerState)> {
        let key = key(&by.tenant, &by.conversation_id);
        match self.states.get(&key) {
            Some(Some(s)) if s.members.contains(&by.actor) || by.actor_is_admin => {
                Some((key, s.clone()))
            }
            Some(Some(_)) => {
                self.refuse(
                    reply_to,
                    ErrorCode::NotAMember,
                    "you are not a member of this conversation",
                );
                None
            }
            _ => {
                self.refuse(reply_to, ErrorCode::NotFound, "no such conversation");
                None
            }
        }
    }

    /// Whether a REST command was applied before: its system message
    /// (keyed by the command's id) is stored, so this is a retry, answered
    /// as done again without a change.
    pub(super) fn answered_as_retry(&mut self, by: &Actor, reply_to: Option<&str>) -> bool {
        let Some(client_msg_id) = system_client_msg_id(by.command_id) else {
            return false;
        };
        let retried = SentKey {
            tenant: by.tenant.clone(),
            conversation_id: by.conversation_id.clone(),
            sender: by.actor.clone(),
            client_msg_id,
        };
        if !self.sent.contains_key(&retried) {
            return false;
        }
        self.done(reply_to, &by.conversation_id, false);
        true
    }

    /// Stores a new message as the conversation's next `seq`.
    pub(super) fn append(
        &mut self,
        key: &ConversationKey,
        sender: &UserId,
        device: &DeviceId,
        client_msg_id: ClientMsgId,
        content: Content,
        recipients: Vec<UserId>,
    ) -> Result<(), SequenceError> {
        self.append_with(
            key,
            sender,
            device,
            client_msg_id,
            content,
            recipients,
            &SendOptions::default(),
        )
        .map(drop)
    }

    /// [`Batch::append`] of a message that replies, goes into a thread or
    /// mentions (`options`, checked by the caller); the message stored,
    /// if it was.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn append_with(
        &mut self,
        key: &ConversationKey,
        sender: &UserId,
        device: &DeviceId,
        client_msg_id: ClientMsgId,
        content: Content,
        recipients: Vec<UserId>,
        options: &SendOptions,
    ) -> Result<Option<Message>, SequenceError> {
        let (message_id, created_at) = self.new_id()?;
        let policies = self.policies;
        // A shadow-banned sender's message is theirs alone (v1.3): stored
        // flagged, delivered to their own devices, pushed to nobody.
        let shadow = !matches!(content, Content::System(_))
            && policies.bans.shadowed(&key.tenant, sender, created_at);
        let Some(Some(state)) = self.states.get_mut(key) else {
            return Ok(None);
        };
        let expected = state.last_seq;
        state.last_seq += 1;
        let expires_at = policies
            .effective(&key.tenant, state.policy)
            .lifetime_ms()
            .map(|ms| Timestamp::from_unix_ms(created_at.unix_ms().saturating_add(ms)));
        // A poll starts with its results: every count at 0 (v1.3).
        let poll_results = match &content {
            Content::Poll(p) => Some(p.fresh_results()),
            _ => None,
        };
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
            reply_to: options.reply_to,
            thread_id: options.thread_id,
            thread: None,
            reactions: Vec::new(),
            mentions: options.mentions.clone(),
            mention_all: options.mention_all,
            blocked_sender: false,
            expires_at,
            custom: options.custom.clone().filter(|c| !c.is_empty()),
            poll_results,
            previews: Vec::new(),
            shadow,
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
        let (recipients, route, push_to) = if shadow {
            (vec![sender.clone()], Route::Users, Vec::new())
        } else {
            let push_to = self.push_to(key, &message, &recipients, route);
            (recipients, route, push_to)
        };
        self.outcomes.push(Outcome::Deliver {
            tenant: key.tenant.clone(),
            message: message.clone(),
            recipients,
            route,
            push_to,
        });
        Ok(Some(message))
    }

    /// Who of `recipients` may get a push for `message`, by their own
    /// settings (v1.1): where the conversation fans out on read, only the
    /// members it names (they alone get inbox entries there too). A
    /// message names a member when it mentions them, mentions all, or
    /// replies to one of theirs.
    fn push_to(
        &self,
        key: &ConversationKey,
        message: &Message,
        recipients: &[UserId],
        route: Route,
    ) -> Vec<UserId> {
        let Some(Some(state)) = self.states.get(key) else {
            return Vec::new();
        };
        let replied_to = message
            .reply_to
            .and_then(|id| self.messages.get(&(key.clone(), id)))
            .map(|m| m.sender_id.clone());
        recipients
            .iter()
            .filter(|u| {
                let named = message.mentions_user(u) || replied_to.as_ref() == Some(*u);
                (route == Route::Users || named)
                    && state.settings_of(u).pushes(message.created_at, named)
            })
            .cloned()
            .collect()
    }
}

/// (tenant, user added, actor): whose consent a create or an add asks
/// (`consent.rs`).
pub(super) type ConsentKey = (TenantId, UserId, UserId);

/// The reactors' own emoji, by (conversation, message seq, reactor)
/// (`reactions.rs`).
pub(super) type UserReactions = HashMap<(ConversationKey, u64, UserId), BTreeSet<String>>;

/// Builds the batch's mutations in command order, merging consecutive
/// appends to one conversation.
#[derive(Default)]
pub(super) struct MutationLog {
    pub(super) mutations: Vec<Mutation>,
    /// Index of the append a conversation's next message can join.
    open_append: HashMap<ConversationKey, usize>,
}

impl MutationLog {
    pub(super) fn push_other(&mut self, key: &ConversationKey, m: Mutation) {
        self.open_append.remove(key);
        self.mutations.push(m);
    }

    /// `inbox` is the conversation's fan-out; it only changes with a
    /// membership change, which closes the open append.
    pub(super) fn push_message(
        &mut self,
        key: &ConversationKey,
        expected_last_seq: u64,
        message: Message,
        inbox: bool,
    ) {
        if let Some(&i) = self.open_append.get(key)
            && let Some(Mutation::Append { messages, .. }) = self.mutations.get_mut(i)
        {
            messages.push(message);
            return;
        }
        self.open_append.insert(key.clone(), self.mutations.len());
        self.mutations.push(Mutation::Append {
            key: key.clone(),
            expected_last_seq,
            messages: vec![message],
            inbox,
        });
    }
}
