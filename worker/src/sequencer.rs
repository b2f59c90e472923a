//! The sequencer: turns a batch of commands for one partition into store
//! mutations and the events to publish once they are committed.
//!
//! It is the single writer of every conversation in its partition (the
//! partition lease guarantees one sequencer per partition at a time), so
//! it assigns `seq` from its own cached `last_seq` without asking anyone.
//! The store's append check (`expected_last_seq`) catches the one case
//! where that belief is wrong: a writer that lost its lease without
//! noticing. Then the batch is refused, the cache dropped, and the batch
//! redone from the store's state.
//!
//! Every command is idempotent, so a batch that is delivered again after a
//! crash changes nothing: sends are found by their idempotency key, system
//! messages by their command id, and a conversation that exists is not
//! created again.

use std::collections::{BTreeSet, HashMap, HashSet};

use switchboard_backbone::envelope::{
    Command, CommandReply, CreateConversationCommand, MembersCommand, Rejection, SendCommand,
    UpdateCommand,
};
use switchboard_backbone::node_id::IdSource;
use switchboard_protocol::content::SystemEvent;
use switchboard_protocol::snowflake::decompose;
use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, ConversationKind, DeviceId, ErrorCode, Message,
    MessageId, TenantId, Timestamp, UserId,
};
use switchboard_store::{
    ConversationKey, ConversationRecord, MessageKey, Mutation, SentKey, SequencerState, Store,
    StoreError,
};

use crate::policy::{Action, Policies};
use switchboard_plugin_host::fanout::FanOut;

/// A command with the subject its outcome goes to (REST commands only).
#[derive(Debug, Clone)]
pub struct Incoming {
    pub command: Command,
    pub reply_to: Option<String>,
}

/// How a message reaches the connected members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// To each member's own event subject (fan-out on write).
    Users,
    /// Once, to the conversation's subject, which the gateways of connected
    /// members listen to (fan-out on read).
    Conversation,
}

/// What to publish after the batch is committed.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A message to fan out: to every user in `recipients` (the sender
    /// included, whose sending device turns it into an `ack`), or to the
    /// conversation's subject.
    Deliver {
        tenant: TenantId,
        message: Message,
        recipients: Vec<UserId>,
        route: Route,
    },
    /// An edit or a deletion: the message as it is now, for every member.
    Update {
        tenant: TenantId,
        message: Message,
        recipients: Vec<UserId>,
        route: Route,
    },
    /// Tells these users' gateways to listen (or stop listening) to the
    /// conversation's subject for them.
    Listen {
        tenant: TenantId,
        conversation_id: ConversationId,
        users: Vec<UserId>,
        listen: bool,
    },
    /// A command that was refused, for the device that sent it.
    Reject {
        tenant: TenantId,
        sender: UserId,
        rejection: Rejection,
    },
    /// The outcome of a REST command.
    Reply {
        subject: String,
        reply: CommandReply,
    },
}

/// The result of sequencing one batch.
#[derive(Debug, Default)]
pub struct Plan {
    pub mutations: Vec<Mutation>,
    pub outcomes: Vec<Outcome>,
    /// States to cache once the mutations are committed.
    staged: HashMap<ConversationKey, SequencerState>,
}

#[derive(Debug, thiserror::Error)]
pub enum SequenceError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no message id available: {0}")]
    Ids(#[from] switchboard_backbone::BackboneError),
}

/// Sequencer state for one partition.
pub struct Sequencer {
    cache: HashMap<ConversationKey, SequencerState>,
    cache_limit: usize,
    policies: Policies,
}

fn key(tenant: &TenantId, conversation: &ConversationId) -> ConversationKey {
    ConversationKey {
        tenant: tenant.clone(),
        conversation_id: conversation.clone(),
    }
}

fn conversation_key(cmd: &Command) -> ConversationKey {
    key(cmd.tenant(), cmd.conversation_id())
}

/// The users of `users` that `keep` accepts, sorted and without repeats.
fn users_where(users: &[UserId], keep: impl Fn(&UserId) -> bool) -> Vec<UserId> {
    users
        .iter()
        .filter(|u| keep(u))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn system_client_msg_id(command_id: MessageId) -> Option<ClientMsgId> {
    ClientMsgId::new(format!("cmd-{command_id}")).ok()
}

/// The idempotency key a command's message is stored under.
fn sent_key(cmd: &Command) -> Option<SentKey> {
    let (sender, client_msg_id) = match cmd {
        Command::Send(c) => (c.sender.clone(), c.client_msg_id.clone()),
        Command::AddMembers(c) | Command::RemoveMembers(c) => {
            (c.actor.clone(), system_client_msg_id(c.command_id)?)
        }
        Command::CreateConversation(_) | Command::Edit(_) | Command::Delete(_) => return None,
    };
    Some(SentKey {
        tenant: cmd.tenant().clone(),
        conversation_id: cmd.conversation_id().clone(),
        sender,
        client_msg_id,
    })
}

/// Builds the batch's mutations in command order, merging consecutive
/// appends to one conversation.
#[derive(Default)]
struct MutationLog {
    mutations: Vec<Mutation>,
    /// Index of the append a conversation's next message can join.
    open_append: HashMap<ConversationKey, usize>,
}

impl MutationLog {
    fn push_other(&mut self, key: &ConversationKey, m: Mutation) {
        self.open_append.remove(key);
        self.mutations.push(m);
    }

    /// `inbox` is the conversation's fan-out; it only changes with a
    /// membership change, which closes the open append.
    fn push_message(
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

/// Per-batch working state.
struct Batch<'a> {
    ids: &'a dyn IdSource,
    policies: &'a Policies,
    /// Messages edits and deletes of this batch refer to, as they are now
    /// (from the store, and as this batch stores or changes them).
    messages: HashMap<(ConversationKey, MessageId), Message>,
    /// Conversation states as the batch goes (`None`: does not exist).
    states: HashMap<ConversationKey, Option<SequencerState>>,
    /// Messages already stored, by idempotency key (from the store, and
    /// those this batch stores).
    sent: HashMap<SentKey, Message>,
    log: MutationLog,
    outcomes: Vec<Outcome>,
    touched: HashSet<ConversationKey>,
}

impl Sequencer {
    pub fn new(cache_limit: usize, policies: Policies) -> Self {
        Self {
            cache: HashMap::new(),
            cache_limit,
            policies,
        }
    }

    /// Forgets cached state (after a refused commit, or when the cache is full).
    pub fn forget(&mut self) {
        self.cache.clear();
    }

    /// Called once the plan's mutations are committed.
    pub fn committed(&mut self, plan: &mut Plan) {
        if self.cache.len() + plan.staged.len() > self.cache_limit {
            // Simple bound: start over. States reload from the store on use.
            self.cache.clear();
        }
        self.cache.extend(plan.staged.drain());
    }

    /// Sequences a batch. Reads the store for state it has not cached and,
    /// with `check_sent`, for the idempotency keys of the batch; writes
    /// nothing.
    ///
    /// Without `check_sent` a retry that reaches the writer (one beyond
    /// JetStream's dedupe window) is sequenced as new, and the store
    /// refuses the commit because its key exists; the caller then plans
    /// again with `check_sent`. That keeps a read off the common path:
    /// first deliveries are almost never retries.
    pub async fn plan(
        &mut self,
        store: &dyn Store,
        ids: &dyn IdSource,
        batch: &[Incoming],
        check_sent: bool,
    ) -> Result<Plan, SequenceError> {
        let keys: BTreeSet<ConversationKey> =
            batch.iter().map(|i| conversation_key(&i.command)).collect();
        let missing: Vec<ConversationKey> = keys
            .iter()
            .filter(|k| !self.cache.contains_key(*k))
            .cloned()
            .collect();
        let mut states: HashMap<ConversationKey, Option<SequencerState>> = keys
            .iter()
            .filter_map(|k| self.cache.get(k).map(|s| (k.clone(), Some(s.clone()))))
            .collect();
        if !missing.is_empty() {
            let loaded = store.sequencer_states(missing.clone()).await?;
            states.extend(missing.into_iter().zip(loaded));
        }

        let sent_keys: Vec<SentKey> = if check_sent {
            batch.iter().filter_map(|i| sent_key(&i.command)).collect()
        } else {
            Vec::new()
        };
        let found = if sent_keys.is_empty() {
            Vec::new()
        } else {
            store.find_sent(sent_keys.clone()).await?
        };
        let sent = sent_keys
            .into_iter()
            .zip(found)
            .filter_map(|(k, m)| m.map(|m| (k, m)))
            .collect();

        // The messages this batch's edits and deletes are about.
        let targets: Vec<MessageKey> = batch
            .iter()
            .filter_map(|i| match &i.command {
                Command::Edit(c) | Command::Delete(c) => Some(MessageKey {
                    tenant: c.tenant.clone(),
                    conversation_id: c.conversation_id.clone(),
                    message_id: c.message_id,
                }),
                _ => None,
            })
            .collect();
        let found = if targets.is_empty() {
            Vec::new()
        } else {
            store.find_messages(targets.clone()).await?
        };
        let messages = targets
            .into_iter()
            .zip(found)
            .filter_map(|(k, m)| m.map(|m| ((key(&k.tenant, &k.conversation_id), k.message_id), m)))
            .collect();

        let mut b = Batch {
            ids,
            policies: &self.policies,
            messages,
            states,
            sent,
            log: MutationLog::default(),
            outcomes: Vec::new(),
            touched: HashSet::new(),
        };
        for incoming in batch {
            match &incoming.command {
                Command::Send(c) => b.send(c)?,
                Command::CreateConversation(c) => b.create(c, incoming.reply_to.as_deref())?,
                Command::AddMembers(c) => b.add_members(c, incoming.reply_to.as_deref())?,
                Command::RemoveMembers(c) => b.remove_members(c, incoming.reply_to.as_deref())?,
                Command::Edit(c) => b.update(c, Action::Edit)?,
                Command::Delete(c) => b.update(c, Action::Delete)?,
            }
        }
        let staged = b
            .touched
            .iter()
            .filter_map(|k| b.states.get(k).cloned().flatten().map(|s| (k.clone(), s)))
            .collect();
        Ok(Plan {
            mutations: b.log.mutations,
            outcomes: b.outcomes,
            staged,
        })
    }
}

impl Batch<'_> {
    /// How the conversation fans out now.
    fn mode(&self, key: &ConversationKey) -> FanOut {
        match self.states.get(key) {
            Some(Some(s)) => self.policies.fan_out(&key.tenant, s.kind, s.members.len()),
            _ => FanOut::Write,
        }
    }

    fn route(&self, key: &ConversationKey) -> Route {
        match self.mode(key) {
            FanOut::Write => Route::Users,
            FanOut::Read => Route::Conversation,
        }
    }

    fn listen(&mut self, key: &ConversationKey, users: Vec<UserId>, listen: bool) {
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

    fn new_id(&self) -> Result<(MessageId, Timestamp), SequenceError> {
        let id = self.ids.next_id()?;
        // created_at is the id's own timestamp, so the two always agree.
        let at = Timestamp::from_unix_ms(decompose(id).unix_ms as i64);
        Ok((id, at))
    }

    fn reply(&mut self, to: Option<&str>, reply: CommandReply) {
        if let Some(subject) = to {
            self.outcomes.push(Outcome::Reply {
                subject: subject.to_owned(),
                reply,
            });
        }
    }

    /// The command took effect (`created`), or found it already in place.
    fn done(&mut self, to: Option<&str>, conversation: &ConversationId, created: bool) {
        self.reply(
            to,
            CommandReply::Done {
                conversation_id: conversation.clone(),
                created,
            },
        );
    }

    fn refuse(&mut self, to: Option<&str>, code: ErrorCode, message: impl Into<String>) {
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
    fn append(
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

    fn send(&mut self, c: &SendCommand) -> Result<(), SequenceError> {
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
                    request_type: "send_message".into(),
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

    fn create(
        &mut self,
        c: &CreateConversationCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let key = key(&c.tenant, &c.conversation_id);
        let members: BTreeSet<UserId> = c.members.iter().cloned().collect();
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
        };
        self.log.push_other(
            &key,
            Mutation::CreateConversation {
                record: Box::new(record),
                members: members.iter().cloned().collect(),
            },
        );
        self.states.insert(
            key.clone(),
            Some(SequencerState {
                kind: c.kind,
                created_by: c.actor.clone(),
                last_seq: 0,
                members,
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

    /// Checks shared by membership changes; the state if the change may go on.
    fn membership_state(
        &mut self,
        c: &MembersCommand,
        reply_to: Option<&str>,
    ) -> Option<SequencerState> {
        let key = key(&c.tenant, &c.conversation_id);
        let state = match self.states.get(&key) {
            Some(Some(s)) => s.clone(),
            _ => {
                self.refuse(reply_to, ErrorCode::NotFound, "no such conversation");
                return None;
            }
        };
        if !state.members.contains(&c.actor) && !c.actor_is_admin {
            self.refuse(
                reply_to,
                ErrorCode::NotAMember,
                "you are not a member of this conversation",
            );
            return None;
        }
        if state.kind == ConversationKind::Direct {
            self.refuse(
                reply_to,
                ErrorCode::Conflict,
                "a direct conversation always has the same two members",
            );
            return None;
        }
        Some(state)
    }

    /// A membership command already applied (found by its system
    /// message): answer it the same way again.
    fn already_applied(&mut self, c: &MembersCommand, reply_to: Option<&str>) -> bool {
        let Some(client_msg_id) = system_client_msg_id(c.command_id) else {
            return false;
        };
        let skey = SentKey {
            tenant: c.tenant.clone(),
            conversation_id: c.conversation_id.clone(),
            sender: c.actor.clone(),
            client_msg_id,
        };
        if !self.sent.contains_key(&skey) {
            return false;
        }
        self.done(reply_to, &c.conversation_id, false);
        true
    }

    fn add_members(
        &mut self,
        c: &MembersCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        if self.already_applied(c, reply_to) {
            return Ok(());
        }
        let Some(state) = self.membership_state(c, reply_to) else {
            return Ok(());
        };
        let new = users_where(&c.users, |u| !state.members.contains(u));
        if new.is_empty() {
            self.done(reply_to, &c.conversation_id, false);
            return Ok(());
        }
        if let Err(why) = self
            .policies
            .check_members(&c.tenant, state.members.len() + new.len())
        {
            self.refuse(reply_to, ErrorCode::QuotaExceeded, why);
            return Ok(());
        }
        let key = key(&c.tenant, &c.conversation_id);
        self.log.push_other(
            &key,
            Mutation::AddMembers {
                key: key.clone(),
                users: new.clone(),
                at: c.at,
            },
        );
        let before = self.mode(&key);
        let mut members = state.members.clone();
        members.extend(new.iter().cloned());
        if let Some(Some(s)) = self.states.get_mut(&key) {
            s.members = members.clone();
        }
        // Crossing the threshold: everyone's gateways start listening; past
        // it already: the newcomers'.
        match (before, self.mode(&key)) {
            (FanOut::Write, FanOut::Read) => {
                self.listen(&key, members.iter().cloned().collect(), true)
            }
            (FanOut::Read, FanOut::Read) => self.listen(&key, new.clone(), true),
            _ => {}
        }
        self.touched.insert(key.clone());
        let event = system_event(SystemEvent::MEMBERS_ADDED, &c.actor, new);
        self.system_message(c, &key, event, members.into_iter().collect(), reply_to)
    }

    fn remove_members(
        &mut self,
        c: &MembersCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        if self.already_applied(c, reply_to) {
            return Ok(());
        }
        let Some(state) = self.membership_state(c, reply_to) else {
            return Ok(());
        };
        let leaving_only_self = c.users.iter().all(|u| *u == c.actor);
        if !leaving_only_self && state.created_by != c.actor && !c.actor_is_admin {
            self.refuse(
                reply_to,
                ErrorCode::Forbidden,
                "only the conversation's creator or a tenant admin removes other members",
            );
            return Ok(());
        }
        let gone = users_where(&c.users, |u| state.members.contains(u));
        if gone.is_empty() {
            self.done(reply_to, &c.conversation_id, false);
            return Ok(());
        }
        let key = key(&c.tenant, &c.conversation_id);
        // Everyone who was a member hears of the removal, the removed too.
        let audience: Vec<UserId> = state.members.iter().cloned().collect();
        self.log.push_other(
            &key,
            Mutation::RemoveMembers {
                key: key.clone(),
                users: gone.clone(),
            },
        );
        let before = self.mode(&key);
        if let Some(Some(s)) = self.states.get_mut(&key) {
            for u in &gone {
                s.members.remove(u);
            }
        }
        if before == FanOut::Read {
            self.listen(&key, gone.clone(), false);
            if self.mode(&key) == FanOut::Write {
                let remaining = state
                    .members
                    .iter()
                    .filter(|m| !gone.contains(m))
                    .cloned()
                    .collect();
                self.listen(&key, remaining, false);
            }
        }
        self.touched.insert(key.clone());
        let event = system_event(SystemEvent::MEMBERS_REMOVED, &c.actor, gone);
        self.system_message(c, &key, event, audience, reply_to)
    }

    fn system_message(
        &mut self,
        c: &MembersCommand,
        key: &ConversationKey,
        event: SystemEvent,
        audience: Vec<UserId>,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some(client_msg_id) = system_client_msg_id(c.command_id) else {
            return Ok(());
        };
        self.append(
            key,
            &c.actor,
            &c.device,
            client_msg_id,
            Content::System(event),
            audience,
        )?;
        self.done(reply_to, &c.conversation_id, true);
        Ok(())
    }
}

impl Batch<'_> {
    fn refuse_update(
        &mut self,
        c: &UpdateCommand,
        action: Action,
        code: ErrorCode,
        message: impl Into<String>,
    ) {
        self.outcomes.push(Outcome::Reject {
            tenant: c.tenant.clone(),
            sender: c.actor.clone(),
            rejection: Rejection {
                device: c.device.clone(),
                request_type: match action {
                    Action::Edit => "edit_message",
                    Action::Delete => "delete_message",
                }
                .into(),
                client_msg_id: None,
                conversation_id: c.conversation_id.clone(),
                code,
                message: message.into(),
            },
        });
    }

    /// An edit or a deletion. Sequenced like sends, so an edit racing a
    /// delete ends the same way on every device: whichever the writer takes
    /// first happens, and an edit after a delete is refused.
    fn update(&mut self, c: &UpdateCommand, action: Action) -> Result<(), SequenceError> {
        let key = key(&c.tenant, &c.conversation_id);
        let members: Vec<UserId> = match self.states.get(&key) {
            Some(Some(s)) if s.members.contains(&c.actor) => s.members.iter().cloned().collect(),
            Some(Some(_)) => {
                self.refuse_update(
                    c,
                    action,
                    ErrorCode::NotAMember,
                    "you are not a member of this conversation",
                );
                return Ok(());
            }
            _ => {
                self.refuse_update(c, action, ErrorCode::NotFound, "no such conversation");
                return Ok(());
            }
        };
        let Some(current) = self.messages.get(&(key.clone(), c.message_id)).cloned() else {
            self.refuse_update(
                c,
                action,
                ErrorCode::NotFound,
                "no such message in this conversation",
            );
            return Ok(());
        };
        let now = Timestamp::now().max(current.created_at);
        if let Err(why) = self.policies.check_change(
            &key.tenant,
            action,
            &current,
            &c.actor,
            c.actor_is_admin,
            now,
        ) {
            self.refuse_update(c, action, ErrorCode::Forbidden, why);
            return Ok(());
        }
        let inbox = self.mode(&key) == FanOut::Write;
        let route = self.route(&key);
        let mut updated = current.clone();
        match (action, &c.content) {
            (Action::Edit, _) if current.deleted_at.is_some() => {
                self.refuse_update(c, action, ErrorCode::Conflict, "the message is deleted");
                return Ok(());
            }
            (Action::Edit, Some(content)) if current.content.as_ref() != Some(content) => {
                self.log.push_other(
                    &key,
                    Mutation::Edit {
                        key: key.clone(),
                        seq: current.seq,
                        content: content.clone(),
                        editor: c.actor.clone(),
                        at: now,
                        inbox,
                    },
                );
                updated.content = Some(content.clone());
                updated.edited_at = Some(now);
            }
            (Action::Delete, _) if current.deleted_at.is_none() => {
                self.log.push_other(
                    &key,
                    Mutation::Delete {
                        key: key.clone(),
                        seq: current.seq,
                        at: now,
                        inbox,
                    },
                );
                updated.content = None;
                updated.deleted_at = Some(now);
            }
            // A repeat (the same content again, a second delete): nothing
            // changes, and the members hear the current state again.
            _ => {}
        }
        self.messages.insert((key, c.message_id), updated.clone());
        self.outcomes.push(Outcome::Update {
            tenant: c.tenant.clone(),
            message: updated,
            recipients: members,
            route,
        });
        Ok(())
    }
}

fn system_event(event: &str, actor: &UserId, users: Vec<UserId>) -> SystemEvent {
    SystemEvent {
        event: event.to_owned(),
        actor: actor.clone(),
        user_ids: users,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use switchboard_backbone::envelope::UpdateCommand;
    use switchboard_protocol::snowflake::SnowflakeGenerator;
    use switchboard_protocol::{ConversationId, TenantId};
    use switchboard_store::embedded::{EmbeddedConfig, EmbeddedStore};

    use super::*;

    struct Counter(std::sync::Mutex<SnowflakeGenerator>, AtomicU64);

    impl IdSource for Counter {
        fn next_id(&self) -> Result<MessageId, switchboard_backbone::BackboneError> {
            let ms = self.1.fetch_add(1, Ordering::Relaxed);
            Ok(self.0.lock().unwrap().next_id(ms))
        }
    }

    fn ids() -> Counter {
        // Ids stamped from now on, as the real generator's are: the edit
        // window is measured against the clock.
        let now = Timestamp::now().unix_ms() as u64;
        Counter(
            std::sync::Mutex::new(SnowflakeGenerator::new(1).unwrap()),
            AtomicU64::new(now),
        )
    }

    fn u(s: &str) -> UserId {
        UserId::new(s).unwrap()
    }

    fn create(conv: &str, kind: ConversationKind, members: &[&str], id: u64) -> Incoming {
        Incoming {
            command: Command::CreateConversation(CreateConversationCommand {
                command_id: MessageId::from_u64(id),
                tenant: TenantId::new("t").unwrap(),
                conversation_id: ConversationId::new(conv).unwrap(),
                kind,
                title: None,
                members: members.iter().map(|m| u(m)).collect(),
                actor: u(members[0]),
                device: DeviceId::default_device(),
                at: Timestamp::from_unix_ms(1),
            }),
            reply_to: Some("reply".into()),
        }
    }

    fn send(conv: &str, sender: &str, client_msg_id: &str) -> Incoming {
        Incoming {
            command: Command::Send(SendCommand {
                tenant: TenantId::new("t").unwrap(),
                conversation_id: ConversationId::new(conv).unwrap(),
                sender: u(sender),
                device: DeviceId::default_device(),
                client_msg_id: ClientMsgId::new(client_msg_id).unwrap(),
                content: Content::Text { text: "hi".into() },
                received_at: Timestamp::from_unix_ms(1),
            }),
            reply_to: None,
        }
    }

    fn members(conv: &str, actor: &str, users: &[&str], id: u64, add: bool) -> Incoming {
        let c = MembersCommand {
            command_id: MessageId::from_u64(id),
            tenant: TenantId::new("t").unwrap(),
            conversation_id: ConversationId::new(conv).unwrap(),
            users: users.iter().map(|m| u(m)).collect(),
            actor: u(actor),
            device: DeviceId::default_device(),
            actor_is_admin: false,
            at: Timestamp::from_unix_ms(2),
        };
        Incoming {
            command: if add {
                Command::AddMembers(c)
            } else {
                Command::RemoveMembers(c)
            },
            reply_to: Some("reply".into()),
        }
    }

    /// Plans and commits one batch; returns the outcomes.
    async fn run(
        seq: &mut Sequencer,
        store: &EmbeddedStore,
        ids: &Counter,
        batch: &[Incoming],
    ) -> Vec<Outcome> {
        let mut plan = seq.plan(store, ids, batch, true).await.unwrap();
        let mutations = std::mem::take(&mut plan.mutations);
        store.commit(mutations).await.unwrap();
        seq.committed(&mut plan);
        plan.outcomes
    }

    fn delivered(o: &Outcome) -> (u64, Vec<&str>) {
        match o {
            Outcome::Deliver {
                message,
                recipients,
                ..
            } => (message.seq, recipients.iter().map(|r| r.as_str()).collect()),
            other => panic!("expected a delivery, got {other:?}"),
        }
    }

    fn code(o: &Outcome) -> ErrorCode {
        match o {
            Outcome::Reject { rejection, .. } => rejection.code,
            Outcome::Reply {
                reply: CommandReply::Refused { code, .. },
                ..
            } => *code,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn open() -> (tempfile::TempDir, EmbeddedStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&EmbeddedConfig::in_dir(dir.path())).unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn sequences_sends_gap_free_and_answers_retries_with_the_original() {
        let (_dir, store) = open();
        let ids = ids();
        let mut seq = Sequencer::new(1000, Policies::default());
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[
                create("c", ConversationKind::Group, &["a", "b"], 1),
                send("c", "a", "m1"),
                send("c", "b", "m2"),
                send("c", "a", "m1"),
            ],
        )
        .await;
        assert!(matches!(
            out[0],
            Outcome::Reply {
                reply: CommandReply::Done { created: true, .. },
                ..
            }
        ));
        assert_eq!(delivered(&out[1]), (1, vec!["a", "b"]));
        assert_eq!(delivered(&out[2]), (2, vec!["a", "b"]));
        assert_eq!(
            delivered(&out[3]).0,
            1,
            "a retry in the same batch is the original"
        );
        // A retry in a later batch (say, after the dedupe window) too.
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[send("c", "a", "m1"), send("c", "a", "m3")],
        )
        .await;
        assert_eq!(delivered(&out[0]).0, 1);
        assert_eq!(delivered(&out[1]).0, 3);
        // A fresh sequencer (a new owner) continues from the store.
        let mut fresh = Sequencer::new(1000, Policies::default());
        let out = run(&mut fresh, &store, &ids, &[send("c", "b", "m4")]).await;
        assert_eq!(delivered(&out[0]).0, 4);
    }

    #[tokio::test]
    async fn refuses_non_members_and_unknown_conversations() {
        let (_dir, store) = open();
        let ids = ids();
        let mut seq = Sequencer::new(1000, Policies::default());
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[
                send("nope", "a", "m1"),
                create("c", ConversationKind::Direct, &["a", "b"], 1),
                send("c", "eve", "m1"),
            ],
        )
        .await;
        assert_eq!(code(&out[0]), ErrorCode::NotFound);
        assert_eq!(code(&out[2]), ErrorCode::NotAMember);
        let state = store
            .sequencer_states(vec![ConversationKey {
                tenant: TenantId::new("t").unwrap(),
                conversation_id: ConversationId::new("c").unwrap(),
            }])
            .await
            .unwrap();
        assert_eq!(state[0].as_ref().unwrap().last_seq, 0, "nothing was stored");
    }

    #[tokio::test]
    async fn membership_changes_are_sequenced_with_the_messages() {
        let (_dir, store) = open();
        let ids = ids();
        let mut seq = Sequencer::new(1000, Policies::default());
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[
                create("g", ConversationKind::Group, &["a", "b"], 1),
                send("g", "c", "early"),
                members("g", "a", &["c"], 2, true),
                send("g", "c", "late"),
                members("g", "b", &["a"], 3, false),
                members("g", "a", &["b"], 4, false),
                send("g", "b", "after"),
            ],
        )
        .await;
        assert_eq!(code(&out[1]), ErrorCode::NotAMember, "not yet a member");
        assert_eq!(
            delivered(&out[2]),
            (1, vec!["a", "b", "c"]),
            "system message"
        );
        assert_eq!(delivered(&out[4]), (2, vec!["a", "b", "c"]));
        assert_eq!(code(&out[5]), ErrorCode::Forbidden, "b did not create g");
        assert_eq!(
            delivered(&out[6]),
            (3, vec!["a", "b", "c"]),
            "the removed hear of it"
        );
        assert_eq!(code(&out[8]), ErrorCode::NotAMember, "b was removed");
        // The same command again (a redelivery) changes nothing.
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[members("g", "a", &["c"], 2, true)],
        )
        .await;
        assert!(matches!(
            out[0],
            Outcome::Reply {
                reply: CommandReply::Done { created: false, .. },
                ..
            }
        ));
        // Direct conversations keep their two members.
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[
                create("d", ConversationKind::Direct, &["a", "b"], 5),
                members("d", "a", &["c"], 6, true),
            ],
        )
        .await;
        assert_eq!(code(&out[1]), ErrorCode::Conflict);
    }

    #[tokio::test]
    async fn a_stale_writer_is_refused_by_the_store() {
        let (_dir, store) = open();
        let ids = ids();
        let mut owner = Sequencer::new(1000, Policies::default());
        run(
            &mut owner,
            &store,
            &ids,
            &[
                create("c", ConversationKind::Group, &["a"], 1),
                send("c", "a", "m1"),
            ],
        )
        .await;
        // A zombie that cached the state at seq 1, while the new owner writes seq 2.
        let mut zombie = Sequencer::new(1000, Policies::default());
        run(&mut zombie, &store, &ids, &[send("c", "a", "m2")]).await;
        let mut plan = owner
            .plan(&store, &ids, &[send("c", "a", "m3")], true)
            .await
            .unwrap();
        let refused = store.commit(std::mem::take(&mut plan.mutations)).await;
        assert!(
            matches!(refused, Err(StoreError::Conflict(_))),
            "{refused:?}"
        );
        owner.forget();
        let out = run(&mut owner, &store, &ids, &[send("c", "a", "m3")]).await;
        assert_eq!(delivered(&out[0]).0, 3);
    }

    #[tokio::test]
    async fn an_unchecked_retry_is_caught_by_the_store_and_answered_when_checked() {
        let (_dir, store) = open();
        let ids = ids();
        let mut seq = Sequencer::new(1000, Policies::default());
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[
                create("c", ConversationKind::Group, &["a"], 1),
                send("c", "a", "m1"),
            ],
        )
        .await;
        let (original, _) = delivered(&out[1]);
        // A retry beyond the dedupe window, planned without the read.
        let mut plan = seq
            .plan(&store, &ids, &[send("c", "a", "m1")], false)
            .await
            .unwrap();
        let refused = store.commit(std::mem::take(&mut plan.mutations)).await;
        assert!(
            matches!(refused, Err(StoreError::Conflict(_))),
            "{refused:?}"
        );
        seq.forget();
        let out = run(&mut seq, &store, &ids, &[send("c", "a", "m1")]).await;
        assert_eq!(delivered(&out[0]).0, original);
    }

    fn update(
        conv: &str,
        actor: &str,
        message_id: MessageId,
        content: Option<&str>,
        id: u64,
    ) -> Incoming {
        let c = UpdateCommand {
            command_id: MessageId::from_u64(id),
            tenant: TenantId::new("t").unwrap(),
            conversation_id: ConversationId::new(conv).unwrap(),
            message_id,
            actor: u(actor),
            device: DeviceId::default_device(),
            actor_is_admin: false,
            content: content.map(|t| Content::Text { text: t.into() }),
        };
        Incoming {
            command: if content.is_some() {
                Command::Edit(c)
            } else {
                Command::Delete(c)
            },
            reply_to: None,
        }
    }

    fn updated(o: &Outcome) -> &Message {
        match o {
            Outcome::Update { message, .. } => message,
            other => panic!("expected an update, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn edits_and_deletes_are_sequenced_and_policed() {
        let (_dir, store) = open();
        let ids = ids();
        let mut seq = Sequencer::new(1000, Policies::default());
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[
                create("c", ConversationKind::Group, &["a", "b"], 1),
                send("c", "a", "m1"),
                send("c", "a", "m2"),
            ],
        )
        .await;
        let (m1, m2) = match (&out[1], &out[2]) {
            (Outcome::Deliver { message: x, .. }, Outcome::Deliver { message: y, .. }) => {
                (x.message_id, y.message_id)
            }
            other => panic!("{other:?}"),
        };
        // An edit then a delete: both happen, in that order.
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[
                update("c", "a", m1, Some("fixed"), 10),
                update("c", "a", m1, None, 11),
            ],
        )
        .await;
        assert_eq!(
            updated(&out[0]).content,
            Some(Content::Text {
                text: "fixed".into()
            })
        );
        assert!(updated(&out[1]).deleted_at.is_some() && updated(&out[1]).content.is_none());
        // A delete then an edit: the edit is refused; the end is the same.
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[
                update("c", "a", m2, None, 12),
                update("c", "a", m2, Some("too late"), 13),
            ],
        )
        .await;
        assert!(updated(&out[0]).deleted_at.is_some());
        assert_eq!(code(&out[1]), ErrorCode::Conflict);
        // Only the sender edits; unknown messages are not found.
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[
                send("c", "b", "m3"),
                update("c", "a", MessageId::from_u64(42), Some("?"), 14),
            ],
        )
        .await;
        let m3 = match &out[0] {
            Outcome::Deliver { message, .. } => message.message_id,
            other => panic!("{other:?}"),
        };
        assert_eq!(code(&out[1]), ErrorCode::NotFound);
        let out = run(
            &mut seq,
            &store,
            &ids,
            &[update("c", "a", m3, Some("not mine"), 15)],
        )
        .await;
        assert_eq!(code(&out[0]), ErrorCode::Forbidden);
    }
}
